package client

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/klauspost/compress/zstd"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

func TestMessageValidate(t *testing.T) {
	ok := NewMessage("T", []byte("x"))
	if err := ok.validate(DefaultMaxMessageSize); err != nil {
		t.Fatal(err)
	}
	bad := []*Message{
		nil,
		NewMessage("", []byte("x")),
		NewMessage(strings.Repeat("t", 128), []byte("x")),
		NewMessage("a b", []byte("x")),
		NewMessage("TBW102", []byte("x")),
		NewMessage("T", nil),
		NewMessage("T", make([]byte, 11)),
		NewMessage("T", []byte("x")).WithProperty("k", "v\x01"),
		NewMessage("T", []byte("x")).WithTags("a\x02"),
		NewMessage("T", []byte("x")).WithKeys("k\x01"),
		{Topic: "T", Body: []byte("x"), DelayLevel: -1},
	}
	for i, m := range bad {
		if err := m.validate(10); !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("case %d (%v): err %v, want ErrInvalidMessage", i, m, err)
		}
	}
}

// wirePropertiesMap is the reference model of the properties sent for m:
// the user properties, then the fields that map to system properties, then
// extra (UNIQ_KEY, idempotence properties) on top.
func wirePropertiesMap(m *Message, extra map[string]string) map[string]string {
	p := make(map[string]string, len(m.Properties)+len(extra)+4)
	for k, v := range m.Properties {
		p[k] = v
	}
	m.systemProperties(func(k, v string) { p[k] = v })
	for k, v := range extra {
		p[k] = v
	}
	return p
}

