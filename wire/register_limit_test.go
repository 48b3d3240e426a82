package wire

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/internal/testutil"
)

// A compressed register body whose items stay under the per-item bound but
// inflate past maxRegisterInflated in total (a few KB on the wire) is
// refused, not decoded into topics of many megabytes each.
func TestDecodeRegisterBrokerBodyInflateBounded(t *testing.T) {
	var buf bytes.Buffer
	// BestSpeed, and one item buffer renamed by its first byte: under
	// -race, every pass over these 75 MiB costs seconds.
	zw, err := zlib.NewWriterLevel(&buf, zlib.BestSpeed)
	if err != nil {
		t.Fatal(err)
	}
	writeRegisterItem(zw, []byte(`{"counter":1,"timestamp":1}`))
	const items, size = 5, 15 << 20
	writeRegisterInt32(zw, items)
	item := append(bytes.Repeat([]byte{'a'}, size), " 1 1 6 SINGLE_TAG {}"...)
	for i := 0; i < items; i++ {
		item[0] = byte('a' + i) // topics a…, b…, c…: distinct names
		writeRegisterItem(zw, item)
	}
	writeRegisterItem(zw, []byte("[]"))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	body, err := DecodeRegisterBrokerBody(buf.Bytes(), true)
	if !errors.Is(err, ErrBadBody) || !strings.Contains(err.Error(), "inflates past") {
		n := 0
		if body != nil {
			n = len(body.TopicConfigSerializeWrapper.TopicConfigTable)
		}
		t.Fatalf("%d-byte body inflating to %d MiB: %d topics, %v", buf.Len(), items*size>>20, n, err)
	}
}

func writeRegisterInt32(w io.Writer, n int32) {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(n))
	_, _ = w.Write(b[:])
}

func writeRegisterItem(w io.Writer, b []byte) {
	writeRegisterInt32(w, int32(len(b)))
	_, _ = w.Write(b)
}

// raceSlack widens the allocation bounds under -race, whose runtime
// allocates more for the same decode (it drops sync.Pool entries at
// random, among others); the bounds still catch what they were set for,
// allocations of 16 times the input and more.
var raceSlack uint64 = map[bool]uint64{false: 1, true: 2}[testutil.RaceEnabled]

// decodeOneCompressedTopic decodes a compressed register body holding one
// topic config item, and returns the bytes the decode allocated and its
// error.
func decodeOneCompressedTopic(t *testing.T, item []byte) (uint64, error) {
	t.Helper()
	var buf bytes.Buffer
	zw := zlib.NewWriter(&buf)
	writeRegisterItem(zw, []byte(`{"counter":1,"timestamp":1}`))
	writeRegisterInt32(zw, 1)
	writeRegisterItem(zw, item)
	writeRegisterItem(zw, []byte("[]"))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := DecodeRegisterBrokerBody(buf.Bytes(), true)
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, err
}

// A topic config item of spaces splits into one field per byte: decoding
// it is refused with a short error and without a string header per byte
// (16 bytes each, 16 times what the item inflates to).
func TestDecodeRegisterBrokerBodyTopicFieldsBounded(t *testing.T) {
	const size = 15 << 20
	got, err := decodeOneCompressedTopic(t, bytes.Repeat([]byte{' '}, size))
	if !errors.Is(err, ErrBadBody) || len(err.Error()) > 512 {
		t.Fatalf("topic config of %d spaces: %d-byte error %.200q", size, len(err.Error()), err)
	}
	if got > raceSlack*4*size {
		t.Fatalf("decoding a %d-byte topic config allocated %d MiB", size, got>>20)
	}
}

