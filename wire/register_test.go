package wire

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func registerTestBody() *RegisterBrokerBody {
	return &RegisterBrokerBody{
		TopicConfigSerializeWrapper: TopicConfigSerializeWrapper{
			TopicConfigTable: map[string]TopicConfig{
				"A": {TopicName: "A", ReadQueueNums: 8, WriteQueueNums: 4, Perm: 6, TopicFilterType: "SINGLE_TAG", Attributes: map[string]string{"+message.type": "NORMAL"}},
				"B": {TopicName: "B", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 4, TopicFilterType: "MULTI_TAG"},
			},
			DataVersion: DataVersion{StateVersion: 2, Timestamp: 1700000000000, Counter: 9},
		},
		FilterServerList: []string{"f:1"},
	}
}

func TestRegisterBodyRoundTrip(t *testing.T) {
	for _, compressed := range []bool{false, true} {
		b, err := EncodeRegisterBrokerBody(registerTestBody(), compressed)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeRegisterBrokerBody(b, compressed)
		if err != nil {
			t.Fatalf("compressed=%v: %v", compressed, err)
		}
		want := registerTestBody()
		if compressed {
			// The compact form has no attributes-less "{}" vs nil distinction.
			tcB := want.TopicConfigSerializeWrapper.TopicConfigTable["B"]
			tcB.Attributes = map[string]string{}
			want.TopicConfigSerializeWrapper.TopicConfigTable["B"] = tcB
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("compressed=%v:\n got %+v\nwant %+v", compressed, got, want)
		}
	}
}

