package broker

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// FuzzParseDelayLevels: messageDelayLevel either parses into levels of 0
// or more, each exactly the number times the unit its field names (no
// overflow into some other delay), or fails with ErrInvalidBrokerConfig.
func FuzzParseDelayLevels(f *testing.F) {
	for _, s := range []string{DefaultConfig().MessageDelayLevel, "200ms 1s", "0s", "-1s", "1x", "", "9223372036854775807ms", "106751d", "106752d", "1s\t2m\n"} {
		f.Add(s)
	}
	units := []struct {
		suffix string
		unit   time.Duration
	}{{"ms", time.Millisecond}, {"s", time.Second}, {"m", time.Minute}, {"h", time.Hour}, {"d", 24 * time.Hour}}
	f.Fuzz(func(t *testing.T, s string) {
		levels, err := parseDelayLevels(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidBrokerConfig) {
				t.Fatalf("error %v does not wrap ErrInvalidBrokerConfig", err)
			}
			return
		}
		fields := strings.Fields(s)
		if len(levels) != len(fields) {
			t.Fatalf("%d levels from %d fields", len(levels), len(fields))
		}
		for i, fld := range fields {
			for _, u := range units {
				num, ok := strings.CutSuffix(fld, u.suffix)
				if !ok {
					continue
				}
				n, _ := strconv.ParseInt(num, 10, 64)
				if levels[i] < 0 || levels[i]%u.unit != 0 || int64(levels[i]/u.unit) != n {
					t.Fatalf("level %q read as %v", fld, levels[i])
				}
				break
			}
		}
	})
}

// FuzzDecodeSendBatch: a SEND_BATCH_MESSAGE body either becomes one
// message of the header's topic and queue per entry, bodies and flags as
// sent, or is refused with MESSAGE_ILLEGAL and a remark.
func FuzzDecodeSendBatch(f *testing.F) {
	ok, _ := wire.EncodeBatch([]wire.BatchEntry{{Flag: 1, Body: []byte("a"), Properties: "KEYS\x01k\x02"}, {Body: []byte("b")}})
	delayed, _ := wire.EncodeBatch([]wire.BatchEntry{{Body: []byte("a"), Properties: wire.PropertyDelayTimeLevel + "\x013\x02"}})
	f.Add(ok, "T")
	f.Add(delayed, "T")
	f.Add([]byte{}, "T")
	f.Add(ok, wire.RetryGroupTopicPrefix+"g")
	c := newPathController(f, newPathReplica(testTopicConfig("T", 8)))
	f.Fuzz(func(t *testing.T, body []byte, topic string) {
		h := wire.SendMessageRequestHeader{ProducerGroup: "PG", Topic: topic, QueueID: 2, Batch: true}
		msgs, resp := c.decodeBatch(body, &h, 2, nil, false)
		if resp != nil {
			if msgs != nil || resp.Code != remoting.ResponseMessageIllegal || resp.Remark == "" {
				t.Fatalf("refusal %d %q with %d messages", resp.Code, resp.Remark, len(msgs))
			}
			return
		}
		entries, err := wire.DecodeBatch(body)
		if err != nil || len(entries) != len(msgs) || len(msgs) == 0 {
			t.Fatalf("%d messages from %d entries (%v)", len(msgs), len(entries), err)
		}
		for i, m := range msgs {
			if m.Topic != topic || m.QueueID != 2 || m.Flag != entries[i].Flag || !bytes.Equal(m.Body, entries[i].Body) {
				t.Fatalf("message %d: %q/%d flag %d body %q; entry %+v", i, m.Topic, m.QueueID, m.Flag, m.Body, entries[i])
			}
		}
	})
}

// FuzzStateImage: a snapshot's tables (JSON after the log position, from
// the local disk or a leader's InstallSnapshot) load without panicking
// whatever they hold, keep taking commands, and image back to tables that
// load to the same image.
func FuzzStateImage(f *testing.F) {
	st := newState(16, 60_000)
	st.applyLocked(&Command{Type: CmdOffsets, Offsets: []OffsetCommit{{Group: "g", Topic: "T", QueueID: 1, Offset: 9}}}, 1)
	st.applyLocked(&Command{Type: CmdUpdateTopic, Topic: wire.TopicConfig{TopicName: "T", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}}, 2)
	st.applyLocked(&Command{Type: CmdUpdateGroup, Group: wire.DefaultSubscriptionGroupConfig("g")}, 3)
	st.applyLocked(&Command{Type: CmdScheduleOffsets, Schedule: map[int32]int64{1: 5}}, 4)
	st.applyLocked(&Command{Type: CmdMemberAddr, MemberID: "n0", MemberAddr: "h:1"}, 5)
	st.applyLocked(&Command{Type: CmdTxnCheck, TxnCheck: &txnCheck{FloorQueue: 1, FloorPhy: 2, Checked: []int64{3}, Discarded: []int64{4}}}, 6)
	st.timer = TimerCursor{Bucket: 1700000000, Fired: 3}
	seed, _ := json.Marshal(st.imageLocked())
	f.Add(seed)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"offsets":{"T@g":null},"topics":{"T":{}},"dedup":{"streams":[{"p":"p","seqs":[[1,2,3,4,5]]}]},"txn":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var img stateImage
		if json.Unmarshal(b, &img) != nil {
			return
		}
		s := newState(16, 60_000)
		s.loadLocked(img)
		first, err := json.Marshal(s.imageLocked())
		if err != nil {
			t.Fatalf("loaded tables do not image: %v", err)
		}
		var again stateImage
		if err := json.Unmarshal(first, &again); err != nil {
			t.Fatalf("image does not decode: %v\n%s", err, first)
		}
		s2 := newState(16, 60_000)
		s2.loadLocked(again)
		second, _ := json.Marshal(s2.imageLocked())
		if !jsonEqual(first, second) {
			t.Fatalf("image not stable:\n%s\n%s", first, second)
		}
		for _, c := range []*Command{
			{Type: CmdOffsets, Offsets: []OffsetCommit{{Group: "g", Topic: "T", QueueID: 0, Offset: 1}}},
			{Type: CmdDeleteTopic, Name: "T"},
			{Type: CmdDeleteGroup, Name: "g"},
			{Type: CmdScheduleOffsets, Schedule: map[int32]int64{2: 1}},
			{Type: CmdTxnCheck, TxnCheck: &txnCheck{FloorQueue: 5, FloorPhy: 5}},
		} {
			s.applyLocked(c, 7)
		}
	})
}