func TestWireProperties(t *testing.T) {
	m := NewMessage("T", []byte("x")).WithTags("TagA").WithKeys("k1", "k2").WithProperty("TAGS", "ignored").WithProperty("u", "1")
	m.DelayLevel = 3
	m.ShardingKey = "order-7"
	got := wirePropertiesMap(m, map[string]string{wire.PropertyUniqKey: "ID"})
	want := map[string]string{"TAGS": "TagA", "KEYS": "k1 k2", "DELAY": "3", "__SHARDINGKEY": "order-7", "u": "1", "UNIQ_KEY": "ID"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestDecodeMessagesV1V2IPv6Compressed(t *testing.T) {
	props := wire.EncodeProperties(map[string]string{"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "0A000001", "DELAY": "2", "u": "v"})
	bigBody := bytes.Repeat([]byte("compress me "), 1000)
	var data []byte
	data = append(data, encodeStored(t, storedMessage{topic: "TopicA", body: []byte("hello"), props: props, queueID: 3, queueOffset: 42, physical: 4096, bornTS: 1000, storeTS: 2000, reconsume: 1})...)
	data = append(data, encodeStored(t, storedMessage{topic: strings.Repeat("L", 200), body: []byte("v2"), v2: true, physical: 8192,
		born: netip.MustParseAddrPort("[2001:db8::1]:7"), store: netip.MustParseAddrPort("[2001:db8::2]:10911")})...)
	data = append(data, encodeStored(t, storedMessage{topic: "TopicA", body: bigBody, compress: true, physical: 9000})...)
	// A blank entry (segment end filler) stops decoding.
	blank := make([]byte, 16)
	binary.BigEndian.PutUint32(blank, 16)
	binary.BigEndian.PutUint32(blank[4:], wire.MagicBlank)
	data = append(data, blank...)

	msgs, err := DecodeMessagesWith(data, DecodeOptions{CheckCRC: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 3 {
		t.Fatalf("decoded %d messages, want 3", len(msgs))
	}
	m := msgs[0]
	if m.Topic != "TopicA" || string(m.Body) != "hello" || m.QueueID != 3 || m.QueueOffset != 42 || m.CommitLogOffset != 4096 ||
		m.BornTimestamp != 1000 || m.StoreTimestamp != 2000 || m.ReconsumeTimes != 1 || m.BornHost != "10.0.0.1:5000" ||
		m.StoreHost != "127.0.0.1:10911" || m.Tags != "TagA" || !reflect.DeepEqual(m.Keys, []string{"k1", "k2"}) ||
		m.DelayLevel != 2 || m.Properties["u"] != "v" || m.MsgID != "0A000001" {
		t.Fatalf("first message decoded wrong: %+v", m)
	}
	if want := "7F00000100002A9F0000000000001000"; m.OffsetMsgID != want {
		t.Fatalf("offset msgId %s, want %s", m.OffsetMsgID, want)
	}
	m = msgs[1]
	if len(m.Topic) != 200 || m.BornHost != "[2001:db8::1]:7" || m.StoreHost != "[2001:db8::2]:10911" || len(m.OffsetMsgID) != 56 || m.MsgID != m.OffsetMsgID {
		t.Fatalf("v2/IPv6 message decoded wrong: %+v", m)
	}
	m = msgs[2]
	if !bytes.Equal(m.Body, bigBody) || m.SysFlag&wire.SysFlagCompressed != 0 {
		t.Fatalf("compressed body not inflated: %d bytes, sysFlag %#x", len(m.Body), m.SysFlag)
	}
	kept, err := DecodeMessagesWith(data, DecodeOptions{KeepCompressed: true})
	if err != nil || kept[2].SysFlag&wire.SysFlagCompressed == 0 || bytes.Equal(kept[2].Body, bigBody) {
		t.Fatalf("KeepCompressed: err %v", err)
	}
}

// TestDecodeMatchesOfficialClient decodes the same bytes with the official
// Go client's decoder and compares the fields both expose.
func TestDecodeMatchesOfficialClient(t *testing.T) {
	props := wire.EncodeProperties(map[string]string{"TAGS": "T1", "UNIQ_KEY": "AB"})
	data := append(encodeStored(t, storedMessage{topic: "A", body: []byte("one"), props: props, queueID: 1, queueOffset: 7, physical: 100}),
		encodeStored(t, storedMessage{topic: "B", body: []byte("two"), queueID: 2, queueOffset: 8, physical: 200, reconsume: 3})...)
	ours, err := DecodeMessages(data)
	if err != nil {
		t.Fatal(err)
	}
	theirs := primitive.DecodeMessage(data)
	if len(ours) != len(theirs) {
		t.Fatalf("%d vs %d messages", len(ours), len(theirs))
	}
	for i := range ours {
		o, x := ours[i], theirs[i]
		if o.Topic != x.Topic || string(o.Body) != string(x.Body) || int(o.QueueID) != x.Queue.QueueId || o.QueueOffset != x.QueueOffset ||
			o.CommitLogOffset != x.CommitLogOffset || o.ReconsumeTimes != x.ReconsumeTimes || o.StoreSize != x.StoreSize ||
			o.Tags != x.GetTags() || o.OffsetMsgID != x.OffsetMsgId {
			t.Errorf("message %d: ours %+v, official %+v", i, o, x)
		}
	}
}

func TestDecodeMessagesErrors(t *testing.T) {
	good := encodeStored(t, storedMessage{topic: "T", body: []byte("hello")})
	bodyFlip := append([]byte(nil), good...)
	bodyFlip[len(bodyFlip)-2-1-1-1] ^= 0x01 // last body byte ('o')
	wrongSize := append([]byte(nil), good...)
	binary.BigEndian.PutUint32(wrongSize, uint32(len(good)-1))
	badMagic := append([]byte(nil), good...)
	binary.BigEndian.PutUint32(badMagic[4:], 0x12345678)
	cases := map[string][]byte{
		"truncated":             good[:len(good)-1],
		"short head":            good[:6],
		"size lies":             wrongSize,
		"bad magic":             badMagic,
		"two, second truncated": append(append([]byte(nil), good...), good[:30]...),
	}
	for name, data := range cases {
		msgs, err := DecodeMessages(data)
		var de *DecodeError
		if !errors.As(err, &de) || !errors.Is(err, ErrMalformedMessage) {
			t.Errorf("%s: err %v, want *DecodeError", name, err)
			continue
		}
		if name == "two, second truncated" && (len(msgs) != 1 || de.Offset != len(good)) {
			t.Errorf("%s: %d messages, offset %d; want 1 and %d", name, len(msgs), de.Offset, len(good))
		}
	}
	if _, err := DecodeMessagesWith(bodyFlip, DecodeOptions{CheckCRC: true}); !errors.Is(err, ErrMalformedMessage) {
		t.Errorf("flipped body bit: err %v, want CRC failure", err)
	}
	if _, err := DecodeMessages(bodyFlip); err != nil {
		t.Errorf("without CheckCRC the flipped body decodes: %v", err)
	}
	// A body of an unknown compression type is refused, not handed over
	// compressed.
	unknown := encodeStored(t, storedMessage{topic: "T", body: []byte("x"), compress: true, sysFlag: 5 << 8})
	if _, err := DecodeMessages(unknown); !errors.Is(err, ErrMalformedMessage) || !strings.Contains(err.Error(), "unknown type 5") {
		t.Errorf("compression type 5: err %v", err)
	}
	// A zip bomb stops at the limit.
	bomb := encodeStored(t, storedMessage{topic: "T", body: make([]byte, 1<<20), compress: true})
	if _, err := DecodeMessagesWith(bomb, DecodeOptions{MaxInflatedSize: 1000}); !errors.Is(err, ErrMalformedMessage) {
		t.Errorf("oversized inflate: err %v", err)
	}
	if msgs, err := DecodeMessages(nil); err != nil || len(msgs) != 0 {
		t.Errorf("empty data: %v %v", msgs, err)
	}
}

// TestDecodeLZ4AndZstdBodies: bodies a RocketMQ 5 producer compressed with
// LZ4 or zstd (sysFlag compression type 1 or 2) are inflated, in the frame
// formats Lz4Compressor and ZstdCompressor write, several frames in a row
// too; the inflate bound holds for both.
func TestDecodeLZ4AndZstdBodies(t *testing.T) {
	text := bytes.Repeat([]byte("a RocketMQ 5 producer compressed this body "), 200_000) // 8.4 MB: three LZ4 blocks
	random := make([]byte, 300_000)                                                      // incompressible: stored blocks
	_, _ = rand.NewChaCha8([32]byte{1}).Read(random)
	type tc struct {
		name    string
		sysFlag int32
		stored  []byte
		want    []byte
	}
	var cases []tc
	for _, body := range [][]byte{[]byte("x"), text, random} {
		cases = append(cases,
			tc{"LZ4", SysFlagLZ4, JavaLZ4(t, body), body},
			tc{"zstd", SysFlagZstd, JavaZstd(t, body), body},
			tc{"zlib type 3", SysFlagZlib, zlibBytes(t, body), body})
	}
	cases = append(cases,
		tc{"two LZ4 frames", SysFlagLZ4, append(JavaLZ4(t, []byte("one ")), JavaLZ4(t, []byte("two"))...), []byte("one two")},
		tc{"two zstd frames", SysFlagZstd, append(JavaZstd(t, []byte("one ")), JavaZstd(t, []byte("two"))...), []byte("one two")})
	for i, c := range cases {
		data := encodeStored(t, storedMessage{topic: "T", body: c.stored, sysFlag: c.sysFlag, queueOffset: int64(i)})
		msgs, err := DecodeMessagesWith(data, DecodeOptions{CheckCRC: true})
		if err != nil || len(msgs) != 1 {
			t.Fatalf("%s (%d bytes): %d messages, err %v", c.name, len(c.want), len(msgs), err)
		}
		if m := msgs[0]; !bytes.Equal(m.Body, c.want) || m.SysFlag&wire.SysFlagCompressed != 0 {
			t.Fatalf("%s: body of %d bytes (want %d), sysFlag %#x", c.name, len(m.Body), len(c.want), m.SysFlag)
		}
		kept, err := DecodeMessagesWith(data, DecodeOptions{KeepCompressed: true})
		if err != nil || !bytes.Equal(kept[0].Body, c.stored) || kept[0].SysFlag != c.sysFlag {
			t.Fatalf("%s KeepCompressed: err %v", c.name, err)
		}
	}
	// A limit below the window of Java's stream still decodes what fits;
	// one between that window and the default too.
	for _, limit := range []int{1000, 10 << 20} {
		for _, c := range cases[:3] {
			data := encodeStored(t, storedMessage{topic: "T", body: c.stored, sysFlag: c.sysFlag})
			if msgs, err := DecodeMessagesWith(data, DecodeOptions{MaxInflatedSize: limit}); err != nil || !bytes.Equal(msgs[0].Body, c.want) {
				t.Fatalf("%s under a limit of %d: err %v", c.name, limit, err)
			}
		}
	}
	// A zstd window beyond every bound is refused at the frame header.
	hugeWindow := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x78} // no content size, window 2^(10+15) = 32 MiB
	data := encodeStored(t, storedMessage{topic: "T", body: hugeWindow, sysFlag: SysFlagZstd})
	if _, err := DecodeMessagesWith(data, DecodeOptions{MaxInflatedSize: 1 << 20}); !errors.Is(err, ErrMalformedMessage) || !strings.Contains(err.Error(), "window larger than 8388608") {
		t.Errorf("32 MiB zstd window under a 1 MiB limit: err %v", err)
	}
	// Past the bound: refused, whether the frame declares its size or not.
	bomb := make([]byte, 1<<20)
	for name, b := range map[string][]byte{"LZ4": JavaLZ4(t, bomb), "zstd": JavaZstd(t, bomb), "zstd with content size": zstdEncodeAll(t, bomb)} {
		flag := SysFlagLZ4
		if strings.HasPrefix(name, "zstd") {
			flag = SysFlagZstd
		}
		data := encodeStored(t, storedMessage{topic: "T", body: b, sysFlag: flag})
		_, err := DecodeMessagesWith(data, DecodeOptions{MaxInflatedSize: 64 << 10})
		if !errors.Is(err, ErrMalformedMessage) || !strings.Contains(err.Error(), "larger than 65536 bytes") {
			t.Errorf("%s bomb: err %v", name, err)
		}
	}
	// Corrupt frames fail, naming the codec.
	for name, c := range map[string]struct {
		flag int32
		body []byte
	}{"LZ4": {SysFlagLZ4, JavaLZ4(t, text)[:500]}, "zstd": {SysFlagZstd, JavaZstd(t, text)[:500]}} {
		data := encodeStored(t, storedMessage{topic: "T", body: c.body, sysFlag: c.flag})
		if _, err := DecodeMessages(data); !errors.Is(err, ErrMalformedMessage) || !strings.Contains(err.Error(), name) {
			t.Errorf("truncated %s frame: err %v", name, err)
		}
	}
}

func zlibBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zlib.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// zstdEncodeAll is a one-shot zstd frame, which declares its content size.
func zstdEncodeAll(t testing.TB, b []byte) []byte {
	t.Helper()
	e, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	return e.EncodeAll(b, nil)
}

func TestUniqIDLayout(t *testing.T) {
	loc := time.FixedZone("X", 3600)
	now := time.Date(2026, 3, 2, 0, 0, 1, 500e6, loc) // 1 day + 1.5 s into March
	g := NewUniqIDGenerator(net.IPv4(192, 168, 1, 20), func() time.Time { return now })
	a, b := g.New(), g.New()
	if len(a) != 32 || strings.ToUpper(a) != a || a == b {
		t.Fatalf("ids %q %q", a, b)
	}
	info, err := ParseUniqID(a)
	if err != nil {
		t.Fatal(err)
	}
	if !info.IP.Equal(net.IPv4(192, 168, 1, 20)) || info.MonthOffset != 24*time.Hour+1500*time.Millisecond || info.Counter != 0 {
		t.Fatalf("parsed %+v", info)
	}
	if int(info.Pid) != osPid16() {
		t.Fatalf("pid %d", info.Pid)
	}
	info2, _ := ParseUniqID(b)
	if info2.Counter != 1 || a[:20] != b[:20] {
		t.Fatalf("second id %+v shares no prefix with the first", info2)
	}
	// A new month resets the time base.
	now = time.Date(2026, 4, 1, 0, 0, 0, 7e6, loc)
	info3, _ := ParseUniqID(g.New())
	if info3.MonthOffset != 7*time.Millisecond {
		t.Fatalf("after month change offset %v", info3.MonthOffset)
	}
	// Two generators in one process differ in the class-loader field.
	g2 := NewUniqIDGenerator(net.IPv4(192, 168, 1, 20), func() time.Time { return now })
	if g2.New()[:20] == a[:20] {
		t.Fatal("two generators share a prefix")
	}
	if _, err := ParseUniqID("nothex"); !errors.Is(err, ErrInvalidMessageID) {
		t.Fatalf("err %v", err)
	}
}

func TestBatchOfficialLayout(t *testing.T) {
	// The official client's Message.Marshal writes the same layout (magic
	// and CRC 0); our decoder reads it.
	om := primitive.NewMessage("T", []byte("official"))
	om.WithTag("tg")
	om.Flag = 9
	dec, err := wire.DecodeBatch(om.Marshal())
	if err != nil || len(dec) != 1 || string(dec[0].Body) != "official" || dec[0].Flag != 9 || wire.DecodeProperties(dec[0].Properties)["TAGS"] != "tg" {
		t.Fatalf("official batch entry decoded to %+v, %v", dec, err)
	}
}

// TestAppendWirePropertiesMatchesMap: the allocation-light encoder used on
// the send path says the same as the map-based one.
func TestAppendWirePropertiesMatchesMap(t *testing.T) {
	m := NewMessage("T", []byte("x")).WithTags("TagA").WithKeys("k1", "k2").
		WithProperty("TAGS", "overridden").WithProperty("UNIQ_KEY", "user-set").WithProperty("u", "1")
	m.DelayLevel = 3
	got := wire.DecodeProperties(string(m.appendWireProperties(nil, wire.PropertyUniqKey, "ID", wire.PropertySequence, "9")))
	want := wirePropertiesMap(m, map[string]string{wire.PropertyUniqKey: "ID", wire.PropertySequence: "9"})
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("appended %v, map %v", got, want)
	}
	plain := NewMessage("T", []byte("x")).WithProperty("TAGS", "kept")
	if got := wire.DecodeProperties(string(plain.appendWireProperties(nil))); got["TAGS"] != "kept" || len(got) != 1 {
		t.Fatalf("user TAGS without a Tags field: %v", got)
	}
}

func TestSendResponseDecodeMatchesReflection(t *testing.T) {
	for _, ext := range []map[string]string{
		{"msgId": "A,B", "queueId": "3", "queueOffset": "1234567890123", "transactionId": "tx", "batchUniqId": "U",
			"MSG_REGION": "R", "TRACE_ON": "false", "other": "x"},
		{"queueId": " 7 "},
		{},
		{"queueId": "x"},
		{"queueOffset": "1.5"},
		{"queueId": "99999999999999999999"},
	} {
		c := remoting.RemotingCommand{ExtFields: ext, SerializeType: remoting.SerializeRocketMQ}
		var want wire.SendMessageResponseHeader
		werr := c.DecodeHeader(&want)
		// The answer as the send path gets it: extFields left raw.
		frame, err := remoting.EncodeFrame(&c)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := remoting.DecodeFrameRawExt(frame[4:])
		if err != nil || raw.ExtFields != nil {
			t.Fatalf("raw decode: %v %v", raw, err)
		}
		for _, resp := range []*remoting.RemotingCommand{&c, raw} {
			got, gerr := decodeSendResponse(resp)
			if (werr == nil) != (gerr == nil) || (werr == nil && got != want) {
				t.Fatalf("%v: decoded %+v %v, DecodeHeader %+v %v", ext, got, gerr, want, werr)
			}
			var he *remoting.HeaderError
			if gerr != nil && !errors.As(gerr, &he) {
				t.Fatalf("%v: %v is not a HeaderError", ext, gerr)
			}
		}
	}
}