// javaCompressedBody builds a body the way RocketMQ's
// RegisterBrokerBody.encode(true) lays it out, independently of our encoder.
func javaCompressedBody(t *testing.T, withMappingSection bool, topicLines ...string) []byte {
	var raw bytes.Buffer
	item := func(s string) {
		_ = binary.Write(&raw, binary.BigEndian, int32(len(s)))
		raw.WriteString(s)
	}
	item(`{"counter":3,"stateVersion":0,"timestamp":1700000000000}`)
	_ = binary.Write(&raw, binary.BigEndian, int32(len(topicLines)))
	for _, l := range topicLines {
		item(l)
	}
	item(`[]`)
	if withMappingSection {
		_ = binary.Write(&raw, binary.BigEndian, int32(0))
	}
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	if _, err := zw.Write(raw.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return z.Bytes()
}

func TestDecodeJavaCompressedBody(t *testing.T) {
	for _, mapping := range []bool{true, false} {
		b := javaCompressedBody(t, mapping, `TopicTest 4 4 6 SINGLE_TAG {}`, `%RETRY%g 1 1 6 SINGLE_TAG {"a":"b"}`, `Old 2 2 6 SINGLE_TAG`)
		body, err := DecodeRegisterBrokerBody(b, true)
		if err != nil {
			t.Fatalf("mapping=%v: %v", mapping, err)
		}
		tct := body.TopicConfigSerializeWrapper.TopicConfigTable
		if len(tct) != 3 || tct["TopicTest"].WriteQueueNums != 4 || tct["%RETRY%g"].Attributes["a"] != "b" || tct["Old"].ReadQueueNums != 2 {
			t.Fatalf("topics %+v", tct)
		}
		if body.TopicConfigSerializeWrapper.DataVersion.Counter != 3 {
			t.Fatalf("data version %+v", body.TopicConfigSerializeWrapper.DataVersion)
		}
	}
	bad := javaCompressedBody(t, false, `Broken 4 x 6 SINGLE_TAG`)
	if _, err := DecodeRegisterBrokerBody(bad, true); !errors.Is(err, ErrBadBody) {
		t.Fatalf("bad topic line: want ErrBadBody, got %v", err)
	}
	if _, err := DecodeRegisterBrokerBody([]byte("not zlib"), true); !errors.Is(err, ErrBadBody) {
		t.Fatalf("not zlib: want ErrBadBody, got %v", err)
	}
	truncated := javaCompressedBody(t, false, `T 1 1 6 SINGLE_TAG`)
	if _, err := DecodeRegisterBrokerBody(truncated[:len(truncated)-6], true); !errors.Is(err, ErrBadBody) {
		t.Fatalf("truncated: want ErrBadBody, got %v", err)
	}
}

func TestDecodeJavaJSONBody(t *testing.T) {
	// Field order and extra fields as a Java 5.x broker's fastjson writes them,
	// including a static-topic mapping with an unquoted integer key.
	const body = `{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":7,"stateVersion":0,"timestamp":1700000000000},` +
		`"topicConfigTable":{"TopicTest":{"attributes":{},"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4},` +
		`"Defaults":{}},` +
		`"topicQueueMappingInfoMap":{"S":{"currIdMap":{0:"b"},"bname":"b","epoch":1}}}}`
	b, err := DecodeRegisterBrokerBody([]byte(body), false)
	if err != nil {
		t.Fatal(err)
	}
	tct := b.TopicConfigSerializeWrapper.TopicConfigTable
	if tct["TopicTest"].WriteQueueNums != 4 || b.TopicConfigSerializeWrapper.DataVersion.Counter != 7 {
		t.Fatalf("decoded %+v", b)
	}
	// Missing fields take RocketMQ's TopicConfig defaults.
	if d := tct["Defaults"]; d.TopicName != "Defaults" || d.ReadQueueNums != 16 || d.WriteQueueNums != 16 || d.Perm != 6 || d.TopicFilterType != "SINGLE_TAG" {
		t.Fatalf("defaults %+v", d)
	}
	empty, err := DecodeRegisterBrokerBody(nil, false)
	if err != nil || empty.TopicConfigSerializeWrapper.TopicConfigTable == nil {
		t.Fatalf("empty body %+v %v", empty, err)
	}
}

// FuzzDecodeRegisterBrokerBody: no body panics the decoder or makes it
// allocate more than a small multiple of what the body inflates to,
// whatever its length fields claim; what decodes re-encodes, in the plain
// layout to the same body, and in the compressed one to the same body as
// far as RocketMQ's compact topic form carries it.
func FuzzDecodeRegisterBrokerBody(f *testing.F) {
	plain, _ := EncodeRegisterBrokerBody(registerTestBody(), false)
	packed, _ := EncodeRegisterBrokerBody(registerTestBody(), true)
	f.Add(plain, false)
	f.Add(packed, true)
	f.Add([]byte(`{0:{1:[2,{3:"x"}]}}`), false)
	// A data version item claiming the largest length, with 3 bytes after.
	var huge bytes.Buffer
	zw := zlib.NewWriter(&huge)
	_, _ = zw.Write(binary.BigEndian.AppendUint32(nil, maxRegisterItem))
	_, _ = zw.Write([]byte("{}x"))
	_ = zw.Close()
	f.Add(huge.Bytes(), true)
	f.Fuzz(func(t *testing.T, data []byte, compressed bool) {
		inflated := len(data)
		if compressed {
			if zr, err := zlib.NewReader(bytes.NewReader(data)); err == nil {
				n, _ := io.Copy(io.Discard, io.LimitReader(zr, maxRegisterInflated+maxRegisterItem+1))
				inflated = int(n)
			}
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		body, err := DecodeRegisterBrokerBody(data, compressed)
		runtime.ReadMemStats(&after)
		if got, most := after.TotalAlloc-before.TotalAlloc, uint64(1<<20+64*inflated); got > most {
			t.Fatalf("decoding %d bytes (%d inflated) allocated %d bytes", len(data), inflated, got)
		}
		_ = QuoteLegacyKeys(data)
		if err != nil {
			if !errors.Is(err, ErrBadBody) {
				t.Fatalf("error %v does not wrap ErrBadBody", err)
			}
			return
		}
		enc, err := EncodeRegisterBrokerBody(body, false)
		if err != nil {
			t.Fatalf("decoded body does not encode: %v", err)
		}
		back, err := DecodeRegisterBrokerBody(enc, false)
		if err != nil || !sameRegisterBody(back, body, false) {
			t.Fatalf("plain round trip: %+v (%v), want %+v", back, err, body)
		}
		enc, err = EncodeRegisterBrokerBody(body, true)
		if err != nil {
			t.Fatalf("decoded body does not compress: %v", err)
		}
		back, err = DecodeRegisterBrokerBody(enc, true)
		if err != nil {
			t.Fatalf("compressed re-encoding does not decode: %v", err)
		}
		for name, tc := range body.TopicConfigSerializeWrapper.TopicConfigTable {
			if name != tc.TopicName || strings.Count(string(appendCompactTopicConfig(nil, tc)), " ") != 5 {
				return // the compact form cannot carry it, in RocketMQ either
			}
		}
		if !sameRegisterBody(back, body, true) {
			t.Fatalf("compressed round trip: %+v, want %+v", back, body)
		}
	})
}

// sameRegisterBody compares two decoded bodies; compact compares only
// what the compressed layout carries (no sysFlag or order, attributes
// always present).
func sameRegisterBody(a, b *RegisterBrokerBody, compact bool) bool {
	if a.TopicConfigSerializeWrapper.DataVersion != b.TopicConfigSerializeWrapper.DataVersion ||
		!slices.Equal(a.FilterServerList, b.FilterServerList) ||
		len(a.TopicConfigSerializeWrapper.TopicConfigTable) != len(b.TopicConfigSerializeWrapper.TopicConfigTable) {
		return false
	}
	for name, x := range a.TopicConfigSerializeWrapper.TopicConfigTable {
		y, ok := b.TopicConfigSerializeWrapper.TopicConfigTable[name]
		if compact {
			x.TopicSysFlag, x.Order, y.TopicSysFlag, y.Order = 0, false, 0, false
		}
		if !ok || !maps.Equal(x.Attributes, y.Attributes) {
			return false
		}
		x.Attributes, y.Attributes = nil, nil
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

// FuzzDecodeLegacyRegisterBody: a pre-3.0.11 broker's body (a bare
// TopicConfigSerializeWrapper) never panics the decoder, fails only with
// ErrBadBody, allocates at most a small multiple of its length, holds at
// most MaxRegisterTopics topics, and what decodes re-encodes to a body
// that decodes the same.
func FuzzDecodeLegacyRegisterBody(f *testing.F) {
	legacy, _ := json.Marshal(registerTestBody().TopicConfigSerializeWrapper)
	f.Add(legacy)
	f.Add([]byte(`{"topicConfigTable":{"a":{"attributes":{"x":"y"}}},"dataVersion":{"counter":3}}`))
	f.Add([]byte(`{"topicConfigTable":{"a":null,"b":{}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		body, err := DecodeLegacyRegisterBody(data)
		runtime.ReadMemStats(&after)
		if got, most := after.TotalAlloc-before.TotalAlloc, uint64(1<<20+64*len(data)); got > most {
			t.Fatalf("decoding %d bytes allocated %d bytes", len(data), got)
		}
		if err != nil {
			if !errors.Is(err, ErrBadBody) {
				t.Fatalf("error %v does not wrap ErrBadBody", err)
			}
			return
		}
		if n := len(body.TopicConfigSerializeWrapper.TopicConfigTable); n > MaxRegisterTopics {
			t.Fatalf("decoded %d topics, at most %d", n, MaxRegisterTopics)
		}
		enc, err := json.Marshal(body.TopicConfigSerializeWrapper)
		if err != nil {
			t.Fatalf("decoded body does not encode: %v", err)
		}
		back, err := DecodeLegacyRegisterBody(enc)
		if err != nil || !sameRegisterBody(back, body, false) {
			t.Fatalf("round trip: %+v (%v), want %+v", back, err, body)
		}
	})
}
