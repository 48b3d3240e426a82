package client

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/raftmq/raftmq/wire"
)

// TopicPublishInfo is what a producer needs of a route: the writable
// queues of every broker group that has a master, in brokerName order,
// and a rotating index to spread sends over them
// (RocketMQ's TopicPublishInfo). It is immutable once built except for the
// index, so it is shared without locks.
type TopicPublishInfo struct {
	// Topic is the topic the queues belong to.
	Topic string
	// OrderTopic is set when the route came from an orderTopicConf.
	OrderTopic bool
	// Queues are the writable queues.
	Queues []MessageQueue
	// Route is the name server's answer it was built from.
	Route *wire.TopicRouteData
	// fromDefault is set when the queues are TBW102's, standing in for a
	// topic the broker will create on first send.
	fromDefault bool

	index atomic.Uint32 // sendWhichQueue; starts random, as ThreadLocalIndex
}

// singleGroup reports whether every queue belongs to one broker group, so
// a retry has no other group to go to.
func (t *TopicPublishInfo) singleGroup() bool {
	return len(t.Queues) > 0 && t.Queues[0].BrokerName == t.Queues[len(t.Queues)-1].BrokerName
}

// newPublishInfo builds the publish info of topic from its route
// (MQClientInstance.topicRouteData2TopicPublishInfo): an orderTopicConf
// ("brokerName:queueNums;...") wins; otherwise every queue data with write
// permission whose broker has a master (brokerId 0) contributes
// writeQueueNums queues.
func newPublishInfo(topic string, rd *wire.TopicRouteData) *TopicPublishInfo {
	info := &TopicPublishInfo{Topic: topic, Route: rd}
	info.index.Store(rand.Uint32())
	if rd.OrderTopicConf != "" {
		for item := range strings.SplitSeq(rd.OrderTopicConf, ";") {
			name, nums, ok := strings.Cut(item, ":")
			if !ok {
				continue
			}
			n, err := strconv.Atoi(nums)
			if err != nil {
				continue
			}
			for i := 0; i < n; i++ {
				info.Queues = append(info.Queues, MessageQueue{Topic: topic, BrokerName: name, QueueID: i})
			}
		}
		info.OrderTopic = true
		return info
	}
	qds := slices.Clone(rd.QueueDatas)
	slices.SortFunc(qds, func(a, b wire.QueueData) int { return strings.Compare(a.BrokerName, b.BrokerName) })
	// Groups without a master are kept aside: in raftmq that is a group
	// mid-election whose followers name the new leader, so when no group
	// has a master they are still worth sending to. With a master anywhere
	// they are left out, as RocketMQ does.
	var masterless []MessageQueue
	for _, qd := range qds {
		if qd.Perm&wire.PermWrite == 0 {
			continue
		}
		bd := findBrokerData(rd, qd.BrokerName)
		if bd == nil || len(bd.BrokerAddrs) == 0 {
			continue
		}
		for i := 0; i < qd.WriteQueueNums; i++ {
			mq := MessageQueue{Topic: topic, BrokerName: qd.BrokerName, QueueID: i}
			if bd.BrokerAddrs[wire.MasterID] == "" {
				masterless = append(masterless, mq)
			} else {
				info.Queues = append(info.Queues, mq)
			}
		}
	}
	if len(info.Queues) == 0 {
		info.Queues = masterless
	}
	return info
}

// subscribeQueues lists the readable queues of a route
// (topicRouteData2TopicSubscribeInfo): readQueueNums per readable queue
// data, whether or not the group currently has a master, since consumers
// may read from followers.
func subscribeQueues(topic string, rd *wire.TopicRouteData) []MessageQueue {
	var out []MessageQueue
	for _, qd := range rd.QueueDatas {
		if qd.Perm&wire.PermRead == 0 {
			continue
		}
		for i := 0; i < qd.ReadQueueNums; i++ {
			out = append(out, MessageQueue{Topic: topic, BrokerName: qd.BrokerName, QueueID: i})
		}
	}
	SortQueues(out)
	return out
}

func findBrokerData(rd *wire.TopicRouteData, name string) *wire.BrokerData {
	for i := range rd.BrokerDatas {
		if rd.BrokerDatas[i].BrokerName == name {
			return &rd.BrokerDatas[i]
		}
	}
	return nil
}

// ok reports whether there is any queue to send to.
func (p *TopicPublishInfo) ok() bool { return p != nil && len(p.Queues) > 0 }

// selectQueue returns the next queue in rotation that passes every
// filter, trying each queue at most once (TopicPublishInfo
// .selectOneMessageQueue(QueueFilter...)); with no filter it returns the
// next queue.
func (p *TopicPublishInfo) selectQueue(filters ...func(MessageQueue) bool) (MessageQueue, bool) {
	n := uint32(len(p.Queues))
	if n == 0 {
		return MessageQueue{}, false
	}
next:
	for i := uint32(0); i < n; i++ {
		mq := p.Queues[p.index.Add(1)%n]
		for _, f := range filters {
			if !f(mq) {
				continue next
			}
		}
		return mq, true
	}
	return MessageQueue{}, false
}
