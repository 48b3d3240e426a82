package client

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/raftmq/raftmq/wire"
)

// KeySeparator joins several keys in the KEYS property (MessageConst.KEY_SEPARATOR).
const KeySeparator = " "

// Limits checked before a message is sent (RocketMQ Validators and the
// producer's defaults).
const (
	// MaxTopicLength is Validators.TOPIC_MAX_LENGTH (wire.MaxTopicLength).
	MaxTopicLength = wire.MaxTopicLength
	// DefaultMaxMessageSize is DefaultMQProducer.maxMessageSize (4 MiB).
	DefaultMaxMessageSize = 4 << 20
	// maxPropertiesLength is what PROPLEN (an int16) can express.
	maxPropertiesLength = wire.MaxPropertiesLen
)

// Message is a message to send. Topic and Body are required; the other
// fields become message properties or steer queue selection.
type Message struct {
	// Topic is where the message goes: at most 127 characters of
	// [%|a-zA-Z0-9_-].
	Topic string
	// Body is the payload; bodies above the producer's compression
	// threshold (4 KiB by default) are sent zlib-compressed.
	Body []byte
	// Flag is an application-defined int carried unchanged.
	Flag int32
	// Tags is the tag consumers filter on ("TagA"); empty means none.
	Tags string
	// Keys are business keys indexed by the broker for lookup by key.
	Keys []string
	// DelayLevel > 0 asks for delayed delivery at that RocketMQ delay
	// level (1 = 1 s … 18 = 2 h).
	DelayLevel int
	// DeliverAt asks for delivery at that time (RocketMQ 5 timer message,
	// property TIMER_DELIVER_MS; the broker's clock decides when it is
	// due), at most the broker's timerMaxDelaySec (7 days by default)
	// ahead. A time already passed sends a normal message.
	DeliverAt time.Time
	// DeliverAfter asks for delivery that long after the broker stores the
	// message (property TIMER_DELAY_MS), at millisecond precision.
	// DeliverAt, DeliverAfter and DelayLevel exclude each other.
	DeliverAfter time.Duration
	// ShardingKey is the queue-selection hint of HashSelector: messages
	// with the same key go to the same queue, in order.
	ShardingKey string
	// Properties are user properties. Names used by the fields above
	// (KEYS, TAGS, DELAY, ...) are overwritten by those fields. A UNIQ_KEY
	// set here is the message's id (SendResult.MsgID), as RocketMQ's
	// clients keep it; without one every send makes a new one.
	// TRAN_MSG=true (which a consumed transactional message carries) makes
	// a half message: plain sends refuse it, so a forwarded message is not
	// stored invisibly; delete it to forward such a message.
	Properties map[string]string
}

// NewMessage returns a message for topic with body.
func NewMessage(topic string, body []byte) *Message {
	return &Message{Topic: topic, Body: body}
}

// WithTags sets Tags and returns m, for chaining.
func (m *Message) WithTags(tags string) *Message { m.Tags = tags; return m }

// WithDeliverAt sets DeliverAt and returns m, for chaining.
func (m *Message) WithDeliverAt(t time.Time) *Message { m.DeliverAt = t; return m }

// WithDeliverAfter sets DeliverAfter and returns m, for chaining.
func (m *Message) WithDeliverAfter(d time.Duration) *Message { m.DeliverAfter = d; return m }

// WithKeys sets Keys and returns m, for chaining.
func (m *Message) WithKeys(keys ...string) *Message { m.Keys = keys; return m }

// WithProperty sets one user property and returns m, for chaining.
func (m *Message) WithProperty(name, value string) *Message {
	if m.Properties == nil {
		m.Properties = make(map[string]string)
	}
	m.Properties[name] = value
	return m
}

// Property returns a user property ("" when absent).
func (m *Message) Property(name string) string { return m.Properties[name] }

// String summarizes the message for logs without the body bytes.
func (m *Message) String() string {
	return fmt.Sprintf("Message{topic=%s tags=%q keys=%v body=%dB props=%v}", m.Topic, m.Tags, m.Keys, len(m.Body), m.Properties)
}

