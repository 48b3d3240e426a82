package jepsen

import (
	"fmt"
	"hash/crc32"
	"maps"
	"strings"
	"sync"
	"time"
)

// Op results. An error from the SDK is always "unknown": a send that
// timed out or lost its leader may still be committed (ErrLeadershipLost),
// and a definitive refusal of the last attempt says nothing about earlier
// attempts. Only "ok" obliges the cluster to keep the message.
const (
	ResultOK      = "ok"
	ResultUnknown = "unknown"
)

// Op is one send: invoked at InvokeMs, completed at CompleteMs (both
// milliseconds since the run started).
type Op struct {
	Process    string  `json:"process"`
	Value      string  `json:"value"`
	Idempotent bool    `json:"idempotent"`
	InvokeMs   float64 `json:"invokeMs"`
	CompleteMs float64 `json:"completeMs"`
	Result     string  `json:"result"`
	Broker     string  `json:"broker,omitempty"` // group that acknowledged (ok only)
	Queue      int     `json:"queue"`
	Offset     int64   `json:"offset"`
	Err        string  `json:"err,omitempty"`
	// Txn is the decision of a transactional send (TxnCommit,
	// TxnRollback; workload_txn.go), "" for a plain one.
	Txn string `json:"txn,omitempty"`
	// CommitLogOffset is where the acknowledging leader stored the entry
	// (from the send result's offset msgId; ok only, 0 when unknown).
	CommitLogOffset int64 `json:"commitLogOffset,omitempty"`
}

// Delivery is one message handed to a consumer's listener.
type Delivery struct {
	Consumer  string  `json:"consumer"`
	Value     string  `json:"value"`
	Broker    string  `json:"broker,omitempty"`
	Queue     int     `json:"queue"`
	Offset    int64   `json:"offset"`
	AtMs      float64 `json:"atMs"`
	Intact    bool    `json:"intact"`
	Reconsume int32   `json:"reconsume,omitempty"`
	// Topic is the topic of the queue Queue and Offset are positions of,
	// when it is not the one the consumer subscribed (a %RETRY% queue's
	// redeliveries); "" for the subscribed topic.
	Topic string `json:"topic,omitempty"`
	// CommitLogOffset is the entry's CommitLog offset as the serving member
	// returned it, and ServedBy that member (its node id, or its address
	// when it is none of the cluster's): a replica serving a diverged
	// queue is named by the deliveries it served.
	CommitLogOffset int64  `json:"commitLogOffset,omitempty"`
	ServedBy        string `json:"servedBy,omitempty"`
	// AtWallMs is AtMs on the wall clock (Unix milliseconds), kept for
	// timer deliveries: their due time is a wall-clock time.
	AtWallMs int64 `json:"atWallMs,omitempty"`
}

// Read is one message found by the final read of a queue on one node.
type Read struct {
	Node   string `json:"node"`
	Broker string `json:"broker,omitempty"`
	Queue  int    `json:"queue"`
	Offset int64  `json:"offset"`
	Value  string `json:"value"`
	Intact bool   `json:"intact"`
	// Topic is the queue's topic where the list holding the read has more
	// than one (ChaosHistory.RetryReads); "" for the list's own topic.
	Topic string `json:"topic,omitempty"`
	// CommitLogOffset is the entry's CommitLog offset on Node.
	CommitLogOffset int64 `json:"commitLogOffset,omitempty"`
}

// ReadRange is the span of one queue the final read covered on one node:
// [From, To). From is the node's own minimum offset (retention may have
// removed older entries on that node only, e.g. under disk-full), so the
// checker holds a replica only to the acknowledged offsets it still keeps.
type ReadRange struct {
	Node   string `json:"node"`
	Broker string `json:"broker,omitempty"`
	Queue  int    `json:"queue"`
	From   int64  `json:"from"`
	To     int64  `json:"to"`
}

// FaultWindow is one nemesis action, from injection to heal.
type FaultWindow struct {
	Nemesis  string  `json:"nemesis"`
	Group    string  `json:"group,omitempty"` // group hit (two-group runs)
	Detail   string  `json:"detail"`
	StartMs  float64 `json:"startMs"`
	EndMs    float64 `json:"endMs"`
	HealNote string  `json:"healNote,omitempty"`
}

// LeaderObs is a node's Raft state as polled, recorded when it changes.
type LeaderObs struct {
	AtMs    float64 `json:"atMs"`
	Node    string  `json:"node"`
	Group   string  `json:"group,omitempty"`
	Term    uint64  `json:"term"`
	State   string  `json:"state"`
	Serving bool    `json:"serving"`
}

