package broker

import (
	"maps"
	"reflect"
	"testing"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestDecodeSendHeaderV2Equiv: the reflection-free V2 decode gives the
// same header, or the same *remoting.HeaderError, as DecodeHeader.
func TestDecodeSendHeaderV2Equiv(t *testing.T) {
	full := map[string]string{"a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "1700000000000",
		"h": "0", "i": "KEYS\x01k\x02", "j": "1", "k": "false", "l": "16", "m": "TRUE", "n": "broker-a"}
	with := func(k, v string) map[string]string { return extWith(full, k, v) }
	cases := []map[string]string{full, with("i", "\x00"), with("j", "\x00"), with("k", "\x00"), with("l", "\x00"),
		with("m", "\x00"), with("n", "\x00"), with("d", " 7 "), with("e", "x"), with("e", "2147483648"),
		with("g", "9223372036854775808"), with("g", "-5"), with("k", "yes"), with("m", "1"), with("m", "False"),
		with("a", "\x00"), with("c", "\x00"), with("h", "\x00"), with("j", "1.5"), with("l", ""), with("a", "")}
	for k := range full {
		cases = append(cases, with(k, "\x00"), with(k, "bad value"))
	}
	for i, ext := range cases {
		req := &remoting.RemotingCommand{Code: remoting.RequestSendMessageV2, ExtFields: ext}
		var want wire.SendMessageRequestHeaderV2
		wantErr := req.DecodeHeader(&want)
		got, gotErr := decodeSendHeaderV2(ext)
		if (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()) {
			t.Fatalf("case %d %v: error %v, want %v", i, ext, gotErr, wantErr)
		}
		if wantErr == nil && !reflect.DeepEqual(got, want.V1()) {
			t.Fatalf("case %d: got %+v, want %+v", i, got, want.V1())
		}
		var he *remoting.HeaderError
		if gotErr != nil && !reflect.TypeOf(gotErr).AssignableTo(reflect.TypeOf(he)) {
			t.Fatalf("case %d: error type %T", i, gotErr)
		}
	}
}

func BenchmarkDecodeSendHeaderV2(b *testing.B) {
	req := &remoting.RemotingCommand{Code: remoting.RequestSendMessageV2, ExtFields: map[string]string{"a": "PG", "b": "T",
		"c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "1700000000000", "h": "0", "i": "KEYS\x01k\x02", "j": "0",
		"k": "false", "m": "false"}}
	b.Run("reflect", func(b *testing.B) {
		for b.Loop() {
			var h wire.SendMessageRequestHeaderV2
			if err := req.DecodeHeader(&h); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			if _, err := decodeSendHeader(req); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// extWith returns a copy of ext with k set to v, or removed when v is
// "\x00" (the header-decode equivalence tests' case builder).
func extWith(ext map[string]string, k, v string) map[string]string {
	m := maps.Clone(ext)
	if v == "\x00" {
		delete(m, k)
	} else {
		m[k] = v
	}
	return m
}
