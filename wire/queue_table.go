package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// TopicOffset is one queue's value in GET_TOPIC_STATS_INFO's (202) answer
// (TopicStatsTable.offsetTable).
type TopicOffset struct {
	MinOffset           int64 `json:"minOffset"`
	MaxOffset           int64 `json:"maxOffset"`
	LastUpdateTimestamp int64 `json:"lastUpdateTimestamp"`
}

// OffsetWrapper is one queue's value in GET_CONSUME_STATS's (208) answer
// (ConsumeStats.offsetTable).
type OffsetWrapper struct {
	BrokerOffset   int64 `json:"brokerOffset"`
	ConsumerOffset int64 `json:"consumerOffset"`
	// LastTimestamp is the store time of the last consumed message (ms).
	LastTimestamp int64 `json:"lastTimestamp"`
	// PullOffset is RocketMQ 5's: where the group's pulls have got to,
	// never below ConsumerOffset (mqadmin consumerProgress prints
	// PullOffset - ConsumerOffset as #Inflight; missing, it reads 0 and
	// the column goes negative). Last, as fastjson orders fields by name.
	PullOffset int64 `json:"pullOffset"`
}

// AppendQueueEntry appends one key/value of a queue-keyed table, the key
// written as fastjson writes a MessageQueue map key: the object itself.
func AppendQueueEntry(b []byte, mq MessageQueue, value any) []byte {
	k, _ := json.Marshal(mq)
	v, _ := json.Marshal(value)
	b = append(b, k...)
	b = append(b, ':')
	return append(b, v...)
}

// RocketMQ's admin answers (TopicStatsTable, ConsumeStats, ResetOffsetBody)
// serialize maps keyed by MessageQueue with fastjson, which writes the key
// object itself as the JSON key: {"offsetTable":{{"brokerName":"b",
// "queueId":0,"topic":"T"}:{"minOffset":0,...}}}. That is not JSON, so
// encoding/json cannot read it; DecodeQueueTable walks it by hand, using a
// json.Decoder for each key and value.

// QueueEntry is one key/value of a queue-keyed table.
type QueueEntry struct {
	// Queue is the key.
	Queue MessageQueue
	// Value is the value's JSON, as written.
	Value json.RawMessage
}

// DecodeQueueTable extracts the queue-keyed object stored under field at
// the top level of body, its entries in the order written. Standard JSON with string keys ("T@b@0" style is
// not used by RocketMQ) is refused with an error naming the position.
func DecodeQueueTable(body []byte, field string) ([]QueueEntry, error) {
	key := []byte(`"` + field + `"`)
	i := bytes.Index(body, key)
	if i < 0 {
		return nil, nil
	}
	p := &scan{b: body, i: i + len(key)}
	if err := p.expect(':'); err != nil {
		return nil, err
	}
	if err := p.expect('{'); err != nil {
		return nil, err
	}
	var out []QueueEntry
	if p.peek() == '}' {
		return out, nil
	}
	for {
		var k MessageQueue
		if err := p.decode(&k); err != nil {
			return nil, err
		}
		if err := p.expect(':'); err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := p.decode(&v); err != nil {
			return nil, err
		}
		out = append(out, QueueEntry{Queue: k, Value: v})
		switch p.peek() {
		case ',':
			p.i++
		case '}':
			return out, nil
		default:
			return nil, p.errorf("want , or }")
		}
	}
}

type scan struct {
	b []byte
	i int
}

func (s *scan) skip() {
	for s.i < len(s.b) && strings.IndexByte(" \t\r\n", s.b[s.i]) >= 0 {
		s.i++
	}
}

func (s *scan) peek() byte {
	s.skip()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

func (s *scan) expect(c byte) error {
	if s.peek() != c {
		return s.errorf("want %q", c)
	}
	s.i++
	return nil
}

func (s *scan) decode(dst any) error {
	s.skip()
	d := json.NewDecoder(bytes.NewReader(s.b[s.i:]))
	if err := d.Decode(dst); err != nil {
		return s.errorf("%v", err)
	}
	s.i += int(d.InputOffset())
	return nil
}

func (s *scan) errorf(format string, args ...any) error {
	return &DecodeError{Offset: s.i, Reason: "queue-keyed table: " + fmt.Sprintf(format, args...)}
}