// History is everything a run observed; it is written as history.json.
type History struct {
	Profile    string        `json:"profile"`
	Seed       int64         `json:"seed"`
	Mode       string        `json:"mode"`
	Start      time.Time     `json:"start"`
	Ops        []Op          `json:"ops"`
	Deliveries []Delivery    `json:"deliveries"`
	Reads      []Read        `json:"reads"`
	ReadRanges []ReadRange   `json:"readRanges,omitempty"`
	Faults     []FaultWindow `json:"faults"`
	Leaders    []LeaderObs   `json:"leaders"`
	Notes      []string      `json:"notes,omitempty"`
	// TimerOps and TimerDeliveries are the timer messages' sends and
	// deliveries (workload_timer.go).
	TimerOps        []TimerOp  `json:"timerOps,omitempty"`
	TimerDeliveries []Delivery `json:"timerDeliveries,omitempty"`
	// TimerRead is TimerTopic's final read (nil: not done).
	TimerRead *TimerFinalRead `json:"timerRead,omitempty"`
	// DiskPeaks is, per node, the highest use (percent, df's Use%, as the
	// brokers count it) of its data file system the monitor saw.
	DiskPeaks map[string]float64 `json:"diskPeaks,omitempty"`
	// CatchupPending names the nodes whose full-data catch-up was still
	// pending when the final read began (their queues start at their
	// snapshot until it ends).
	CatchupPending []string `json:"catchupPending,omitempty"`
	// Chaos holds the ordered, offsets and retry workloads' records.
	Chaos ChaosHistory `json:"chaos"`
	// Audit is the cross-replica ConsumeQueue audit's record (audit.go);
	// nil when the profile runs none.
	Audit *AuditHistory `json:"audit,omitempty"`
}

// recorder appends to a History from many goroutines.
type recorder struct {
	mu sync.Mutex
	h  History // guarded by mu
}

func (r *recorder) since(t time.Time) float64 {
	return float64(t.Sub(r.h.Start)) / float64(time.Millisecond)
}

func (r *recorder) op(o Op) {
	r.mu.Lock()
	r.h.Ops = append(r.h.Ops, o)
	r.mu.Unlock()
}

func (r *recorder) delivery(d Delivery) {
	r.mu.Lock()
	r.h.Deliveries = append(r.h.Deliveries, d)
	r.mu.Unlock()
}

func (r *recorder) fault(f FaultWindow) {
	r.mu.Lock()
	r.h.Faults = append(r.h.Faults, f)
	r.mu.Unlock()
}

func (r *recorder) leader(o LeaderObs) {
	r.mu.Lock()
	r.h.Leaders = append(r.h.Leaders, o)
	r.mu.Unlock()
}

// diskUse raises node's DiskPeaks entry to pct.
func (r *recorder) diskUse(node string, pct float64) {
	r.mu.Lock()
	if r.h.DiskPeaks == nil {
		r.h.DiskPeaks = map[string]float64{}
	}
	r.h.DiskPeaks[node] = max(r.h.DiskPeaks[node], pct)
	r.mu.Unlock()
}

func (r *recorder) note(format string, args ...any) {
	r.mu.Lock()
	r.h.Notes = append(r.h.Notes, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

// snapshot copies the history for the checker.
func (r *recorder) snapshot() History {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.h
	h.Ops = append([]Op(nil), r.h.Ops...)
	h.Deliveries = append([]Delivery(nil), r.h.Deliveries...)
	h.Reads = append([]Read(nil), r.h.Reads...)
	h.ReadRanges = append([]ReadRange(nil), r.h.ReadRanges...)
	h.Faults = append([]FaultWindow(nil), r.h.Faults...)
	h.Leaders = append([]LeaderObs(nil), r.h.Leaders...)
	h.Notes = append([]string(nil), r.h.Notes...)
	h.TimerOps = append([]TimerOp(nil), r.h.TimerOps...)
	h.TimerDeliveries = append([]Delivery(nil), r.h.TimerDeliveries...)
	if t := r.h.TimerRead; t != nil {
		h.TimerRead = &TimerFinalRead{Reads: append([]Read(nil), t.Reads...), Ranges: append([]ReadRange(nil), t.Ranges...),
			Unread: append([]string(nil), t.Unread...), AtMs: t.AtMs}
	}
	h.DiskPeaks = maps.Clone(r.h.DiskPeaks)
	h.CatchupPending = append([]string(nil), r.h.CatchupPending...)
	h.Chaos = r.h.Chaos.clone()
	h.Audit = r.h.Audit.clone()
	return h
}

// bodyFiller pads bodies to a realistic size; the checksum covers it, so
// a torn or shifted body fails the check.
var bodyFiller = strings.Repeat("raftmq-jepsen.", 8)

// encodeBody is "value|filler|crc32(value|filler) in hex".
func encodeBody(value string) []byte {
	s := value + "|" + bodyFiller
	return []byte(fmt.Sprintf("%s|%08x", s, crc32.ChecksumIEEE([]byte(s))))
}

// decodeBody returns the value a body carries and whether its checksum
// holds.
func decodeBody(b []byte) (value string, intact bool) {
	s := string(b)
	i := strings.LastIndexByte(s, '|')
	if i < 0 {
		return s, false
	}
	payload := s[:i]
	value, _, _ = strings.Cut(payload, "|")
	return value, fmt.Sprintf("%08x", crc32.ChecksumIEEE([]byte(payload))) == s[i+1:]
}
