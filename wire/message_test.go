package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

func sampleMessage() *Message {
	return &Message{
		Topic:                     "TopicTest",
		QueueID:                   3,
		Flag:                      7,
		Body:                      []byte("hello raftmq"),
		Properties:                map[string]string{"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "C0A8000100002A9F0000000000000001", "WAIT": "true"},
		SysFlag:                   SysFlagMultiTags,
		BornTimestamp:             1700000000123,
		BornHost:                  netip.MustParseAddrPort("10.1.2.3:54321"),
		StoreHost:                 netip.MustParseAddrPort("127.0.0.1:10911"),
		ReconsumeTimes:            2,
		PreparedTransactionOffset: 99,
		QueueOffset:               42,
		PhysicalOffset:            123456789,
		StoreTimestamp:            1700000000456,
	}
}

func roundTrip(t *testing.T, m *Message) (*Message, []byte) {
	t.Helper()
	b, err := AppendMessage(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	size, _ := EncodedSize(m)
	if len(b) != size || int(m.StoreSize) != size {
		t.Fatalf("encoded %d bytes, EncodedSize %d, StoreSize %d", len(b), size, m.StoreSize)
	}
	got, n, err := DecodeMessage(b, true)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(b) {
		t.Fatalf("decoded size %d of %d", n, len(b))
	}
	if got.Topic != m.Topic || got.QueueID != m.QueueID || got.Flag != m.Flag || !bytes.Equal(got.Body, m.Body) ||
		got.SysFlag != m.SysFlag || got.BornTimestamp != m.BornTimestamp || got.BornHost != m.BornHost ||
		got.StoreHost != m.StoreHost || got.ReconsumeTimes != m.ReconsumeTimes ||
		got.PreparedTransactionOffset != m.PreparedTransactionOffset || got.QueueOffset != m.QueueOffset ||
		got.PhysicalOffset != m.PhysicalOffset || got.StoreTimestamp != m.StoreTimestamp ||
		got.BodyCRC != m.BodyCRC || got.StoreSize != m.StoreSize || len(got.Properties) != len(m.Properties) {
		t.Fatalf("round trip mismatch:\n got %+v\nwant %+v", got, m)
	}
	for k, v := range m.Properties {
		if got.Properties[k] != v {
			t.Fatalf("property %s = %q want %q", k, got.Properties[k], v)
		}
	}
	return got, b
}

func TestMessageRoundTripV1IPv4(t *testing.T) {
	m := sampleMessage()
	got, b := roundTrip(t, m)
	if binary.BigEndian.Uint32(b[4:]) != MagicV1 {
		t.Fatal("short topic not V1")
	}
	if got.SysFlag&(SysFlagBornHostV6|SysFlagStoreHostV6) != 0 {
		t.Fatal("IPv6 bits set for IPv4 hosts")
	}
	if got.Tags() != "TagA" || strings.Join(got.Keys(), ",") != "k1,k2" || got.UniqKey() != m.Properties["UNIQ_KEY"] {
		t.Fatalf("tags/keys/uniq: %q %q %q", got.Tags(), got.Keys(), got.UniqKey())
	}
	// Deterministic encoding (properties sorted).
	b2, _ := AppendMessage(nil, m)
	if !bytes.Equal(b, b2) {
		t.Fatal("encoding not deterministic")
	}
}

func TestMessageRoundTripV2AndIPv6(t *testing.T) {
	m := sampleMessage()
	m.Topic = strings.Repeat("t", 128)
	m.BornHost = netip.MustParseAddrPort("[2001:db8::1]:1234")
	_, b := roundTrip(t, m)
	if binary.BigEndian.Uint32(b[4:]) != MagicV2 {
		t.Fatal("long topic not V2")
	}
	if m.SysFlag&SysFlagBornHostV6 == 0 || m.SysFlag&SysFlagStoreHostV6 != 0 {
		t.Fatalf("sysflag %#x", m.SysFlag)
	}
	m = sampleMessage()
	m.Topic = strings.Repeat("x", 127) // longest V1 topic
	m.StoreHost = netip.MustParseAddrPort("[::1]:10911")
	m.BornHost = netip.MustParseAddrPort("[fe80::2]:1")
	_, b = roundTrip(t, m)
	if binary.BigEndian.Uint32(b[4:]) != MagicV1 || m.SysFlag&SysFlagStoreHostV6 == 0 {
		t.Fatal("127-byte topic should stay V1 with IPv6 store host")
	}
	if id := m.MsgID(); len(id) != 56 {
		t.Fatalf("IPv6 msgId %q", id)
	}
	// Empty body, no properties, no hosts.
	roundTrip(t, &Message{Topic: "T", BornHost: netip.MustParseAddrPort("0.0.0.0:0"), StoreHost: netip.MustParseAddrPort("0.0.0.0:0")})
}

func TestMessageIllegalSizes(t *testing.T) {
	m := sampleMessage()
	m.Topic = strings.Repeat("t", MaxTopicLen+1)
	if _, err := AppendMessage(nil, m); !errors.Is(err, ErrMessageIllegal) {
		t.Fatalf("huge topic: %v", err)
	}
	m = sampleMessage()
	m.Properties = map[string]string{"X": strings.Repeat("v", MaxPropertiesLen)}
	if _, err := AppendMessage(nil, m); !errors.Is(err, ErrMessageIllegal) {
		t.Fatalf("huge properties: %v", err)
	}
}

// TestMessageDecodedByGoClient checks wire compatibility with the official Go
// client's decoder, which reads pull response bodies.
func TestMessageDecodedByGoClient(t *testing.T) {
	m := sampleMessage()
	b1, _ := AppendMessage(nil, m)
	m2 := sampleMessage()
	m2.Body = bytes.Repeat([]byte("z"), 3000)
	m2.PhysicalOffset = 1 << 40
	b, _ := AppendMessage(b1, m2)
	msgs := primitive.DecodeMessage(b)
	if len(msgs) != 2 {
		t.Fatalf("client decoded %d messages", len(msgs))
	}
	c := msgs[0]
	if c.Topic != m.Topic || string(c.Body) != string(m.Body) || c.Queue.QueueId != int(m.QueueID) ||
		c.QueueOffset != m.QueueOffset || c.CommitLogOffset != m.PhysicalOffset || c.StoreSize != m.StoreSize ||
		c.BornHost != "10.1.2.3:54321" || c.StoreHost != "127.0.0.1:10911" || c.GetTags() != "TagA" ||
		c.BodyCRC != int32(m.BodyCRC) || c.ReconsumeTimes != m.ReconsumeTimes {
		t.Fatalf("client view: %v", c)
	}
	if c.OffsetMsgId != m.MsgID() {
		t.Fatalf("client offset msgId %s, ours %s", c.OffsetMsgId, m.MsgID())
	}
	if msgs[1].CommitLogOffset != 1<<40 || len(msgs[1].Body) != 3000 {
		t.Fatalf("second message: %v", msgs[1])
	}
}

func decodeUnchecked(b []byte) (*Message, int, error) {
	c := bytes.Clone(b)
	SealCRC(c)
	return DecodeMessage(c, false)
}

func TestTagsHashCodeJavaSemantics(t *testing.T) {
	cases := map[string]int64{
		"":            0,
		"TagA":        2598919,
		"hello":       99162322,
		"Hello World": -862545276, // int overflow, as Java
		"\U0001F600":  1772899,    // surrogate pair counted as two UTF-16 units
		"é":           233,
	}
	for s, want := range cases {
		if got := TagsHashCode(s); got != want {
			t.Errorf("TagsHashCode(%q) = %d, want %d", s, got, want)
		}
	}
}

func TestPatchFields(t *testing.T) {
	m := sampleMessage()
	m.BornHost = netip.MustParseAddrPort("[::2]:5")
	b, _ := AppendMessage(nil, m)
	PatchStored(b, 777, 888)
	if _, _, err := DecodeMessage(b, false); err != nil {
		t.Fatalf("patched entry does not verify: %v", err)
	}
	PatchQueueOffset(b, 999)
	// The entry CRC leaves QUEUEOFFSET out, so a pulled copy with its queue
	// offset patched in still verifies (the schedule service and send-back
	// re-read such copies), while any other change is still caught.
	if _, _, err := DecodeMessage(b, false); err != nil {
		t.Fatalf("queue-offset patched copy does not verify: %v", err)
	}
	b[OffQueueOffset-1] ^= 1 // last byte of FLAG, just before QUEUEOFFSET
	if _, _, err := DecodeMessage(b, false); !errors.Is(err, ErrCorruptMessage) {
		t.Fatalf("flipped FLAG byte verified: %v", err)
	}
	b[OffQueueOffset-1] ^= 1
	got, _, err := decodeUnchecked(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.PhysicalOffset != 777 || got.StoreTimestamp != 888 || got.QueueOffset != 999 {
		t.Fatalf("patched: %d %d %d", got.PhysicalOffset, got.StoreTimestamp, got.QueueOffset)
	}
}

// TestStoredPropertiesAndTagsHashFastPaths pins the put/dispatch fast paths
// to the plain definitions: sorted properties without a caller's CRC
// property plus the zero CRC property, and Java's hashCode of the tag.
func TestStoredPropertiesAndTagsHashFastPaths(t *testing.T) {
	for _, props := range []map[string]string{nil, {}, {"TAGS": "a"},
		{"UNIQ_KEY": "u", "TAGS": "t", "KEYS": "k1 k2", PropertyCRC32: "123", "b": "", "a": "x"}} {
		plain := map[string]string{}
		for k, v := range props {
			if k != PropertyCRC32 {
				plain[k] = v
			}
		}
		want := EncodeProperties(plain) + PropertyCRC32 + "\x010000000000\x02"
		if got := StoredProperties(props); got != want {
			t.Errorf("StoredProperties(%v) = %q, want %q", props, got, want)
		}
	}
	big := map[string]string{}
	for i := range 40 {
		big[fmt.Sprintf("k%02d", i)] = "v"
	}
	if got := StoredProperties(big); !strings.HasPrefix(got, "k00\x01v\x02k01\x01v\x02") || len(got) != 40*6+CRCPropLen {
		t.Errorf("StoredProperties of 40 keys = %q", got)
	}
	for _, tag := range []string{"", "TagA", "标签", "😀x", "a\xffb"} {
		if got, want := TagsHashCodeBytes([]byte(tag)), TagsHashCode(tag); got != want {
			t.Errorf("TagsHashCodeBytes(%q) = %d, want %d", tag, got, want)
		}
	}
}

// FuzzDecodeMessage: the strict decoder, the layout check and the lenient
// reader agree, and whatever decodes re-encodes to the same fields.
func FuzzDecodeMessage(f *testing.F) {
	m := sampleMessage()
	b, _ := AppendMessage(nil, m)
	f.Add(b)
	m.Topic = strings.Repeat("v", 200)
	m.StoreHost = netip.MustParseAddrPort("[::1]:1")
	b2, _ := AppendMessage(nil, m)
	f.Add(b2)
	f.Add(make([]byte, 16))
	f.Fuzz(func(t *testing.T, data []byte) {
		msg, n, err := DecodeMessage(data, false)
		l, err2 := CheckEntry(data, true)
		// The full decoder also checks BODYCRC, so it may refuse what the
		// layout check accepts, never the other way round.
		if err == nil && (err2 != nil || l.Magic == MagicBlank) {
			t.Fatalf("decoders disagree: %v vs %v (magic %#x)", err, err2, l.Magic)
		}
		if err != nil {
			if !errors.Is(err, ErrCorruptMessage) && !errors.Is(err, ErrEndOfData) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		if n != l.Size || n > len(data) || n < MinMessageSize {
			t.Fatalf("sizes %d %d of %d", n, l.Size, len(data))
		}
		// A client's lenient reader accepts every entry the store accepts.
		e, n3, err3 := DecodeEntry(data)
		if err3 != nil || n3 != n || string(e.Topic) != msg.Topic || !bytes.Equal(e.Body, msg.Body) || e.OffsetMsgID() != msg.MsgID() {
			t.Fatalf("lenient reader: %+v %d %v", e, n3, err3)
		}
		// Whatever decodes must re-encode to a message that decodes to the
		// same fields.
		re, err := AppendMessage(nil, msg)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		back, _, err := DecodeMessage(re, false)
		if err != nil {
			t.Fatalf("decode of re-encoded: %v", err)
		}
		if back.Topic != msg.Topic || !bytes.Equal(back.Body, msg.Body) || back.PhysicalOffset != msg.PhysicalOffset ||
			back.StoreTimestamp != msg.StoreTimestamp || back.BornHost.Port() != msg.BornHost.Port() ||
			back.BornHost.Addr().Unmap() != msg.BornHost.Addr().Unmap() || len(back.Properties) != len(msg.Properties) {
			t.Fatalf("re-encode changed the message:\n%+v\n%+v", msg, back)
		}
	})
}
