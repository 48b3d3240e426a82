package remoting

import (
	"testing"
	"unicode/utf8"
)

// Expected signatures computed outside Go (Python's hmac module):
// base64(HmacSHA1("sk12345", "ak12345" + "PG" + "T" + "hello")) and the
// same with the SecurityToken value "tok" after the access key, the
// values in the byte order of their keys (AccessKey < SecurityToken <
// producerGroup < topic), as RocketMQ's AclClientRPCHook sorts them.
const (
	vectorSignature      = "sJH2/DaaS8Y2VBlLt5CZBbA/wBk="
	vectorSignatureToken = "TZ0sgmVdWx1sE1+QDQV9zmNRkcQ="
)

func vectorRequest() *RemotingCommand {
	r := NewRequest(RequestSendMessage, nil, []byte("hello"))
	r.ExtFields["topic"] = "T"
	r.ExtFields["producerGroup"] = "PG"
	return r
}

func TestSignMatchesRocketMQVector(t *testing.T) {
	r := vectorRequest()
	Credentials{AccessKey: "ak12345", SecretKey: "sk12345"}.Sign(r)
	if got := r.ExtFields[ExtSignature]; got != vectorSignature {
		t.Fatalf("signature %q, want %q", got, vectorSignature)
	}
	if r.ExtFields[ExtAccessKey] != "ak12345" {
		t.Fatalf("AccessKey field %q", r.ExtFields[ExtAccessKey])
	}
	r = vectorRequest()
	Credentials{AccessKey: "ak12345", SecretKey: "sk12345", SecurityToken: "tok"}.Sign(r)
	if got := r.ExtFields[ExtSignature]; got != vectorSignatureToken {
		t.Fatalf("signature with token %q, want %q", got, vectorSignatureToken)
	}
	// Signing again (a retry) gives the same fields.
	Credentials{AccessKey: "ak12345", SecretKey: "sk12345", SecurityToken: "tok"}.Sign(r)
	if got := r.ExtFields[ExtSignature]; got != vectorSignatureToken {
		t.Fatalf("re-signed %q, want %q", got, vectorSignatureToken)
	}
}

// roundTrip encodes r in st and decodes it as a server would (ROCKETMQ
// headers of lazily decoded codes stay raw).
func roundTrip(t testing.TB, r *RemotingCommand, st SerializeType, lazy bool) *RemotingCommand {
	t.Helper()
	r.SerializeType = st
	frame, err := EncodeFrame(r)
	if err != nil {
		t.Fatal(err)
	}
	var got *RemotingCommand
	if lazy {
		got, err = DecodeFrameRawExt(frame[4:])
	} else {
		got, err = DecodeFrame(frame[4:])
	}
	if err != nil {
		t.Fatal(err)
	}
	return got
}

type testAppender struct{ topic, group string }

func (a *testAppender) AppendExt(w *ExtWriter) {
	w.String("producerGroup", a.group)
	w.String("topic", a.topic)
	w.Int("queueId", 3)
}

func TestVerifySignatureOverTheWire(t *testing.T) {
	creds := Credentials{AccessKey: "ak12345", SecretKey: "sk12345"}
	for _, st := range []SerializeType{SerializeJSON, SerializeRocketMQ} {
		for _, lazy := range []bool{false, true} {
			// Fields from ExtFields and from an ExtAppender are both signed.
			r := NewRequest(RequestSendMessageV2, nil, []byte("body"))
			r.ExtAppender = &testAppender{topic: "T", group: "G"}
			r.ExtFields["extra"] = "x"
			creds.Sign(r)
			got := roundTrip(t, r, st, lazy)
			if !VerifySignature(got, ExtPairs(got), "sk12345") {
				t.Fatalf("%v lazy=%t: valid signature refused", st, lazy)
			}
			if VerifySignature(got, ExtPairs(got), "wrong-secret") {
				t.Fatalf("%v lazy=%t: wrong secret accepted", st, lazy)
			}
			// A changed field or body breaks it.
			r.ExtAppender = &testAppender{topic: "Other", group: "G"}
			got = roundTrip(t, r, st, lazy)
			if VerifySignature(got, ExtPairs(got), "sk12345") {
				t.Fatalf("%v lazy=%t: tampered topic accepted", st, lazy)
			}
		}
	}
}

