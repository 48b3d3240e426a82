package remoting

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// sameCommand compares the wire-visible fields of two commands.
func sameCommand(a, b *RemotingCommand) bool {
	norm := func(m map[string]string) map[string]string {
		if len(m) == 0 {
			return nil
		}
		return m
	}
	return a.Code == b.Code && a.Language == b.Language && a.Version == b.Version &&
		a.Opaque == b.Opaque && a.Flag == b.Flag && a.Remark == b.Remark &&
		a.SerializeType == b.SerializeType && bytes.Equal(a.Body, b.Body) &&
		reflect.DeepEqual(norm(a.ExtFields), norm(b.ExtFields))
}

func TestJSONFrameMatchesGoClientLayout(t *testing.T) {
	c := &RemotingCommand{
		Code: RequestGetRouteInfoByTopic, Language: LanguageGo, Version: 317, Opaque: 7,
		ExtFields: map[string]string{"topic": "T<1>"}, Body: []byte("xy"),
	}
	frame, err := EncodeFrame(c)
	if err != nil {
		t.Fatal(err)
	}
	// The exact bytes jsoniter produces in the official Go client:
	// fixed field order, HTML escaping, remark always present.
	wantHeader := `{"code":105,"language":"GO","version":317,"opaque":7,"flag":0,"remark":"","extFields":{"topic":"T\u003c1\u003e"}}`
	if got := string(frame[8 : 8+len(wantHeader)]); got != wantHeader {
		t.Fatalf("header\n got %s\nwant %s", got, wantHeader)
	}
	if n := binary.BigEndian.Uint32(frame[0:4]); int(n) != 4+len(wantHeader)+2 {
		t.Fatalf("length field %d", n)
	}
	if hf := binary.BigEndian.Uint32(frame[4:8]); hf != uint32(len(wantHeader)) {
		t.Fatalf("header flag %#x, want JSON type and length %d", hf, len(wantHeader))
	}
	back, err := DecodeFrame(frame[4:])
	if err != nil {
		t.Fatal(err)
	}
	if !sameCommand(c, back) {
		t.Fatalf("round trip: %v != %v", back, c)
	}
}

func TestJSONLanguageNamesAndNumbers(t *testing.T) {
	for _, tc := range []struct {
		lang string
		want LanguageCode
	}{{`"JAVA"`, LanguageJava}, {`"GO"`, LanguageGo}, {`"NODE_JS"`, LanguageNodeJS}, {`9`, LanguageGo}, {`"COBOL"`, LanguageOther}} {
		h := `{"code":1,"language":` + tc.lang + `,"version":1,"opaque":1,"flag":1,"serializeTypeCurrentRPC":"JSON"}`
		frame := binary.BigEndian.AppendUint32(nil, uint32(len(h)))
		frame = append(frame, h...)
		c, err := DecodeFrame(frame)
		if err != nil {
			t.Fatalf("%s: %v", tc.lang, err)
		}
		if c.Language != tc.want || !c.IsResponse() || c.ExtFields != nil {
			t.Fatalf("%s: got %v", tc.lang, c)
		}
	}
}

// TestRocketMQFrameHandChecked builds a ROCKETMQ frame byte by byte from
// protocol.md and checks both directions.
func TestRocketMQFrameHandChecked(t *testing.T) {
	want := []byte{
		0, 0, 0, 38, // length = 4 + 32 header + 2 body
		1, 0, 0, 32, // serialize type 1, header length 13+6+4+9 = 32
		0x01, 0x35, // code 309
		0,          // language JAVA
		0x01, 0x91, // version 401
		0, 0, 0, 42, // opaque
		0, 0, 0, 2, // flag: oneway
		0, 0, 0, 2, 'h', 'i', // remark
		0, 0, 0, 9, // ext length
		0, 1, 'k', 0, 0, 0, 2, 'v', 'w', // k=vw
		'o', 'k', // body
	}
	c := &RemotingCommand{Code: 309, Language: LanguageJava, Version: 401, Opaque: 42, Flag: FlagOneway,
		Remark: "hi", ExtFields: map[string]string{"k": "vw"}, Body: []byte("ok"), SerializeType: SerializeRocketMQ}
	got, err := EncodeFrame(c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encode\n got %s\nwant %s", hex.EncodeToString(got), hex.EncodeToString(want))
	}
	back, err := DecodeFrame(want[4:])
	if err != nil {
		t.Fatal(err)
	}
	if !sameCommand(c, back) || !back.IsOneway() {
		t.Fatalf("decode: %v", back)
	}
}

func TestRocketMQRoundTripPreservesExtOrder(t *testing.T) {
	// Build ext fields in non-sorted order by hand; decode→encode must keep it.
	ext := []byte{}
	for _, kv := range [][2]string{{"z", "1"}, {"a", ""}, {"m", "3"}} {
		ext = binary.BigEndian.AppendUint16(ext, uint16(len(kv[0])))
		ext = append(ext, kv[0]...)
		ext = binary.BigEndian.AppendUint32(ext, uint32(len(kv[1])))
		ext = append(ext, kv[1]...)
	}
	h := []byte{0, 10, 9, 1, 61, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0}
	h = binary.BigEndian.AppendUint32(h, uint32(len(ext)))
	h = append(h, ext...)
	frame := binary.BigEndian.AppendUint32(nil, uint32(4+len(h)))
	frame = binary.BigEndian.AppendUint32(frame, 1<<24|uint32(len(h)))
	frame = append(frame, h...)
	c, err := DecodeFrame(frame[4:])
	if err != nil {
		t.Fatal(err)
	}
	again, err := EncodeFrame(c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, frame) {
		t.Fatalf("not byte-identical\n got %x\nwant %x", again, frame)
	}
}

