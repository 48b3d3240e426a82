package client

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

// traceContext is what RocketMQ's TraceDataEncoder.decoderFromTraceDataString
// reads back from one record; decodeTraceData below mirrors that method
// field by field (the same indexes, the same optional tails), so a record
// it accepts is one RocketMQ's trace tools read the same way.
type traceContext struct {
	Type                           string
	TimeStamp                      int64
	RegionID, GroupName, RequestID string
	Topic, MsgID, Tags, Keys       string
	StoreHost, OffsetMsgID         string
	BodyLength, CostTime, MsgType  int
	RetryTimes, ContextCode        int
	Success                        bool
}

// decodeTraceData is decoderFromTraceDataString in Go: records split on
// FIELD_SPLITOR, fields on CONTENT_SPLITOR (Java's String.split drops
// trailing empty strings, so a record's trailing empty fields are gone);
// where Java would throw (a missing field, a bad number), an error.
func decodeTraceData(data string) ([]traceContext, error) {
	var out []traceContext
	if data == "" {
		return nil, nil
	}
	for _, rec := range javaSplit(data, traceFieldSplitor) {
		line := javaSplit(rec, traceContentSplitor)
		if len(line) == 0 {
			return nil, fmt.Errorf("record %q has no fields", rec)
		}
		need := func(n int) error {
			if len(line) < n {
				return fmt.Errorf("%s record with %d fields, want %d", line[0], len(line), n)
			}
			return nil
		}
		var c traceContext
		var err error
		num := func(s string) int {
			v, e := strconv.ParseInt(s, 10, 32)
			if e != nil && err == nil {
				err = e
			}
			return int(v)
		}
		long := func(s string) int64 {
			v, e := strconv.ParseInt(s, 10, 64)
			if e != nil && err == nil {
				err = e
			}
			return v
		}
		c.Type = line[0]
		switch line[0] {
		case traceTypePub:
			if err := need(12); err != nil {
				return nil, err
			}
			c.TimeStamp, c.RegionID, c.GroupName = long(line[1]), line[2], line[3]
			c.Topic, c.MsgID, c.Tags, c.Keys, c.StoreHost = line[4], line[5], line[6], line[7], line[8]
			c.BodyLength, c.CostTime, c.MsgType = num(line[9]), num(line[10]), num(line[11])
			if c.MsgType < 0 || c.MsgType > 4 {
				return nil, fmt.Errorf("MessageType ordinal %d", c.MsgType)
			}
			switch {
			case len(line) == 13:
				c.Success = line[12] == "true"
			case len(line) >= 14:
				c.OffsetMsgID, c.Success = line[12], line[13] == "true"
			}
		case traceTypeSubBefore:
			if err := need(8); err != nil {
				return nil, err
			}
			c.TimeStamp, c.RegionID, c.GroupName, c.RequestID = long(line[1]), line[2], line[3], line[4]
			c.MsgID, c.RetryTimes, c.Keys = line[5], num(line[6]), line[7]
		case traceTypeSubAfter:
			if err := need(6); err != nil {
				return nil, err
			}
			c.RequestID, c.MsgID, c.CostTime, c.Success, c.Keys = line[1], line[2], num(line[3]), line[4] == "true", line[5]
			if len(line) >= 7 {
				c.ContextCode = num(line[6])
			}
			if len(line) >= 9 {
				c.TimeStamp, c.GroupName = long(line[7]), line[8]
			}
		default:
			continue // types RocketMQ's decoder skips too
		}
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// javaSplit is Java's String.split(sep) for a one-character separator:
// trailing empty strings are removed, so a string of separators only
// gives none, but an empty string gives [""].
func javaSplit(s string, sep byte) []string {
	if s == "" {
		return []string{""}
	}
	parts := strings.Split(s, string(sep))
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}

func newTestTracer() *tracer {
	return &tracer{topic: DefaultTraceTopic, log: zap.NewNop(), ids: NewUniqIDGenerator(nil, time.Now), in: make(chan traceRecord, 64)}
}

func (t *tracer) drain() (data string, keys []string) {
	for {
		select {
		case r := <-t.in:
			data += r.data
			keys = append(keys, r.keys...)
		default:
			return data, keys
		}
	}
}

// TestTraceFormat pins the records against RocketMQ's layout: a Java
// encoder's Pub record (written out by hand from encoderFromContextBean)
// decodes as expected, and the SDK's Pub, SubBefore and SubAfter records
// decode, through the mirror of RocketMQ's decoder, to what was traced.
func TestTraceFormat(t *testing.T) {
	java := "Pub\x011700000000000\x01DefaultRegion\x01PG\x01TopicA\x01MSGID1\x01TagA\x01k1 k2\x01127.0.0.1:10911\x015\x013\x010\x01OFFID\x01true\x02"
	got, err := decodeTraceData(java)
	if err != nil || len(got) != 1 {
		t.Fatalf("decode Java Pub: %v %v", got, err)
	}
	if c := got[0]; c.Topic != "TopicA" || c.Keys != "k1 k2" || c.OffsetMsgID != "OFFID" || !c.Success || c.CostTime != 3 || c.BodyLength != 5 {
		t.Fatalf("Java Pub decoded as %+v", c)
	}

	tr := newTestTracer()
	start := time.Now()
	msg := &Message{Topic: "TopicA", Body: []byte("hello"), Tags: "TagA", Keys: []string{"k1", "k2"}, DelayLevel: 2}
	res := &SendResult{MsgID: "UNIQ1", OffsetMsgID: "OFF1", RegionID: "DefaultRegion", TraceOn: true, Addr: "127.0.0.1:10911"}
	var noErr error
	tr.pub("PG", msg, start, &res, &noErr)
	// Not traced: a failed send, a broker with TRACE_ON false, the trace topic itself.
	failed := errors.New("x")
	tr.pub("PG", msg, start, &res, &failed)
	off := &SendResult{TraceOn: false}
	tr.pub("PG", msg, start, &off, &noErr)
	tr.pub("PG", &Message{Topic: DefaultTraceTopic}, start, &res, &noErr)
	m := &MessageExt{MsgID: "UNIQ1", ReconsumeTimes: 2}
	m.Topic, m.Keys, m.Properties = "TopicA", []string{"k1"}, map[string]string{}
	skipped := &MessageExt{}
	skipped.Properties = map[string]string{"TRACE_ON": "false"}
	st := tr.subBefore("CG", []*MessageExt{m, skipped})
	st.after("CG", false)
	data, keys := tr.drain()
	recs, err := decodeTraceData(data)
	if err != nil {
		t.Fatalf("decode %q: %v", data, err)
	}
	if len(recs) != 3 {
		t.Fatalf("%d records: %+v", len(recs), recs)
	}
	pub, before, after := recs[0], recs[1], recs[2]
	if pub.Type != "Pub" || pub.TimeStamp != start.UnixMilli() || pub.GroupName != "PG" || pub.Topic != "TopicA" || pub.MsgID != "UNIQ1" ||
		pub.Tags != "TagA" || pub.Keys != "k1 k2" || pub.StoreHost != "127.0.0.1:10911" || pub.BodyLength != 5 || pub.MsgType != traceMsgDelay ||
		pub.OffsetMsgID != "OFF1" || !pub.Success || pub.RegionID != "DefaultRegion" {
		t.Errorf("Pub = %+v", pub)
	}
	if before.Type != "SubBefore" || before.GroupName != "CG" || before.MsgID != "UNIQ1" || before.RetryTimes != 2 || before.Keys != "k1" ||
		before.RequestID == "" || before.RegionID != "DefaultRegion" {
		t.Errorf("SubBefore = %+v", before)
	}
	if after.Type != "SubAfter" || after.RequestID != before.RequestID || after.MsgID != "UNIQ1" || after.Success ||
		after.ContextCode != traceConsumeFailed || after.GroupName != "CG" || after.TimeStamp != before.TimeStamp {
		t.Errorf("SubAfter = %+v", after)
	}
	if strings.Join(keys, ",") != "UNIQ1,k1,k2,UNIQ1,k1,UNIQ1,k1" {
		t.Errorf("keys %v", keys)
	}
	// A separator inside a value must not shift the fields after it.
	tr.pub("PG", &Message{Topic: "T", Tags: "a\x01b\x02c"}, start, &res, &noErr)
	data, _ = tr.drain()
	if recs, err := decodeTraceData(data); err != nil || len(recs) != 1 || recs[0].Tags != "abc" || recs[0].OffsetMsgID != "OFF1" {
		t.Fatalf("separators in a tag: %+v %v", recs, err)
	}
}

// TestTraceRefused: clients that record no traces refuse WithTrace.
func TestTraceRefused(t *testing.T) {
	if _, err := NewLitePullConsumer(NameServers("127.0.0.1:9876"), ConsumerGroup("G"), WithTrace("")); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("LitePullConsumer with WithTrace: %v", err)
	}
	if _, err := NewAdmin(NameServers("127.0.0.1:9876"), WithTrace("")); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("Admin with WithTrace: %v", err)
	}
}

