package broker

import (
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// holdService is long polling (RocketMQ PullRequestHoldService): a pull
// that found nothing is parked per queue until a message is applied to
// that queue (the ReputService's new-message callback), its suspend
// timeout passes, or the periodic check finds the queue grew. Then the
// pull runs again without suspending and the answer is written on the
// request's connection.
//
// One goroutine (run) owns answering; notify only queues the event so the
// dispatching goroutine never blocks.
type holdService struct {
	c *Controller

	mu   sync.Mutex
	held map[queueRef][]*pullRequest // guarded by mu
	// count bounds what is held (maxHeldPulls and per connection,
	// limits_hold.go).
	count heldCount // guarded by mu

	events chan queueEvent
	// overflow is set when events was full: the next loop round checks
	// every queue instead.
	overflow chan struct{}
}

type queueRef struct {
	topic   string
	queueID int32
}

type queueEvent struct {
	q         queueRef
	maxOffset int64
}

func newHoldService(c *Controller) *holdService {
	return &holdService{c: c, held: map[queueRef][]*pullRequest{},
		events: make(chan queueEvent, 4096), overflow: make(chan struct{}, 1)}
}

// hold parks p until deadline; false when the controller is closing or
// a limit refused it (then limit names the key).
func (s *holdService) hold(p *pullRequest, deadline time.Time) (held bool, limit string) {
	select {
	case <-s.c.quit:
		return false, ""
	default:
	}
	p.deadline = deadline
	q := queueRef{p.h.Topic, p.h.QueueID}
	s.mu.Lock()
	if limit := s.count.admit(p.conn.ID(), s.c.live().LimitsConfig); limit != "" {
		s.mu.Unlock()
		return false, limit
	}
	p.trimForHold()
	s.held[q] = append(s.held[q], p)
	s.mu.Unlock()
	// A message may have been applied between the read and the park: look
	// once more so it is not missed until the periodic check.
	if end := s.c.st.GetMaxOffsetInQueue(q.topic, q.queueID); end > p.wakeAbove {
		s.notify(q.topic, q.queueID, end)
	}
	return true, ""
}

// trimForHold drops what a held pull need not keep. Held pulls are
// counted against maxHeldPulls, not in bytes, for as long as the suspend
// timeout their client chose, so one must not keep its request frame (up
// to 16 MiB of extFields the broker never reads): its answer needs only
// the request's identity (WriteResponse), and the wake-up chooses the
// filter again from the header (answer). The strings kept are copied: a
// ROCKETMQ-serialized header's values are substrings of one string
// holding the whole extFields block.
func (p *pullRequest) trimForHold() {
	r := p.req
	p.req = &remoting.RemotingCommand{Code: r.Code, Language: r.Language, Version: r.Version, Opaque: r.Opaque,
		Flag: r.Flag, SerializeType: r.SerializeType}
	p.filter = nil
	h := &p.h
	h.ConsumerGroup, h.Topic, h.BrokerName = strings.Clone(h.ConsumerGroup), strings.Clone(h.Topic), ""
	if h.SysFlag&wire.PullFlagSubscription != 0 {
		// Bounded by maxPullSubscriptionLength (processPull).
		h.Subscription = strings.Clone(h.Subscription)
	} else {
		h.Subscription = ""
	}
	// Only SQL92 or not matters past the first answer: a type pullFilter
	// does not support was refused then.
	if isSQL92(h.ExpressionType) {
		h.ExpressionType = wire.ExpressionTypeSQL92
	} else {
		h.ExpressionType = ""
	}
}

// notify is the store's NewMessageListener; it must not block.
func (s *holdService) notify(topic string, queueID int32, maxOffset int64) {
	select {
	case s.events <- queueEvent{queueRef{topic, queueID}, maxOffset}:
	default:
		select {
		case s.overflow <- struct{}{}:
		default:
		}
	}
}

// wakeAll makes the next round answer every held pull whose queue moved
// (role change, shutdown).
func (s *holdService) wakeAll() {
	select {
	case s.overflow <- struct{}{}:
	default:
	}
}

func (s *holdService) run() {
	interval := s.c.cfg.PullHoldCheckInterval
	if !s.c.live().LongPollingEnable {
		interval = min(interval, s.c.live().ShortPollingTimeMills)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.c.quit:
			s.answerAll()
			return
		case ev := <-s.events:
			s.check(ev.q, ev.maxOffset, time.Now())
		case <-s.overflow:
			s.checkAll(time.Now())
		case now := <-t.C:
			s.checkAll(now)
		}
	}
}

// checkAll re-checks every held queue against its current max offset.
func (s *holdService) checkAll(now time.Time) {
	s.mu.Lock()
	qs := make([]queueRef, 0, len(s.held))
	for q := range s.held {
		qs = append(qs, q)
	}
	s.mu.Unlock()
	for _, q := range qs {
		s.check(q, s.c.st.GetMaxOffsetInQueue(q.topic, q.queueID), now)
	}
}

// check answers the pulls of q that can make progress or timed out. A
// pull a follower held below its queue's end is answered once this node
// leads: the leader serves it or moves it.
func (s *holdService) check(q queueRef, maxOffset int64, now time.Time) {
	leader := s.c.rep.IsLeader()
	s.mu.Lock()
	list := s.held[q]
	var keep, ready []*pullRequest
	for _, p := range list {
		if maxOffset > p.wakeAbove || leader && p.wakeAbove > p.h.QueueOffset || !now.Before(p.deadline) || p.conn.Closed() {
			ready = append(ready, p)
			s.count.release(p.conn.ID())
		} else {
			keep = append(keep, p)
		}
	}
	if len(keep) == 0 {
		delete(s.held, q)
	} else {
		s.held[q] = keep
	}
	s.mu.Unlock()
	for _, p := range ready {
		s.answer(p)
	}
}

func (s *holdService) answer(p *pullRequest) {
	if p.conn.Closed() {
		return
	}
	// The group's subscription may have changed while the pull was held:
	// choose its filter again, as RocketMQ looks the subscription up again
	// on wake-up, so a new expression never skips what it selects.
	f, refused := s.c.pullFilter(&p.h)
	resp := refused
	if refused == nil {
		p.filter = f
		resp = s.c.pull(p, false)
	}
	if err := p.conn.WriteResponse(p.req, resp); err != nil {
		s.c.log.Debug("held pull answer not written", zap.String("remote", p.conn.RemoteAddr()), zap.Error(err))
	}
}

// answerAll answers everything still held (shutdown): clients get
// PULL_NOT_FOUND now instead of a timeout.
func (s *holdService) answerAll() {
	s.mu.Lock()
	all := s.held
	s.held = map[queueRef][]*pullRequest{}
	s.count = heldCount{}
	s.mu.Unlock()
	for _, list := range all {
		for _, p := range list {
			s.answer(p)
		}
	}
}

// heldCount reports how many pulls are parked (tests, runtime info).
func (s *holdService) heldCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count.total
}
