package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"net/netip"
	"strings"
	"testing"
)

// FuzzDecodeBatch: a SEND_BATCH_MESSAGE body either decodes into entries
// that cover it exactly and re-encode to a body that decodes the same, or
// fails with a *DecodeError; bodies alias the input, so no length field
// makes the decoder allocate beyond the entry list.
func FuzzDecodeBatch(f *testing.F) {
	one, _ := EncodeBatch([]BatchEntry{{Flag: 1, Body: []byte("x"), Properties: "A\x01b\x02"}})
	two, _ := EncodeBatch([]BatchEntry{{Body: []byte("hello")}, {Flag: -1, Body: nil, Properties: "KEYS\x01k\x02"}})
	f.Add(one)
	f.Add(two)
	f.Add([]byte{})
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, body []byte) {
		entries, err := DecodeBatch(body)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) || !errors.Is(err, ErrMalformedMessage) {
				t.Fatalf("error %v is not a *DecodeError", err)
			}
			return
		}
		if len(entries) > len(body)/BatchEntryOverhead {
			t.Fatalf("%d entries from %d bytes", len(entries), len(body))
		}
		re, err := EncodeBatch(entries)
		if err != nil {
			t.Fatalf("decoded entries do not encode: %v", err)
		}
		if len(re) != len(body) {
			t.Fatalf("re-encoded %d bytes from %d", len(re), len(body))
		}
		again, err := DecodeBatch(re)
		if err != nil || len(again) != len(entries) {
			t.Fatalf("re-encoded batch: %d entries, %v; want %d", len(again), err, len(entries))
		}
		for i := range entries {
			a, b := entries[i], again[i]
			if a.Flag != b.Flag || !bytes.Equal(a.Body, b.Body) || a.Properties != b.Properties {
				t.Fatalf("entry %d changed: %+v → %+v", i, a, b)
			}
		}
	})
}

// FuzzDecodeProperties: the client's properties reader keeps only pairs
// with a name and a value, and what it returns survives EncodeProperties
// unchanged. Every pair it keeps the broker's reader keeps too, unless a
// later pair of the same name overrode it there.
func FuzzDecodeProperties(f *testing.F) {
	for _, s := range propertyCases {
		f.Add(s)
	}
	f.Add("a\x01\x01b\x02\x01c\x02d\x02e\x01\x02")
	f.Fuzz(func(t *testing.T, s string) {
		m := DecodeProperties(s)
		for k, v := range m {
			if k == "" || v == "" || strings.IndexByte(k, PropertyNameSeparator) >= 0 ||
				strings.IndexByte(k+v, PropertySeparator) >= 0 {
				t.Fatalf("pair %q=%q kept from %q", k, v, s)
			}
		}
		if back := DecodeProperties(EncodeProperties(m)); !maps.Equal(back, m) {
			t.Fatalf("%q: %q does not round-trip: %q", s, m, back)
		}
		broker := ParseProperties(s)
		for k := range m {
			if _, ok := broker[k]; !ok {
				t.Fatalf("%q: client keeps %q, the broker drops it", s, k)
			}
		}
		if back := ParseProperties(EncodeProperties(broker)); !maps.Equal(back, broker) {
			t.Fatalf("%q: broker map %q does not round-trip: %q", s, broker, back)
		}
	})
}

// FuzzParseMessageID: an offset msgId either parses and renders back to
// the same id (upper-case hex; an IPv4-mapped IPv6 host keeps its width
// only as far as EncodeMessageID can tell) or fails with
// ErrInvalidMessageID.
func FuzzParseMessageID(f *testing.F) {
	f.Add(OffsetMsgID(netip.MustParseAddrPort("10.0.0.1:10911"), 4096))
	f.Add(OffsetMsgID(netip.MustParseAddrPort("[fe80::1]:10911"), 1<<40))
	f.Add(strings.Repeat("f", 32))
	f.Add(strings.Repeat("0", 56))
	f.Add("0A00000100002A9F000000000000100g")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseMessageID(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidMessageID) {
				t.Fatalf("error %v does not wrap ErrInvalidMessageID", err)
			}
			return
		}
		enc := EncodeMessageID(id)
		back, err := ParseMessageID(enc)
		if err != nil || back.Offset != id.Offset || back.Addr.Port() != id.Addr.Port() || back.Addr.Addr().Unmap() != id.Addr.Addr().Unmap() {
			t.Fatalf("%q → %+v → %q → %+v, %v", s, id, enc, back, err)
		}
		if len(s) == 32 && enc != strings.ToUpper(s) {
			t.Fatalf("IPv4 id %q re-renders as %q", s, enc)
		}
	})
}

// FuzzDecodeQueueTable: the fastjson queue-keyed table reader never
// panics, and a table it reads, written back with AppendQueueEntry,
// reads the same.
func FuzzDecodeQueueTable(f *testing.F) {
	b := []byte(`{"offsetTable":{`)
	b = AppendQueueEntry(b, MessageQueue{Topic: "T", BrokerName: "b", QueueID: 0}, TopicOffset{MaxOffset: 9})
	b = append(b, ',')
	b = AppendQueueEntry(b, MessageQueue{Topic: "T", BrokerName: "b", QueueID: 1}, TopicOffset{MinOffset: 2, MaxOffset: 3})
	b = append(b, `}}`...)
	f.Add(b)
	f.Add([]byte(`{"offsetTable":{}}`))
	f.Add([]byte(`{"offsetTable":{"T@b@0":1}}`))
	f.Add([]byte(`{"offsetTable":{{"topic":"T"}:[1,{"a":2}] , {"queueId":-1}:null}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		entries, err := DecodeQueueTable(body, "offsetTable")
		if err != nil {
			return
		}
		out := []byte(`{"offsetTable":{`)
		for i, e := range entries {
			if i > 0 {
				out = append(out, ',')
			}
			out = AppendQueueEntry(out, e.Queue, e.Value)
		}
		out = append(out, `}}`...)
		again, err := DecodeQueueTable(out, "offsetTable")
		if err != nil || len(again) != len(entries) {
			t.Fatalf("re-written table %s: %d entries, %v; want %d", out, len(again), err, len(entries))
		}
		for i := range entries {
			// Compared compact and HTML-escaped: writing a value back
			// escapes <, > and & (json.Marshal), the same JSON.
			var want, got bytes.Buffer
			_ = json.Compact(&want, entries[i].Value)
			_ = json.Compact(&got, again[i].Value)
			want, got = htmlEscaped(want.Bytes()), htmlEscaped(got.Bytes())
			if again[i].Queue != entries[i].Queue || want.String() != got.String() {
				t.Fatalf("entry %d changed: %+v %s → %+v %s", i, entries[i].Queue, want.String(), again[i].Queue, got.String())
			}
		}
	})
}

func htmlEscaped(b []byte) bytes.Buffer {
	var out bytes.Buffer
	json.HTMLEscape(&out, b)
	return out
}
