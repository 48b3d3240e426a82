package console

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// maxTopicStats bounds the topics whose queues one collection asks for
// (user topics first): each costs one request per broker group.
const maxTopicStats = 500

// errNotCollected is the error of a topic past maxTopicStats.
var errNotCollected = fmt.Sprintf("offsets not collected: only the first %d topics (user topics first) are asked", maxTopicStats)

// statsWorkers bounds the concurrent broker requests of one collection.
const statsWorkers = 8

// TopicsView is GET /api/topics: every routed topic with its totals, or
// with ?topic=NAME that topic with its queues.
type TopicsView struct {
	Time   int64          `json:"time"`
	Topics []TopicSummary `json:"topics"`
	// Truncated is true when more than 500 topics exist: the ones past it
	// are listed without offsets, with an error saying so.
	Truncated bool `json:"truncated,omitempty"`

	queues map[string][]QueueView
}

// TopicSummary is one topic's totals over its queues.
type TopicSummary struct {
	Topic string `json:"topic"`
	// System marks RocketMQ's and raftmq's own topics (retry, DLQ,
	// schedule, trace, ...).
	System bool `json:"system"`
	// Brokers are the groups serving it.
	Brokers []string `json:"brokers"`
	Queues  int      `json:"queues"`
	// Messages is the sum of maxOffset-minOffset: what is stored.
	Messages int64 `json:"messages"`
	// MaxOffset is the sum of the queues' max offsets: every message ever
	// written.
	MaxOffset int64 `json:"maxOffset"`
	// Rate is messages per second written since the previous collection;
	// -1 before there is one (the first request after a quiet minute).
	Rate float64 `json:"rate"`
	// LastUpdate is the store time of the newest message (ms, 0 none).
	LastUpdate int64  `json:"lastUpdate"`
	Error      string `json:"error,omitempty"`
}

// QueueView is one queue's offsets.
type QueueView struct {
	BrokerName string  `json:"brokerName"`
	QueueID    int32   `json:"queueId"`
	MinOffset  int64   `json:"minOffset"`
	MaxOffset  int64   `json:"maxOffset"`
	Rate       float64 `json:"rate"`
	LastUpdate int64   `json:"lastUpdate"`
}

// TopicDetail is GET /api/topics?topic=NAME.
type TopicDetail struct {
	Time int64 `json:"time"`
	TopicSummary
	QueueList []QueueView `json:"queueList"`
}

// systemTopic reports the topics an operator did not create: RocketMQ's
// system topics, every RMQ_SYS_ one, and the groups' retry and DLQ topics.
func systemTopic(t string) bool {
	return strings.HasPrefix(t, wire.RetryGroupTopicPrefix) || strings.HasPrefix(t, wire.DLQGroupTopicPrefix) ||
		strings.HasPrefix(t, "RMQ_SYS_") || wire.SystemTopic(t)
}

func (c *Console) serveTopics(w http.ResponseWriter, r *http.Request) {
	v := c.topics.get(c.opts.CacheFor, func(prev map[queueKey]sample, now time.Time) (*TopicsView, map[queueKey]sample) {
		return c.collectTopics(r.Context(), prev, now)
	})
	t := r.URL.Query().Get("topic")
	if t == "" {
		writeJSON(w, http.StatusOK, v)
		return
	}
	i := slices.IndexFunc(v.Topics, func(s TopicSummary) bool { return s.Topic == t })
	if i < 0 {
		writeError(w, http.StatusNotFound, "no topic "+t+" in the name server's routes")
		return
	}
	d := TopicDetail{Time: v.Time, TopicSummary: v.Topics[i], QueueList: v.queues[t]}
	if d.QueueList == nil {
		d.QueueList = []QueueView{}
	}
	writeJSON(w, http.StatusOK, d)
}