// systemProperties calls set for each property derived from m's fields.
func (m *Message) systemProperties(set func(k, v string)) {
	if m.Tags != "" {
		set(wire.PropertyTags, m.Tags)
	}
	if len(m.Keys) > 0 {
		set(wire.PropertyKeys, strings.Join(m.Keys, KeySeparator))
	}
	if m.DelayLevel > 0 {
		set(wire.PropertyDelayTimeLevel, strconv.Itoa(m.DelayLevel))
	}
	if m.ShardingKey != "" {
		set(wire.PropertyShardingKey, m.ShardingKey)
	}
	if !m.DeliverAt.IsZero() {
		set(wire.PropertyTimerDeliverMs, strconv.FormatInt(m.DeliverAt.UnixMilli(), 10))
	}
	if m.DeliverAfter > 0 {
		set(wire.PropertyTimerDelayMs, strconv.FormatInt(m.DeliverAfter.Milliseconds(), 10))
	}
}

// timer reports whether m is a timer message (by its fields or a timer
// property set directly); such a message is never batched.
func (m *Message) timer() bool {
	if !m.DeliverAt.IsZero() || m.DeliverAfter > 0 {
		return true
	}
	for _, k := range [...]string{wire.PropertyTimerDeliverMs, wire.PropertyTimerDelaySec, wire.PropertyTimerDelayMs, wire.PropertyStartDeliverTime} {
		if m.Properties[k] != "" {
			return true
		}
	}
	return false
}

// delayed reports whether m asks for a delay level, by DelayLevel or by a
// DELAY property set directly (Java's Message.setDelayTimeLevel sets just
// that property); brokers refuse one in a batch. A level of 0 or below
// asks for none, as brokers read it; one that is not a number is kept
// out of batches too, so that the broker's refusal names the message.
func (m *Message) delayed() bool {
	if m.DelayLevel > 0 {
		return true
	}
	d := m.Properties[wire.PropertyDelayTimeLevel]
	if d == "" {
		return false
	}
	level, err := strconv.Atoi(d)
	return err != nil || level > 0
}

// half reports whether m carries TRAN_MSG=true, which makes brokers store
// it as a transaction's half message (they read it case-insensitively, as
// Java's Boolean.parseBoolean).
func (m *Message) half() bool {
	return strings.EqualFold(m.Properties[wire.PropertyTransactionPrep], "true")
}

// errHalfOutsideTransaction refuses a half message sent by a plain send:
// the broker would store it invisibly and answer SEND_OK, and with no
// transaction to end it or listener to answer its check-back it would
// never be delivered.
func errHalfOutsideTransaction(m *Message) error {
	return fmt.Errorf("%w: message to %q carries %s=%s, which makes it a transaction's half message; send it with TransactionProducer.SendMessageInTransaction, "+
		"or delete the %s property to send it as a plain message (a consumed transactional message may still carry it, e.g. one committed on an older broker)",
		ErrInvalidMessage, m.Topic, wire.PropertyTransactionPrep, m.Properties[wire.PropertyTransactionPrep], wire.PropertyTransactionPrep)
}

// overridden reports whether a user property named k is replaced by a
// field of m or by the send path (UNIQ_KEY, idempotence).
func (m *Message) overridden(k string) bool {
	switch k {
	case wire.PropertyTags:
		return m.Tags != ""
	case wire.PropertyKeys:
		return len(m.Keys) > 0
	case wire.PropertyDelayTimeLevel:
		return m.DelayLevel > 0
	case wire.PropertyShardingKey:
		return m.ShardingKey != ""
	case wire.PropertyTimerDeliverMs:
		return !m.DeliverAt.IsZero()
	case wire.PropertyTimerDelayMs:
		return m.DeliverAfter > 0
	case wire.PropertyUniqKey, wire.PropertyProducerID, wire.PropertySequence:
		return true
	}
	return false
}

