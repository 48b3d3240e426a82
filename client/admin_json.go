package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/raftmq/raftmq/wire"
)

// RocketMQ's admin answers (TopicStatsTable, ConsumeStats, ResetOffsetBody)
// serialize maps keyed by MessageQueue with fastjson, which writes the key
// object itself as the JSON key: {"offsetTable":{{"brokerName":"b",
// "queueId":0,"topic":"T"}:{"minOffset":0,...}}}. That is not JSON, so
// encoding/json cannot read it; decodeQueueTable walks it by hand, using a
// json.Decoder for each key and value.

// queueEntry is one key/value of a queue-keyed table.
type queueEntry struct {
	Queue MessageQueue
	Value json.RawMessage
}

// decodeQueueTable extracts the queue-keyed object stored under field at
// the top level of body. Standard JSON with string keys ("T@b@0" style is
// not used by RocketMQ) is refused with an error naming the position.
func decodeQueueTable(body []byte, field string) ([]queueEntry, error) {
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
	var out []queueEntry
	if p.peek() == '}' {
		return out, nil
	}
	for {
		var k wire.MessageQueue
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
		out = append(out, queueEntry{Queue: MessageQueue{Topic: k.Topic, BrokerName: k.BrokerName, QueueID: int(k.QueueID)}, Value: v})
		switch p.peek() {
		case ',':
			p.i++
		case '}':
			slices.SortFunc(out, func(a, b queueEntry) int { return CompareQueues(a.Queue, b.Queue) })
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
