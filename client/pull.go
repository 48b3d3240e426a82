package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// PullStatus is the outcome of a pull (RocketMQ's PullStatus).
type PullStatus int

const (
	// PullFound: messages were returned.
	PullFound PullStatus = iota
	// PullNoNewMsg: nothing beyond the offset (PULL_NOT_FOUND, 19).
	PullNoNewMsg
	// PullNoMatchedMsg: messages exist but none matched the filter
	// (PULL_RETRY_IMMEDIATELY, 20).
	PullNoMatchedMsg
	// PullOffsetIllegal: the offset is outside the queue
	// (PULL_OFFSET_MOVED, 21); NextBeginOffset says where to go.
	PullOffsetIllegal
)

// String returns RocketMQ's enum name.
func (s PullStatus) String() string {
	switch s {
	case PullFound:
		return "FOUND"
	case PullNoNewMsg:
		return "NO_NEW_MSG"
	case PullNoMatchedMsg:
		return "NO_MATCHED_MSG"
	case PullOffsetIllegal:
		return "OFFSET_ILLEGAL"
	}
	return fmt.Sprintf("PullStatus(%d)", int(s))
}

// PullRequest is one PULL_MESSAGE (11) call's parameters.
type PullRequest struct {
	// Group is the consumer group.
	Group string
	// Queue is the queue to read and Offset the first queue offset wanted.
	Queue  MessageQueue
	Offset int64
	// MaxMsgNums bounds the batch (the push consumer's default is 32).
	MaxMsgNums int
	// SysFlag holds PullFlag* bits.
	SysFlag int32
	// CommitOffset is the consumed offset piggybacked on the pull when
	// wire.PullFlagCommitOffset is set.
	CommitOffset int64
	// Suspend is how long the broker may hold the request when nothing is
	// there yet (long polling; with wire.PullFlagSuspend).
	SuspendMillis int64
	// Subscription is the expression and version sent with
	// wire.PullFlagSubscription; nil sends none (the broker uses the one from
	// heartbeats).
	Subscription *SubscriptionData
}

// PullResult is a broker's answer to a pull, with the messages decoded and
// re-filtered by tag.
type PullResult struct {
	// Status says whether messages were found (PullFound) or why not.
	Status PullStatus
	// NextBeginOffset is where the next pull of this queue starts.
	NextBeginOffset int64
	// MinOffset and MaxOffset bound the queue at the time of the pull.
	MinOffset, MaxOffset int64
	// SuggestWhichBrokerID is the member the broker suggests pulling from
	// next (0 = the master / leader).
	SuggestWhichBrokerID int64
	// LeaderAddr is set when a raftmq follower answered: the address of
	// its group's leader, to pull from next.
	LeaderAddr string
	// Messages are the found messages that match the subscription.
	Messages []*MessageExt
}

// newPullCommand builds the PULL_MESSAGE request.
func newPullCommand(r *PullRequest) *remoting.RemotingCommand {
	h := &wire.PullMessageRequestHeader{
		ConsumerGroup:        r.Group,
		Topic:                r.Queue.Topic,
		QueueID:              int32(r.Queue.QueueID),
		QueueOffset:          r.Offset,
		MaxMsgNums:           int32(r.MaxMsgNums),
		SysFlag:              r.SysFlag,
		CommitOffset:         r.CommitOffset,
		SuspendTimeoutMillis: r.SuspendMillis,
		BrokerName:           r.Queue.BrokerName,
	}
	if r.Subscription != nil {
		h.Subscription = r.Subscription.SubString
		h.SubVersion = r.Subscription.SubVersion
		h.ExpressionType = r.Subscription.ExpressionType
	}
	return remoting.NewRequest(remoting.RequestPullMessage, h, nil)
}

