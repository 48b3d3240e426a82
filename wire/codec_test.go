package wire

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/remoting"
)

func TestPropertiesRoundTrip(t *testing.T) {
	in := map[string]string{"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "ABC", "a": "b"}
	s := EncodeProperties(in)
	if want := "KEYS\x01k1 k2\x02TAGS\x01TagA\x02UNIQ_KEY\x01ABC\x02a\x01b\x02"; s != want {
		t.Fatalf("encoded %q, want %q", s, want)
	}
	if got := DecodeProperties(s); !reflect.DeepEqual(got, in) {
		t.Fatalf("decoded %v, want %v", got, in)
	}
	if EncodeProperties(nil) != "" {
		t.Fatal("nil map should encode empty")
	}
}

// TestDecodePropertiesJavaRules checks the skipping rules of
// MessageDecoder.string2messageProperties.
func TestDecodePropertiesJavaRules(t *testing.T) {
	cases := map[string]map[string]string{
		"":                         {},
		"a\x01b":                   {"a": "b"}, // no trailing separator
		"\x01b\x02k\x01v\x02":      {"k": "v"}, // empty name skipped
		"a\x01\x02k\x01v\x02":      {"k": "v"}, // empty value skipped
		"ab\x02k\x01v":             {"k": "v"}, // no name/value separator
		"a\x01b\x01c\x02":          {"a": "b\x01c"},
		"\x02\x02x\x01y\x02\x02":   {"x": "y"},
		"k\x01v1\x02k\x01v2\x02":   {"k": "v2"}, // last wins, as HashMap.put
		"ab\x02\x01\x01\x02q\x01r": {"q": "r"},
	}
	for in, want := range cases {
		if got := DecodeProperties(in); !reflect.DeepEqual(got, want) {
			t.Errorf("DecodeProperties(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestMessageIDRoundTrip(t *testing.T) {
	for _, s := range []string{"127.0.0.1:10911", "[2001:db8::5]:65535", "10.1.2.3:0"} {
		id := MessageID{Addr: netip.MustParseAddrPort(s), Offset: 1<<40 + 5}
		enc := EncodeMessageID(id)
		dec, err := ParseMessageID(enc)
		if err != nil || dec != id {
			t.Fatalf("%s: %s decoded to %v, %v", s, enc, dec, err)
		}
	}
	// The id RocketMQ shows for 127.0.0.1:10911 at offset 4096.
	dec, err := ParseMessageID("7F00000100002A9F0000000000001000")
	if err != nil || dec.Addr.String() != "127.0.0.1:10911" || dec.Offset != 4096 {
		t.Fatalf("decoded %v %v", dec, err)
	}
	for _, bad := range []string{"", "XYZ", strings.Repeat("G", 32), "7F000001FFFFFFFF0000000000001000"} {
		if _, err := ParseMessageID(bad); !errors.Is(err, ErrInvalidMessageID) {
			t.Errorf("%q: err %v", bad, err)
		}
	}
}

func TestSendHeaderExtFieldsMatchReflection(t *testing.T) {
	for _, h := range []SendMessageRequestHeaderV2{
		{ProducerGroup: "PG", Topic: "T", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4, QueueID: 3, SysFlag: 1,
			BornTimestamp: 1700000000123, Flag: -2, Properties: "a\x01b\x02", ReconsumeTimes: 1, UnitMode: true,
			MaxReconsumeTimes: 16, Batch: true, BrokerName: "broker-a"},
		{Topic: "T"},
	} {
		var c remoting.RemotingCommand
		c.EncodeHeader(&h)
		// The send path writes the header into the frame with AppendExt,
		// with the properties as a string or from a reused buffer.
		for _, raw := range []bool{false, true} {
			hh := h
			if raw {
				hh.PropertiesRaw, hh.Properties = []byte(h.Properties), ""
			}
			for _, st := range []remoting.SerializeType{remoting.SerializeRocketMQ, remoting.SerializeJSON} {
				frame, err := remoting.EncodeFrame(&remoting.RemotingCommand{SerializeType: st, ExtAppender: &hh})
				if err != nil {
					t.Fatal(err)
				}
				d, err := remoting.DecodeFrame(frame[4:])
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(d.ExtFields, c.ExtFields) {
					t.Fatalf("%v raw=%v: AppendExt %v, EncodeHeader %v", st, raw, d.ExtFields, c.ExtFields)
				}
			}
		}
	}
}

func TestBatchRoundTrip(t *testing.T) {
	entries := []BatchEntry{
		{Flag: 1, Body: []byte("first"), Properties: EncodeProperties(map[string]string{"UNIQ_KEY": "A", "TAGS": "x"})},
		{Flag: 0, Body: []byte("second body"), Properties: ""},
	}
	body, err := EncodeBatch(entries)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeBatch(body)
	if err != nil || len(got) != 2 || string(got[0].Body) != "first" || got[0].Flag != 1 || got[0].Properties != entries[0].Properties || string(got[1].Body) != "second body" {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	if _, err := DecodeBatch(body[:len(body)-1]); !errors.Is(err, ErrMalformedMessage) {
		t.Fatalf("truncated batch: %v", err)
	}
	if _, err := EncodeBatch([]BatchEntry{{Body: []byte("x"), Properties: strings.Repeat("p", 40000)}}); !errors.Is(err, ErrMessageIllegal) {
		t.Fatalf("oversized properties: %v", err)
	}
}

// FuzzDecodeEntry: the lenient reader and the batch decoder never panic
// and never claim bytes beyond the input.
func FuzzDecodeEntry(f *testing.F) {
	m := &Message{Topic: "T", Body: []byte("hello"), Properties: map[string]string{"TAGS": "a"},
		BornHost: netip.MustParseAddrPort("10.0.0.1:1"), StoreHost: netip.MustParseAddrPort("[::2]:2")}
	b, _ := AppendMessage(nil, m)
	f.Add(b)
	batch, _ := EncodeBatch([]BatchEntry{{Flag: 1, Body: []byte("x"), Properties: "A\x01b\x02"}})
	f.Add(batch)
	f.Add(make([]byte, 16))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, n, err := DecodeEntry(data)
		if err == nil && (n <= 0 || n > len(data) || int(e.StoreSize) != n) {
			t.Fatalf("entry of %d bytes (TOTALSIZE %d) from %d", n, e.StoreSize, len(data))
		}
		if err != nil && !errors.Is(err, ErrMalformedMessage) {
			t.Fatalf("unexpected error class: %v", err)
		}
		entries, err := DecodeBatch(data)
		total := 0
		for _, be := range entries {
			total += BatchEntryOverhead + len(be.Body) + len(be.Properties)
		}
		if total > len(data) || (err == nil && total != len(data)) {
			t.Fatalf("batch entries claim %d of %d bytes (err %v)", total, len(data), err)
		}
	})
}

// TestQueueTableBytes pins the stats answers' layout: fastjson's
// MessageQueue-object keys and the value objects' field order.
func TestQueueTableBytes(t *testing.T) {
	mq := MessageQueue{Topic: "T", BrokerName: "b", QueueID: 3}
	got := string(AppendQueueEntry(nil, mq, TopicOffset{MinOffset: 1, MaxOffset: 9}))
	if want := `{"topic":"T","brokerName":"b","queueId":3}:{"minOffset":1,"maxOffset":9,"lastUpdateTimestamp":0}`; got != want {
		t.Fatalf("topic stats entry %s, want %s", got, want)
	}
	got = string(AppendQueueEntry(nil, mq, OffsetWrapper{BrokerOffset: 9, ConsumerOffset: 4, PullOffset: 4}))
	if want := `{"topic":"T","brokerName":"b","queueId":3}:{"brokerOffset":9,"consumerOffset":4,"lastTimestamp":0,"pullOffset":4}`; got != want {
		t.Fatalf("consume stats entry %s, want %s", got, want)
	}
	body := `{"offsetTable":{` + got + `,` + string(AppendQueueEntry(nil, MessageQueue{Topic: "T", BrokerName: "b", QueueID: 1}, OffsetWrapper{})) + `},"consumeTps":0.0}`
	entries, err := DecodeQueueTable([]byte(body), "offsetTable")
	if err != nil || len(entries) != 2 || entries[0].Queue != mq || entries[1].Queue.QueueID != 1 {
		t.Fatalf("decoded %+v, %v", entries, err)
	}
}