// jsonEqual compares two JSON documents by value (map key order and
// slice order from map iteration aside, which imageLocked does not fix).
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(normalizeJSON(x))
	ya, _ := json.Marshal(normalizeJSON(y))
	return bytes.Equal(xa, ya)
}

// normalizeJSON sorts the arrays of objects or arrays by their encoding:
// those come from map iteration, which imageLocked does not order.
func normalizeJSON(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = normalizeJSON(e)
		}
	case []any:
		enc := make([]string, len(v))
		sorted := false
		for i, e := range v {
			switch e.(type) {
			case map[string]any, []any:
				sorted = true
			}
			b, _ := json.Marshal(normalizeJSON(e))
			enc[i] = string(b)
		}
		if !sorted {
			return v
		}
		slices.Sort(enc)
		out := make([]any, len(v))
		for i, s := range enc {
			_ = json.Unmarshal([]byte(s), &out[i])
		}
		return out
	}
	return v
}

// FuzzParseIndexRebuildMarker: an INDEX_REBUILD file of any text either
// reads as a rebuild that writes back as the same marker (whatever the
// spacing around its two fields), or is refused; never a panic.
func FuzzParseIndexRebuildMarker(f *testing.F) {
	f.Add(indexRebuild{from: 4096, to: 17}.marker())
	f.Add(indexRebuild{from: 0, to: 1<<64 - 1}.marker())
	for _, s := range []string{"", "1", "1 2 3", "-1 5", "5 -1", " 7\t8 \n", "+7 08", "9223372036854775808 1", "recorded (the marker file is empty)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, ok := parseIndexRebuildMarker(s)
		if !ok {
			return
		}
		if r.from < 0 {
			t.Fatalf("%q read as from %d", s, r.from)
		}
		back, ok := parseIndexRebuildMarker(r.marker())
		if !ok || back.from != r.from || back.to != r.to {
			t.Fatalf("%q → %+v → %q → %+v, %v", s, r, r.marker(), back, ok)
		}
	})
}

// FuzzTimerDue: a send's timer and DELAY properties of any value are
// held, passed through or refused with a remark, never a panic; a held
// message is due after now and within timerMaxDelaySec, and a deliver
// time already past (or a delay below zero) is a normal message, never
// refused as too far ahead.
func FuzzTimerDue(f *testing.F) {
	c := &Controller{}
	c.cfg.TimerMaxDelaySec = 3600
	for _, s := range []string{"60", "0", "-1", "x", "9223372036854775807", "-9223372036854775808", "1099511627777", "3601"} {
		f.Add(uint8(0), s, "")
		f.Add(uint8(2), s, "0")
	}
	f.Add(uint8(2), strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10), "")
	f.Add(uint8(1), "60000", "3")
	f.Fuzz(func(t *testing.T, which uint8, v, delay string) {
		name := timerProperties[int(which)%len(timerProperties)]
		props := map[string]string{name: v}
		if delay != "" {
			props[wire.PropertyDelayTimeLevel] = delay
		}
		before := time.Now().UnixMilli()
		deliverMs, verdict, r := c.timerDue(props)
		after := time.Now().UnixMilli()
		if r != nil {
			if verdict != timerNone || r.Code != remoting.ResponseMessageIllegal || r.Remark == "" {
				t.Fatalf("refusal %d %q with verdict %v", r.Code, r.Remark, verdict)
			}
			absolute := name == wire.PropertyTimerDeliverMs || name == wire.PropertyStartDeliverTime
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && (absolute && n <= before || !absolute && n < 0) {
				t.Fatalf("%s=%d, already past, refused: %s", name, n, r.Remark)
			}
			return
		}
		if verdict == timerHeld && (deliverMs <= before || deliverMs > after+int64(c.cfg.TimerMaxDelaySec)*1000) {
			t.Fatalf("%s=%q held until %d, now %d", name, v, deliverMs, before)
		}
	})
}
