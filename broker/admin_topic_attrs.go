package broker

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Topic attributes (RocketMQ 5's TopicAttributes, altered by
// UPDATE_AND_CREATE_TOPIC's "attributes" field as AttributeParser and
// AttributeUtil.alterCurrentAttributes do). raftmq stores and routes them;
// it accepts only the values that describe what it does anyway, so a
// topic asking for compaction, batch consume queues or its own retention
// is refused when it is created instead of keeping and deleting messages
// by other rules than the ones asked for.

// topicAttribute is one attribute RocketMQ knows: its values, whether an
// existing topic may change it, and why a value raftmq does not implement
// is refused (the "" key: every value outside values).
type topicAttribute struct {
	values      []string
	changeable  bool
	unsupported map[string]string // value → why it is refused
}

var topicAttributes = map[string]topicAttribute{
	"queue.type": {values: []string{"BatchCQ", "SimpleCQ"},
		unsupported: map[string]string{"BatchCQ": "raftmq has simple consume queues only (SimpleCQ)"}},
	"cleanup.policy": {values: []string{"DELETE", "COMPACTION"},
		unsupported: map[string]string{"COMPACTION": "raftmq has no compacted topics: messages are deleted by fileReservedTime"}},
	"message.type": {values: []string{"UNSPECIFIED", "NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED"}, changeable: true,
		// RocketMQ refuses it too unless enableMixedMessageType, which raftmq does not have.
		unsupported: map[string]string{"MIXED": "a topic of mixed message types is not supported (RocketMQ's enableMixedMessageType)"}},
	// RocketMQ takes it only with tiered storage; -1, its default, means
	// the broker's retention.
	"reserve.time": {values: []string{"-1"}, changeable: true,
		unsupported: map[string]string{"": "a topic's own retention is not supported: every topic keeps messages for fileReservedTime (-1)"}},
}

// alterTopicAttributes applies an attributes modification ("+k=v,-k") to
// a topic's current attributes; create says the topic does not exist yet.
// A non-empty error remark refuses the whole request.
func alterTopicAttributes(topic string, current map[string]string, create bool, mod string) (map[string]string, string) {
	out := maps.Clone(current)
	if mod == "" {
		return out, ""
	}
	seen := map[string]bool{}
	set, del := map[string]string{}, []string{}
	for kv := range strings.SplitSeq(mod, ",") {
		key, value, hasValue := strings.Cut(kv, "=")
		name := strings.TrimLeft(key, "+-")
		switch {
		case hasValue && !strings.HasPrefix(key, "+"), !hasValue && !strings.HasPrefix(key, "-"), name == "", len(key)-len(name) != 1:
			return nil, fmt.Sprintf("topic attribute %q: add or change one as +key=value, delete one as -key", kv)
		case seen[name]:
			return nil, fmt.Sprintf("topic attribute %s is named twice", name)
		}
		seen[name] = true
		a, known := topicAttributes[name]
		if !known {
			return nil, fmt.Sprintf("unsupported topic attribute %s; the attributes are %s", name, strings.Join(slices.Sorted(maps.Keys(topicAttributes)), ", "))
		}
		if !hasValue {
			switch {
			case create:
				return nil, fmt.Sprintf("topic %s does not exist: -%s deletes an attribute of an existing topic", topic, name)
			case !a.changeable:
				return nil, fmt.Sprintf("topic attribute %s cannot be changed once topic %s exists", name, topic)
			}
			if _, ok := current[name]; !ok {
				return nil, fmt.Sprintf("topic %s has no attribute %s to delete", topic, name)
			}
			del = append(del, name)
			continue
		}
		if why, ok := a.unsupported[""]; ok && !slices.Contains(a.values, value) {
			return nil, fmt.Sprintf("topic attribute %s=%s is not supported: %s", name, value, why)
		}
		if !slices.Contains(a.values, value) {
			return nil, fmt.Sprintf("topic attribute %s=%s: the value is none of %s", name, value, strings.Join(a.values, ", "))
		}
		if why, ok := a.unsupported[value]; ok {
			return nil, fmt.Sprintf("topic attribute %s=%s is not supported: %s", name, value, why)
		}
		if old, ok := current[name]; ok && !create && !a.changeable && old != value {
			return nil, fmt.Sprintf("topic attribute %s cannot be changed once topic %s exists (it is %s)", name, topic, old)
		}
		set[name] = value
	}
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, set)
	for _, k := range del {
		delete(out, k)
	}
	if len(out) == 0 {
		return nil, ""
	}
	return out, ""
}