// appendWireProperties writes the properties string of m for sending
// straight into dst, without an intermediate map (this is on every send's
// path): user properties first, then system ones, then extra name/value
// pairs. Names appear once; order does not matter on the
// wire.
func (m *Message) appendWireProperties(dst []byte, extra ...string) []byte {
	pair := func(k, v string) {
		dst = append(dst, k...)
		dst = append(dst, wire.PropertyNameSeparator)
		dst = append(dst, v...)
		dst = append(dst, wire.PropertySeparator)
	}
	for k, v := range m.Properties {
		if !m.overridden(k) {
			pair(k, v)
		}
	}
	m.systemProperties(pair)
	for i := 0; i+1 < len(extra); i += 2 {
		pair(extra[i], extra[i+1])
	}
	return dst
}

// validateTopic applies Validators.checkTopic.
func validateTopic(topic string) error {
	if topic == "" {
		return fmt.Errorf("%w: topic is empty", ErrInvalidMessage)
	}
	if len(topic) > MaxTopicLength {
		return fmt.Errorf("%w: topic %q is %d bytes, longer than %d", ErrInvalidMessage, topic, len(topic), MaxTopicLength)
	}
	if !wire.ValidName(topic) {
		return fmt.Errorf("%w: topic %q has characters outside %%|a-zA-Z0-9_-", ErrInvalidMessage, topic)
	}
	return nil
}

// validGroup reports whether group is a name brokers accept
// (Validators.checkGroup) no longer than limit.
func validGroup(group string, limit int) bool {
	return len(group) <= limit && wire.ValidName(group)
}

// maxConsumerGroupLength keeps a consumer group's retry topic
// (%RETRY%group) within the topic limit: a longer group's redeliveries
// could be stored but never pulled.
const maxConsumerGroupLength = wire.MaxTopicLength - len(wire.RetryGroupTopicPrefix)

// validate checks m before sending (Validators.checkMessage).
func (m *Message) validate(maxSize int) error {
	if m == nil {
		return fmt.Errorf("%w: nil message", ErrInvalidMessage)
	}
	if err := validateTopic(m.Topic); err != nil {
		return err
	}
	if m.Topic == wire.TopicAutoCreate {
		return fmt.Errorf("%w: topic %s is reserved for auto-creation and cannot be sent to", ErrInvalidMessage, wire.TopicAutoCreate)
	}
	if wire.SendForbidden(m.Topic) {
		return fmt.Errorf("%w: topic %s is a system topic no client may send to", ErrInvalidMessage, m.Topic)
	}
	if len(m.Body) == 0 {
		return fmt.Errorf("%w: body of message to %q is empty", ErrInvalidMessage, m.Topic)
	}
	if len(m.Body) > maxSize {
		return fmt.Errorf("%w: body of message to %q is %d bytes, above the limit %d", ErrInvalidMessage, m.Topic, len(m.Body), maxSize)
	}
	if m.DelayLevel < 0 {
		return fmt.Errorf("%w: negative delay level %d", ErrInvalidMessage, m.DelayLevel)
	}
	if m.DeliverAfter < 0 {
		return fmt.Errorf("%w: negative DeliverAfter %v", ErrInvalidMessage, m.DeliverAfter)
	}
	if n := btoi(m.DelayLevel > 0) + btoi(!m.DeliverAt.IsZero()) + btoi(m.DeliverAfter > 0); n > 1 {
		return fmt.Errorf("%w: DelayLevel, DeliverAt and DeliverAfter exclude each other (the broker would honour only one)", ErrInvalidMessage)
	}
	check := func(what, s string) error {
		if strings.ContainsAny(s, "\x01\x02") {
			return fmt.Errorf("%w: %s %q contains a property separator (\\x01 or \\x02)", ErrInvalidMessage, what, s)
		}
		return nil
	}
	for k, v := range m.Properties {
		if k == "" {
			return fmt.Errorf("%w: empty property name", ErrInvalidMessage)
		}
		if err := check("property name", k); err != nil {
			return err
		}
		if err := check("property value", v); err != nil {
			return err
		}
	}
	if err := check("tags", m.Tags); err != nil {
		return err
	}
	for _, k := range m.Keys {
		if err := check("key", k); err != nil {
			return err
		}
	}
	return check("sharding key", m.ShardingKey)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