// collectTopics asks each topic's leaders for GET_TOPIC_STATS_INFO
// (statsWorkers at a time) and computes rates against prev.
func (c *Console) collectTopics(ctx context.Context, prev map[queueKey]sample, now time.Time) (*TopicsView, map[queueKey]sample) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.ReadTimeout)
	defer cancel()
	all := c.ns.Routes().AllTopics()
	// Brokers also route a topic named after their cluster, one after
	// their group and the cluster's request-reply topic, as RocketMQ's do.
	ci := c.ns.Routes().ClusterInfo()
	systemTopic := func(t string) bool {
		_, cl := ci.ClusterAddrTable[t]
		_, bn := ci.BrokerAddrTable[t]
		_, reply := ci.ClusterAddrTable[strings.TrimSuffix(t, "_REPLY_TOPIC")]
		return cl || bn || reply || systemTopic(t)
	}
	slices.SortStableFunc(all, func(a, b string) int {
		sa, sb := systemTopic(a), systemTopic(b)
		switch {
		case sa == sb:
			return strings.Compare(a, b)
		case sa:
			return 1
		}
		return -1
	})
	v := &TopicsView{Time: now.UnixMilli(), Topics: make([]TopicSummary, len(all)), queues: map[string][]QueueView{}}
	next := map[queueKey]sample{}
	var mu sync.Mutex
	adm, aerr := c.client()
	sem := make(chan struct{}, statsWorkers)
	var wg sync.WaitGroup
	for i, t := range all {
		s := &v.Topics[i]
		*s = TopicSummary{Topic: t, System: systemTopic(t), Rate: -1, Brokers: []string{}}
		rd := c.ns.Routes().PickupTopicRouteData(t)
		masters := map[string]string{}
		var leaderless []string
		if rd != nil {
			for _, bd := range rd.BrokerDatas {
				s.Brokers = append(s.Brokers, bd.BrokerName)
				if a := bd.BrokerAddrs[wire.MasterID]; a != "" {
					masters[bd.BrokerName] = a
				} else {
					leaderless = append(leaderless, bd.BrokerName)
				}
			}
			for _, qd := range rd.QueueDatas {
				s.Queues += int(qd.ReadQueueNums)
			}
		}
		if i >= maxTopicStats {
			// Zero offsets would read as an empty topic.
			v.Truncated, s.Error = true, errNotCollected
			continue
		}
		if aerr != nil {
			s.Error = aerr.Error()
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			qs, err := topicQueues(ctx, adm, t, masters)
			if err == nil && len(leaderless) > 0 {
				// Their queues are missing from the sums: say so, or the
				// topic reads as holding fewer messages than it does.
				err = noLeaderError(leaderless)
			}
			var rateSum float64
			rateKnown := len(qs) > 0
			for j := range qs {
				q := &qs[j]
				k := queueKey{topic: t, broker: q.BrokerName, queue: q.QueueID}
				q.Rate = rate(prev, k, now, q.MaxOffset)
				if q.Rate < 0 {
					rateKnown = false
				}
				rateSum += max(q.Rate, 0)
				s.Messages += q.MaxOffset - q.MinOffset
				s.MaxOffset += q.MaxOffset
				s.LastUpdate = max(s.LastUpdate, q.LastUpdate)
			}
			if rateKnown {
				s.Rate = rateSum
			}
			if err != nil {
				s.Error = err.Error()
			}
			mu.Lock()
			defer mu.Unlock()
			v.queues[t] = qs
			if err != nil {
				// Keep the last samples of a topic that did not answer in
				// full, so the next collection still has a rate.
				for k, smp := range prev {
					if k.topic == t {
						next[k] = smp
					}
				}
			}
			for _, q := range qs {
				next[queueKey{topic: t, broker: q.BrokerName, queue: q.QueueID}] = sample{now, q.MaxOffset}
			}
		})
	}
	wg.Wait()
	return v, next
}

// noLeaderError names the broker groups a collection could not ask: the
// name server routes no leader (brokerId 0) for them, as during an
// election.
func noLeaderError(names []string) error {
	return fmt.Errorf("no leader routed for %s (an election?): its queues are not counted", strings.Join(names, ", "))
}

// topicQueues reads one topic's queue offsets from its leaders; the
// queues of the groups that answered are kept when one did not.
func topicQueues(ctx context.Context, adm *client.Admin, topic string, masters map[string]string) ([]QueueView, error) {
	var out []QueueView
	var firstErr error
	for _, name := range slices.Sorted(maps.Keys(masters)) {
		resp, err := adm.BrokerRequest(ctx, masters[name], remoting.RequestGetTopicStatsInfo, &wire.TopicRequestHeader{Topic: topic}, nil)
		if err == nil {
			var qs []QueueView
			qs, err = decodeTopicStats(resp.Body)
			out = append(out, qs...)
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	slices.SortFunc(out, func(a, b QueueView) int {
		if c := strings.Compare(a.BrokerName, b.BrokerName); c != 0 {
			return c
		}
		return int(a.QueueID - b.QueueID)
	})
	return out, firstErr
}

// decodeTopicStats reads a TopicStatsTable (MessageQueue objects as keys).
func decodeTopicStats(body []byte) ([]QueueView, error) {
	plain, err := wire.QuoteObjectKeys(body)
	if err != nil {
		return nil, err
	}
	var t struct {
		OffsetTable map[string]wire.TopicOffset `json:"offsetTable"`
	}
	if err := json.Unmarshal(plain, &t); err != nil {
		return nil, err
	}
	out := make([]QueueView, 0, len(t.OffsetTable))
	for k, o := range t.OffsetTable {
		mq, err := wire.ParseQueueKey(k)
		if err != nil {
			return nil, err
		}
		out = append(out, QueueView{BrokerName: mq.BrokerName, QueueID: mq.QueueID, MinOffset: o.MinOffset, MaxOffset: o.MaxOffset,
			LastUpdate: o.LastUpdateTimestamp})
	}
	return out, nil
}
