package console

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// GroupsView is GET /api/groups: every subscription group the group
// leaders know, with its lag over the topics it has committed offsets on;
// with ?group=NAME that group with its queues.
type GroupsView struct {
	Time   int64          `json:"time"`
	Groups []GroupSummary `json:"groups"`
	// Errors are the broker groups that did not answer, by brokerName.
	Errors map[string]string `json:"errors,omitempty"`

	queues map[string][]GroupQueue
}

// GroupSummary is one consumer group's totals.
type GroupSummary struct {
	Group  string   `json:"group"`
	System bool     `json:"system"`
	Topics []string `json:"topics"`
	// Lag is the sum over its queues of brokerOffset-consumerOffset.
	Lag int64 `json:"lag"`
	// ConsumeTps is the brokers' own count of messages pulled per second
	// over the last minute (GET_BROKER_CONSUME_STATS's consumeTps).
	ConsumeTps float64 `json:"consumeTps"`
	// Rate is committed messages per second since the previous
	// collection (-1 before there is one).
	Rate float64 `json:"rate"`
	// LastTimestamp is the store time of the newest consumed message (ms).
	LastTimestamp int64 `json:"lastTimestamp"`
}

// GroupQueue is one queue's consume progress.
type GroupQueue struct {
	Topic          string  `json:"topic"`
	BrokerName     string  `json:"brokerName"`
	QueueID        int32   `json:"queueId"`
	BrokerOffset   int64   `json:"brokerOffset"`
	ConsumerOffset int64   `json:"consumerOffset"`
	Lag            int64   `json:"lag"`
	Rate           float64 `json:"rate"`
	LastTimestamp  int64   `json:"lastTimestamp"`
}

// GroupDetail is GET /api/groups?group=NAME.
type GroupDetail struct {
	Time int64 `json:"time"`
	GroupSummary
	QueueList []GroupQueue `json:"queueList"`
}

// systemGroup is a RocketMQ built-in or system group, or one of the
// tools' own (rocketmq-exporter's __MONITOR_CONSUMER, the ONS APIs').
func systemGroup(g string) bool {
	return wire.IsSystemGroup(g) || strings.HasPrefix(g, "CID_ONSAPI_") || g == "__MONITOR_CONSUMER"
}

func (c *Console) serveGroups(w http.ResponseWriter, r *http.Request) {
	v := c.groups.get(c.opts.CacheFor, func(prev map[queueKey]sample, now time.Time) (*GroupsView, map[queueKey]sample) {
		return c.collectGroups(r.Context(), prev, now)
	})
	g := r.URL.Query().Get("group")
	if g == "" {
		writeJSON(w, http.StatusOK, v)
		return
	}
	i := slices.IndexFunc(v.Groups, func(s GroupSummary) bool { return s.Group == g })
	if i < 0 {
		writeError(w, http.StatusNotFound, "no broker group's leader knows a subscription group "+g)
		return
	}
	writeJSON(w, http.StatusOK, GroupDetail{Time: v.Time, GroupSummary: v.Groups[i], QueueList: v.queues[g]})
}

// collectGroups asks every group leader for GET_BROKER_CONSUME_STATS
// (317), one request per broker group for all consumer groups.
func (c *Console) collectGroups(ctx context.Context, prev map[queueKey]sample, now time.Time) (*GroupsView, map[queueKey]sample) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.ReadTimeout)
	defer cancel()
	v := &GroupsView{Time: now.UnixMilli(), Groups: []GroupSummary{}, queues: map[string][]GroupQueue{}}
	ci := c.ns.Routes().ClusterInfo()
	type answer struct {
		name string
		l    *wire.ConsumeStatsList
		err  error
	}
	var answers []*answer
	for _, name := range slices.Sorted(maps.Keys(ci.BrokerAddrTable)) {
		a := &answer{name: name}
		if ci.BrokerAddrTable[name].BrokerAddrs[wire.MasterID] == "" {
			// Its groups' lag would be left out of the sums unnoticed.
			a.err = noLeaderError([]string{name})
		}
		answers = append(answers, a)
	}
	adm, aerr := c.client()
	var wg sync.WaitGroup
	for _, a := range answers {
		if a.err != nil {
			continue
		}
		if aerr != nil {
			a.err = aerr
			continue
		}
		addr := ci.BrokerAddrTable[a.name].BrokerAddrs[wire.MasterID]
		wg.Go(func() {
			resp, err := adm.BrokerRequest(ctx, addr, remoting.RequestGetBrokerConsumeStats, &wire.GetConsumeStatsInBrokerHeader{}, nil)
			if err == nil {
				a.l, err = wire.DecodeConsumeStatsList(resp.Body)
			}
			a.err = err
		})
	}
	wg.Wait()
	byGroup := map[string]*GroupSummary{}
	next := map[queueKey]sample{}
	for _, a := range answers {
		if a.err != nil {
			if v.Errors == nil {
				v.Errors = map[string]string{}
			}
			v.Errors[a.name] = a.err.Error()
			continue
		}
		for _, m := range a.l.ConsumeStatsList {
			for group, list := range m {
				s := byGroup[group]
				if s == nil {
					s = &GroupSummary{Group: group, System: systemGroup(group), Topics: []string{}}
					byGroup[group] = s
				}
				for _, cs := range list {
					s.ConsumeTps += cs.ConsumeTps
					for k, ow := range cs.OffsetTable {
						mq, err := wire.ParseQueueKey(k)
						if err != nil {
							continue
						}
						if mq.BrokerName == "" {
							mq.BrokerName = a.name
						}
						q := GroupQueue{Topic: mq.Topic, BrokerName: mq.BrokerName, QueueID: mq.QueueID, BrokerOffset: ow.BrokerOffset,
							ConsumerOffset: ow.ConsumerOffset, Lag: max(ow.BrokerOffset-ow.ConsumerOffset, 0), LastTimestamp: ow.LastTimestamp}
						key := queueKey{group: group, topic: mq.Topic, broker: mq.BrokerName, queue: mq.QueueID}
						q.Rate = rate(prev, key, now, q.ConsumerOffset)
						next[key] = sample{now, q.ConsumerOffset}
						v.queues[group] = append(v.queues[group], q)
						if !slices.Contains(s.Topics, mq.Topic) {
							s.Topics = append(s.Topics, mq.Topic)
						}
					}
				}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(byGroup)) {
		s := byGroup[name]
		slices.Sort(s.Topics)
		qs := v.queues[name]
		slices.SortFunc(qs, func(a, b GroupQueue) int {
			if c := strings.Compare(a.Topic, b.Topic); c != 0 {
				return c
			}
			if c := strings.Compare(a.BrokerName, b.BrokerName); c != 0 {
				return c
			}
			return int(a.QueueID - b.QueueID)
		})
		if qs == nil {
			v.queues[name] = []GroupQueue{}
		}
		s.Rate = -1
		known := len(qs) > 0
		var sum float64
		for _, q := range qs {
			s.Lag += q.Lag
			s.LastTimestamp = max(s.LastTimestamp, q.LastTimestamp)
			if q.Rate < 0 {
				known = false
			}
			sum += max(q.Rate, 0)
		}
		if known {
			s.Rate = sum
		}
		v.Groups = append(v.Groups, *s)
	}
	return v, next
}