// FuzzTraceData: the decoder never panics, and whatever the SDK encodes
// from arbitrary values decodes back to them (separators removed).
func FuzzTraceData(f *testing.F) {
	f.Add("Pub\x011\x01r\x01g\x01t\x01m\x01\x01\x01h\x010\x010\x010\x01o\x01true\x02", "TagA", "key", int32(1))
	f.Add("SubBefore\x011\x01r\x01g\x01req\x01m\x010\x01k\x02SubAfter\x01req\x01m\x011\x01true\x01k\x010\x011\x01g\x02", "", "", int32(0))
	f.Add("\x02\x01\x02Pub", "\x01", "\x02", int32(-1))
	f.Fuzz(func(t *testing.T, raw, tags, key string, retry int32) {
		_, _ = decodeTraceData(raw)
		tr := newTestTracer()
		res := &SendResult{MsgID: "M", OffsetMsgID: "O", RegionID: "R", TraceOn: true, Addr: "h:1"}
		var noErr error
		tr.pub("G", &Message{Topic: "T", Tags: tags, Keys: []string{key}}, time.Now(), &res, &noErr)
		m := &MessageExt{MsgID: "M", ReconsumeTimes: retry}
		m.Topic, m.Keys, m.Properties = "T", []string{key}, map[string]string{}
		tr.subBefore("G", []*MessageExt{m}).after("G", true)
		data, _ := tr.drain()
		recs, err := decodeTraceData(data)
		if err != nil || len(recs) != 3 {
			t.Fatalf("decode %q: %v %v", data, recs, err)
		}
		clean := func(s string) string {
			if s = strings.NewReplacer("\x01", "", "\x02", "").Replace(s); s == "" {
				return "null"
			}
			return s
		}
		if recs[0].Tags != clean(tags) || recs[1].RetryTimes != int(retry) || recs[2].Keys != clean(key) {
			t.Fatalf("round trip of tags %q key %q retry %d: %+v", tags, key, retry, recs)
		}
	})
}
