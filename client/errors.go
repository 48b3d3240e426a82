package client

import (
	"errors"
	"fmt"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// Sentinel errors of the client package. Callers compare with errors.Is;
// the wrapping error names the topic, broker or field involved.
var (
	// ErrInvalidOption is wrapped by option validation errors at
	// construction; the message names the option and the accepted range.
	ErrInvalidOption = errors.New("client: invalid option")

	// ErrInvalidMessage means a message was refused before sending: empty
	// or malformed topic, empty or oversized body, a property containing
	// the separator characters. The message names what was wrong.
	ErrInvalidMessage = errors.New("client: invalid message")

	// ErrMalformedMessage means bytes that should hold stored messages (a
	// pull body) or a batch body could not be decoded; see *DecodeError.
	// It is wire.ErrMalformedMessage: the decoders are package wire's.
	ErrMalformedMessage = wire.ErrMalformedMessage

	// ErrInvalidMessageID means a msgId or UNIQ_KEY string is not the hex
	// layout RocketMQ produces.
	// It is wire.ErrInvalidMessageID.
	ErrInvalidMessageID = wire.ErrInvalidMessageID

	// ErrNoRoute means no name server knows the topic (and auto-creation
	// through TBW102 was off or unavailable). Create the topic, or check
	// the name server addresses.
	ErrNoRoute = errors.New("client: no route for topic")

	// ErrNoNameServer means every configured name server failed to answer.
	ErrNoNameServer = errors.New("client: no name server reachable")

	// ErrNoQueue means the route has no writable queue on a master (or the
	// selector returned none).
	ErrNoQueue = errors.New("client: no writable message queue")

	// ErrNotStarted is returned by producer and consumer calls before Start.
	ErrNotStarted = errors.New("client: not started")

	// ErrClosed is returned by producer and consumer calls after Close.
	ErrClosed = errors.New("client: closed")

	// ErrSendFailed is wrapped by the error of a send whose every attempt
	// failed; the *SendError carries each attempt.
	ErrSendFailed = errors.New("client: send failed")

	// ErrInvalidStrategyInput means an allocation strategy was given an
	// empty consumer id, no queues or no consumers (RocketMQ's
	// AbstractAllocateMessageQueueStrategy.check).
	ErrInvalidStrategyInput = errors.New("client: invalid allocation input")

	// ErrOffsetNotFound means no consume offset is recorded for a queue (a
	// new consumer group): the consumer falls back to its ConsumeFromWhere.
	ErrOffsetNotFound = errors.New("client: no consume offset recorded for queue")

	// ErrNoBroker means an admin call found no broker master (Raft leader)
	// to ask: an unknown cluster, or a group without a leader right now.
	ErrNoBroker = errors.New("client: no broker master to ask")

	// ErrMessageNotFound means no broker holds the message looked up by
	// id or key (QUERY_NOT_FOUND, or an empty answer).
	ErrMessageNotFound = errors.New("client: message not found")

	// ErrTransactionOutcomeUnknown is wrapped by a TransactionSendResult's
	// EndErr when no answer said whether END_TRANSACTION's decision was
	// recorded: the broker's replication timed out (it answered
	// SYSTEM_BUSY), no answer came within SendTimeout, or no leader took
	// it in time. The decision may have taken effect; if it did not, the
	// broker's check-back asks CheckLocalTransaction, whose answer decides
	// the half. It is no refusal.
	ErrTransactionOutcomeUnknown = errors.New("client: transaction outcome unknown")
)

// DecodeError reports where stored-message or batch bytes stopped making
// sense (wire.DecodeError). It unwraps to ErrMalformedMessage.
type DecodeError = wire.DecodeError

// BrokerError is a broker's non-success answer to a send. Code is the
// RocketMQ response code (remoting.Response*); LeaderAddr is set when the
// broker said it is not the leader and named the one that is.
type BrokerError struct {
	// Broker is the brokerName and Addr the address that answered.
	Broker, Addr string
	// Code and Remark are the response's.
	Code   int16
	Remark string
	// LeaderAddr is the wire.ExtLeaderAddr field of a not-leader answer.
	LeaderAddr string
}

// Error implements error.
func (e *BrokerError) Error() string {
	who := e.Addr
	if e.Broker != "" {
		who = e.Broker + " (" + e.Addr + ")"
	}
	s := fmt.Sprintf("client: broker %s answered code %d: %s", who, e.Code, e.Remark)
	if e.LeaderAddr != "" {
		s += " (leader is " + e.LeaderAddr + ")"
	}
	return s
}

// Unwrap maps SYSTEM_BUSY to remoting.ErrServerBusy so errors.Is works on
// the broker error as on the transport's.
func (e *BrokerError) Unwrap() error {
	if e.Code == remoting.ResponseSystemBusy {
		return remoting.ErrServerBusy
	}
	return nil
}

// SendAttempt is one try of a send: where it went and how it failed.
type SendAttempt struct {
	// Broker is the brokerName, Addr the address, QueueID the queue.
	Broker, Addr string
	QueueID      int
	// Err is the failure (a *BrokerError or a transport error).
	Err error
}

// SendError is returned when a send failed on every attempt (the first
// try plus RetryTimesWhenSendFailed retries). It unwraps to ErrSendFailed
// and to the last attempt's error, so errors.Is(err, remoting.ErrTimeout)
// and errors.As(err, &*BrokerError) both see the cause.
type SendError struct {
	// Topic is the message's topic.
	Topic string
	// Attempts lists every try in order.
	Attempts []SendAttempt
}

// Error implements error.
func (e *SendError) Error() string {
	s := fmt.Sprintf("client: send to topic %q failed after %d attempt(s)", e.Topic, len(e.Attempts))
	for _, a := range e.Attempts {
		s += fmt.Sprintf("; %s/%s q%d: %v", a.Broker, a.Addr, a.QueueID, a.Err)
	}
	return s
}

// Unwrap returns ErrSendFailed and the last attempt's error.
func (e *SendError) Unwrap() []error {
	errs := []error{ErrSendFailed}
	if n := len(e.Attempts); n > 0 && e.Attempts[n-1].Err != nil {
		errs = append(errs, e.Attempts[n-1].Err)
	}
	return errs
}
