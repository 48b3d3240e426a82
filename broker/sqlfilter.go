package broker

import (
	"errors"
	"strings"

	"github.com/raftmq/raftmq/broker/filter"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// SQL92 subscriptions (RocketMQ's ExpressionMessageFilter and
// ConsumerFilterManager, without the consume-queue bloom filter): a
// heartbeat's SQL92 subscription is compiled once per expression text and
// kept with the group's subscription; a pull that carries its own
// expression compiles it through the same cache; the pull reads each
// candidate message's properties from the CommitLog and returns only the
// ones the expression selects, while its offset still moves past the rest.

// filterCacheSize bounds the compiled expressions a node keeps; an entry
// is a few hundred bytes, and distinct live expressions are far fewer.
const filterCacheSize = 1024

// errPropertyFilterOff is the compile "error" a heartbeat's SQL92
// subscription records on a node with enablePropertyFilter=false.
var errPropertyFilterOff = errors.New("SQL92 filtering is off on this broker: set enablePropertyFilter=true in broker.conf")

// propertyFilterOff is the answer to a SQL92 check or pull on a node with
// enablePropertyFilter=false.
func (c *Controller) propertyFilterOff() *remoting.RemotingCommand {
	return response(remoting.ResponseSystemError,
		"broker %s does not filter messages by SQL92: set enablePropertyFilter=true in its broker.conf", c.cfg.BrokerName)
}

// sqlSub is a group's SQL92 subscription of one topic as the heartbeat
// with its newest subVersion brought it: the expression, its version, and
// the compiled form or why it does not compile.
type sqlSub struct {
	src     string
	version int64
	expr    *filter.Expr
	err     error
}

// isTagType reports whether an expression type means tags ("" is TAG, as
// in RocketMQ's ExpressionType.isTagType; the case is not significant).
func isTagType(t string) bool { return t == "" || strings.EqualFold(t, wire.ExpressionTypeTag) }

// isSQL92 reports whether an expression type is SQL92.
func isSQL92(t string) bool { return strings.EqualFold(t, wire.ExpressionTypeSQL92) }

// sqlFilter is a store.MessageFilter selecting the messages whose
// properties satisfy a SQL92 expression. The consume queue carries no
// property data, so every unit passes MatchTagsCode and the decision is
// made on the stored message.
type sqlFilter struct{ expr *filter.Expr }

// MatchTagsCode implements store.MessageFilter.
func (sqlFilter) MatchTagsCode(int64) bool { return true }

// MatchMessage implements store.MessageFilter: the expression over the
// message's stored properties, TAGS included. A property with an empty
// value is null, as in RocketMQ, whose property decoder
// (MessageDecoder.string2messageProperties) drops such pairs — and so do
// the consumers that decode the message.
func (f sqlFilter) MatchMessage(msg []byte) bool {
	// The store verified the entry before handing it over.
	l, err := wire.CheckEntry(msg, false)
	if err != nil {
		return false
	}
	return f.expr.Match(func(key string) (string, bool) {
		v := wire.PropertyBytes(l.Props, key)
		return string(v), len(v) > 0
	})
}