func TestDecodeFrameRejects(t *testing.T) {
	hdr := func(st byte, hl int, rest string) []byte {
		b := []byte{st, byte(hl >> 16), byte(hl >> 8), byte(hl)}
		return append(b, rest...)
	}
	for _, tc := range []struct {
		name  string
		frame []byte
		want  error
		text  string
	}{
		{"short", []byte{0, 0}, ErrInvalidFrame, "shorter"},
		{"header beyond frame", hdr(0, 100, "{}"), ErrInvalidFrame, "beyond frame"},
		{"unknown serialize type", hdr(7, 2, "{}"), ErrInvalidFrame, "serialize type 7"},
		{"invalid json", hdr(0, 9, "{not json"), ErrInvalidHeader, "json"},
		{"json ext not object", hdr(0, 17, `{"extFields":[1]}`), ErrInvalidHeader, "json"},
		{"rocketmq truncated", hdr(1, 3, "\x00\x01\x00"), ErrInvalidHeader, "fixed fields"},
		{"rocketmq remark too long", hdr(1, 21, "\x00\x01\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x00\x7f\xff\xff\xff\x00\x00\x00\x00"), ErrInvalidHeader, "remark"},
		{"rocketmq negative key", hdr(1, 23, "\x00\x01\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\xff\xff"), ErrInvalidHeader, "key"},
	} {
		_, err := DecodeFrame(tc.frame)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: got %v, want %v containing %q", tc.name, err, tc.want, tc.text)
		}
	}
}

// TestGoldenFrames round-trips frames captured from the official Go client
// (written by remoting/golden's TestCaptureGoldenFrames with -update):
// decode→encode must reproduce them byte for byte.
func TestGoldenFrames(t *testing.T) {
	files, err := filepath.Glob("testdata/golden/*.bin")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no golden frames in testdata/golden")
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c, err := DecodeFrame(raw[4:])
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if c.Language != LanguageGo || c.Version != DefaultVersion || c.SerializeType != SerializeJSON {
			t.Errorf("%s: unexpected header %v", f, c)
		}
		again, err := EncodeFrame(c)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, raw) {
			t.Errorf("%s: re-encoded frame differs\n got %q\nwant %q", f, again, raw)
		}
		// The same command must also survive the ROCKETMQ encoding.
		c.SerializeType = SerializeRocketMQ
		rmq, err := EncodeFrame(c)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeFrame(rmq[4:])
		if err != nil || !sameCommand(c, back) {
			t.Errorf("%s: ROCKETMQ round trip: %v %v", f, back, err)
		}
	}
}

// FuzzDecodeFrame feeds arbitrary frames to the decoder: it must never
// panic, and whatever it accepts must re-encode and decode to the same
// command.
func FuzzDecodeFrame(f *testing.F) {
	files, _ := filepath.Glob("testdata/golden/*.bin")
	for _, p := range files {
		if raw, err := os.ReadFile(p); err == nil && len(raw) > 4 {
			f.Add(raw[4:])
		}
	}
	f.Add([]byte{1, 0, 0, 17, 0, 1, 9, 1, 61, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, frame []byte) {
		c, err := DecodeFrame(frame)
		if err != nil {
			return
		}
		out, err := EncodeFrame(c)
		if err != nil {
			return // e.g. a key longer than int16 cannot be re-encoded
		}
		back, err := DecodeFrame(out[4:])
		if err != nil {
			t.Fatalf("re-decode of our own encoding failed: %v\n%x", err, out)
		}
		if c.SerializeType == SerializeRocketMQ && !sameCommand(c, back) {
			t.Fatalf("ROCKETMQ round trip changed the command:\n%v\n%v", c, back)
		}
		if c.SerializeType == SerializeJSON && (back.Code != c.Code || back.Opaque != c.Opaque || back.Flag != c.Flag || len(back.ExtFields) != len(c.ExtFields)) {
			t.Fatalf("JSON round trip changed the command:\n%v\n%v", c, back)
		}
		// Left raw (a LazyResponseExt answer), the same frame decodes, every
		// field reads as from the map, and re-encodes byte for byte.
		lazy, err := DecodeFrameRawExt(frame)
		if err != nil {
			t.Fatalf("decodes with a map but not raw: %v", err)
		}
		for k, v := range c.ExtFields {
			if got, ok := lazy.ExtValue(k); !ok || got != v {
				t.Fatalf("ExtValue(%q) = %q, %v; map has %q", k, got, ok, v)
			}
		}
		n := 0
		lazy.RangeExt(func(string, string) bool { n++; return true })
		if n < len(c.ExtFields) {
			t.Fatalf("RangeExt saw %d pairs, the map has %d keys", n, len(c.ExtFields))
		}
		if c.SerializeType == SerializeRocketMQ {
			again, err := EncodeFrame(lazy)
			if err != nil {
				t.Fatalf("raw command does not re-encode: %v", err)
			}
			if dec, err := DecodeFrame(again[4:]); err != nil || !sameCommand(c, dec) {
				t.Fatalf("raw round trip changed the command: %v\n%v\n%v", err, c, dec)
			}
		}
	})
}