// parsePullResponse turns a pull answer into a PullResult
// (MQClientAPIImpl.processPullResponse + PullAPIWrapper.processPullResult):
// codes 0/19/20/21 map to the statuses, any other code is a *BrokerError;
// found messages are decoded, re-filtered against sub, stamped with
// MIN_OFFSET / MAX_OFFSET and given the queue's broker-side identity.
func parsePullResponse(addr string, r *PullRequest, resp *remoting.RemotingCommand) (*PullResult, error) {
	res := &PullResult{}
	switch resp.Code {
	case remoting.ResponseSuccess:
		res.Status = PullFound
	case remoting.ResponsePullNotFound:
		res.Status = PullNoNewMsg
	case remoting.ResponsePullRetryImmediately:
		res.Status = PullNoMatchedMsg
	case remoting.ResponsePullOffsetMoved:
		res.Status = PullOffsetIllegal
	default:
		return nil, &BrokerError{Broker: r.Queue.BrokerName, Addr: addr, Code: resp.Code, Remark: resp.Remark, LeaderAddr: resp.ExtFields[wire.ExtLeaderAddr]}
	}
	var h wire.PullMessageResponseHeader
	if err := resp.DecodeHeader(&h); err != nil {
		return nil, fmt.Errorf("client: pull response from %s: %w", addr, err)
	}
	res.NextBeginOffset, res.MinOffset, res.MaxOffset, res.SuggestWhichBrokerID = h.NextBeginOffset, h.MinOffset, h.MaxOffset, h.SuggestWhichBrokerID
	res.LeaderAddr = h.LeaderAddr
	if res.Status != PullFound {
		return res, nil
	}
	msgs, more, err := decodeMessages(resp.Body, DecodeOptions{}, pullInflateBudget)
	if more {
		res.NextBeginOffset = msgs[len(msgs)-1].QueueOffset + 1
	}
	if err != nil {
		var ue *UndecodableMessageError
		switch {
		case len(msgs) > 0:
			// Keep what decoded; the next pull starts at the bad entry,
			// which then comes first and is reported below.
			res.NextBeginOffset = msgs[len(msgs)-1].QueueOffset + 1
		case errors.As(err, &ue) && r.Subscription != nil && !r.Subscription.MatchesTag(ue.Message.Tags):
			// Not one the subscription takes: passed over as it would be
			// decoded.
			res.NextBeginOffset = ue.Message.QueueOffset + 1
		default:
			if ue != nil {
				ue.Message.QueueID = int32(r.Queue.QueueID)
			}
			return nil, fmt.Errorf("client: pull body from %s: %w", addr, err)
		}
	}
	minS, maxS := strconv.FormatInt(res.MinOffset, 10), strconv.FormatInt(res.MaxOffset, 10)
	for _, m := range msgs {
		if r.Subscription != nil && !r.Subscription.MatchesTag(m.Tags) {
			continue
		}
		m.Properties[wire.PropertyMinOffset] = minS
		m.Properties[wire.PropertyMaxOffset] = maxS
		m.QueueID = int32(r.Queue.QueueID)
		m.ServedBy = addr
		res.Messages = append(res.Messages, m)
	}
	return res, nil
}

// PullMessage sends one PULL_MESSAGE to addr and waits for the answer,
// until ctx ends (give long polls a deadline beyond SuspendMillis). It is
// the building block of the push and pull consumers.
//
// A found message whose body cannot be decoded ends the batch before it
// (NextBeginOffset is its offset); pulled again, it comes first and the
// pull fails with an error wrapping *UndecodableMessageError, which holds
// the message as stored. The caller decides what to do with it (the
// consumers send it to the group's DLQ and move on); pulling the same
// offset again returns the same error.
func PullMessage(ctx context.Context, rc *remoting.Client, addr string, r *PullRequest) (*PullResult, error) {
	resp, err := rc.InvokeSync(ctx, addr, newPullCommand(r))
	if err != nil {
		return nil, err
	}
	return parsePullResponse(addr, r, resp)
}