// A plain JSON register body is refused past MaxRegisterTopics before its
// table is decoded: a 15 MiB frame of short entries names 1.4 million
// topics, which took 674 MiB to decode.
func TestDecodeRegisterBrokerBodyJSONTopicsBounded(t *testing.T) {
	b := []byte(`{"topicConfigSerializeWrapper":{"topicConfigTable":{`)
	for i := 0; i <= MaxRegisterTopics; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `"%x":{}`, i)
	}
	b = append(b, `}}}`...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := DecodeRegisterBrokerBody(b, false)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrBadBody) || !strings.Contains(err.Error(), "topic count") {
		t.Fatalf("%d-byte body: %v, want ErrBadBody naming the topic count", len(b), err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 10*uint64(len(b)) {
		t.Fatalf("refusing a %d-byte body allocated %d MiB", len(b), got>>20)
	}
}

// A topic's attributes are bounded in every layout: the name server never
// reads them, and a compressed body of 12 MB decoded to 5.6 million
// attributes, 1 GiB allocated.
func TestDecodeRegisterBrokerBodyAttributesBounded(t *testing.T) {
	attrs := func(n int) []byte {
		b := []byte{'{'}
		for i := range n {
			if i > 0 {
				b = append(b, ',')
			}
			b = fmt.Appendf(b, `"%x":""`, i)
		}
		return append(b, '}')
	}
	// 64Ki attributes: decoded whole, at the rate 5.6 million took (1 GiB),
	// about 12 MB, well past the bound below (1 MiB of the decoder's own
	// buffers plus 4 bytes per byte of input).
	item := append([]byte("t 1 1 6 SINGLE_TAG "), attrs(1<<16)...)
	got, err := decodeOneCompressedTopic(t, item)
	if !errors.Is(err, ErrBadBody) || !strings.Contains(err.Error(), "attributes") || len(err.Error()) > 512 {
		t.Errorf("compressed topic of 64Ki attributes: %.300v", err)
	}
	if got > raceSlack*(1<<20+4*uint64(len(item))) {
		t.Errorf("decoding a %d-byte topic config allocated %d MiB", len(item), got>>20)
	}
	plain := fmt.Appendf(nil, `{"topicConfigSerializeWrapper":{"topicConfigTable":{"t":{"attributes":%s}}}}`, attrs(maxTopicAttributes+1))
	if _, err := DecodeRegisterBrokerBody(plain, false); !errors.Is(err, ErrBadBody) || !strings.Contains(err.Error(), "attributes") {
		t.Errorf("JSON topic of %d attributes: %v", maxTopicAttributes+1, err)
	}
	legacy := fmt.Appendf(nil, `{"topicConfigTable":{"t":{"attributes":%s}}}`, attrs(maxTopicAttributes+1))
	if _, err := DecodeLegacyRegisterBody(legacy); !errors.Is(err, ErrBadBody) || !strings.Contains(err.Error(), "attributes") {
		t.Errorf("legacy topic of %d attributes: %v", maxTopicAttributes+1, err)
	}
	ok := fmt.Appendf(nil, `{"topicConfigSerializeWrapper":{"topicConfigTable":{"t":{"attributes":%s}}}}`, attrs(maxTopicAttributes))
	if b, err := DecodeRegisterBrokerBody(ok, false); err != nil || len(b.TopicConfigSerializeWrapper.TopicConfigTable["t"].Attributes) != maxTopicAttributes {
		t.Errorf("JSON topic of %d attributes: %v", maxTopicAttributes, err)
	}
}

// A register body names at most maxFilterServers filter servers: the name
// server keeps the list and copies it into every route of the broker's
// topics, and a frame of empty names holds millions.
func TestDecodeRegisterBrokerBodyFilterServersBounded(t *testing.T) {
	list := []byte{'['}
	for i := range maxFilterServers + 1 {
		if i > 0 {
			list = append(list, ',')
		}
		list = append(list, `""`...)
	}
	list = append(list, ']')
	plain := fmt.Appendf(nil, `{"filterServerList":%s}`, list)
	if _, err := DecodeRegisterBrokerBody(plain, false); !errors.Is(err, ErrBadBody) || !strings.Contains(err.Error(), "filter servers") {
		t.Errorf("JSON body of %d filter servers: %v", maxFilterServers+1, err)
	}
	var buf bytes.Buffer
	zw := zlib.NewWriter(&buf)
	writeRegisterItem(zw, []byte(`{"counter":1,"timestamp":1}`))
	writeRegisterInt32(zw, 0)
	writeRegisterItem(zw, list)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeRegisterBrokerBody(buf.Bytes(), true); !errors.Is(err, ErrBadBody) || !strings.Contains(err.Error(), "filter servers") {
		t.Errorf("compressed body of %d filter servers: %v", maxFilterServers+1, err)
	}
}
