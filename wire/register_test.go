package wire

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"reflect"
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

// FuzzDecodeRegisterBrokerBody checks that no input panics the decoder; go
// test runs only the seeds.
func FuzzDecodeRegisterBrokerBody(f *testing.F) {
	plain, _ := EncodeRegisterBrokerBody(registerTestBody(), false)
	packed, _ := EncodeRegisterBrokerBody(registerTestBody(), true)
	f.Add(plain, false)
	f.Add(packed, true)
	f.Add([]byte(`{0:{1:[2,{3:"x"}]}}`), false)
	f.Fuzz(func(t *testing.T, data []byte, compressed bool) {
		_, _ = DecodeRegisterBrokerBody(data, compressed)
		_ = QuoteLegacyKeys(data)
	})
}