// The official Go client's ACLInterceptor sends SecurityToken without
// signing it; the Java client signs _UNIQUE_KEY_QUERY, which RocketMQ's
// broker leaves out. Both verify.
func TestVerifySignatureClientVariants(t *testing.T) {
	r := vectorRequest()
	r.ExtFields[ExtAccessKey] = "ak12345"
	r.ExtFields[ExtSecurityToken] = "tok"
	r.ExtFields[ExtSignature] = vectorSignature // signed without the token
	if !VerifySignature(r, ExtPairs(r), "sk12345") {
		t.Fatal("Go client's token-less signature refused")
	}
	r = vectorRequest()
	r.ExtFields[ExtUniqueKeyQuery] = "false"
	Credentials{AccessKey: "ak12345", SecretKey: "sk12345"}.Sign(r)
	if !VerifySignature(r, ExtPairs(r), "sk12345") {
		t.Fatal("signature including _UNIQUE_KEY_QUERY refused")
	}
	r = vectorRequest()
	if VerifySignature(r, ExtPairs(r), "sk12345") {
		t.Fatal("unsigned request accepted")
	}
}

// FuzzSignatureContent: whatever the fields and body, a signed request
// verifies after the wire round trip (ROCKETMQ headers; JSON ones when the
// fields are valid UTF-8), ExtPairs is
// sorted without repeated keys, and the content holds exactly the values
// and the body.
func FuzzSignatureContent(f *testing.F) {
	f.Add("topic", "T", "producerGroup", "PG", []byte("hello"), "sk12345")
	f.Add("", "", "b", "%RETRY%g", []byte{}, "x")
	f.Add("Signature", "forged", "AccessKey", "other", []byte{0, 1, 2}, "secret")
	f.Add("k\x00", "v\xff", "ü", "\"", []byte("{}"), "")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string, body []byte, secret string) {
		r := NewRequest(RequestPullMessage, nil, body)
		r.ExtFields[k1] = v1
		r.ExtFields[k2] = v2
		pairs := ExtPairs(r)
		for i := 1; i < len(pairs); i++ {
			if pairs[i-1].Key >= pairs[i].Key {
				t.Fatalf("pairs not strictly sorted: %q", pairs)
			}
		}
		n := len(body)
		for _, p := range pairs {
			if p.Key != ExtSignature {
				n += len(p.Value)
			}
		}
		if c := SignatureContent(nil, pairs, body, nil); len(c) != n {
			t.Fatalf("content of %d bytes, want %d", len(c), n)
		}
		Credentials{AccessKey: "ak12345", SecretKey: secret}.Sign(r)
		for _, st := range []SerializeType{SerializeJSON, SerializeRocketMQ} {
			if st == SerializeJSON && !(utf8.ValidString(k1) && utf8.ValidString(v1) && utf8.ValidString(k2) && utf8.ValidString(v2)) {
				continue // JSON carries text: invalid UTF-8 arrives changed, as with any client
			}
			r.SerializeType = st
			frame, err := EncodeFrame(r)
			if err != nil {
				return // a key too long for the header: nothing to verify
			}
			got, err := DecodeFrame(frame[4:])
			if err != nil {
				t.Fatalf("%v: decode: %v", st, err)
			}
			if !VerifySignature(got, ExtPairs(got), secret) {
				t.Fatalf("%v: signed request does not verify", st)
			}
		}
	})
}

// BenchmarkVerifySignature is the broker's per-request ACL cost on a
// send: a V2 send header of 14 fields (ROCKETMQ, left raw as the send
// path decodes it), a 1 KiB body, sorted, concatenated and HMAC'd once.
func BenchmarkVerifySignature(b *testing.B) {
	r := NewRequest(RequestSendMessageV2, nil, make([]byte, 1024))
	for i, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n"} {
		r.ExtFields[k] = "value-of-field-" + string(rune('A'+i))
	}
	Credentials{AccessKey: "ak12345", SecretKey: "sk12345"}.Sign(r)
	got := roundTrip(b, r, SerializeRocketMQ, true)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if !VerifySignature(got, ExtPairs(got), "sk12345") {
			b.Fatal("refused")
		}
	}
}
