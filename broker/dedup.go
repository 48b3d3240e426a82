package broker

import (
	"math"
	"sort"
)

// dedupKey identifies one idempotent stream: a producer's sends to one queue.
type dedupKey struct {
	Producer string
	Topic    string
	QueueID  int32
}

// dedupEntry is where the first copy of a sequence number was stored.
type dedupEntry struct {
	PhysicalOffset int64
	QueueOffset    int64
	StoreTimestamp int64
	Size           int32
}

// dedupWindow remembers the recent sequence numbers of one stream. Concurrent
// sends of one producer can commit out of order, so it is a window of seen
// numbers, not "last + 1".
type dedupWindow struct {
	Max  int64 // highest sequence seen
	Last int64 // log time (ms) of the last send
	Seqs map[int64]dedupEntry
}

// dedupParams are the window (sequence numbers kept per stream) and the
// producer TTL (ms of log time) the dedup table applies.
type dedupParams struct {
	Window int64
	TTLms  int64
}

// maxDedupWindow bounds raftDedupWindow (twice it must fit an int64).
const maxDedupWindow = math.MaxInt32

func (p dedupParams) valid() bool {
	return p.Window >= 1 && p.Window <= maxDedupWindow && p.TTLms >= 1
}

// dedupTable is the FSM's producer dedup table. It changes only in Apply and
// only as a function of the log (sequence numbers and entry AppendedAt), so it
// is identical on every replica: a replica that forgot a window earlier than
// another would dispatch a retry the other drops, and queue offsets would
// diverge. For the same reason the window and TTL it applies come from the
// log too (CmdDedupParams, kept in snapshots), not from each member's
// configuration; until the first such entry they are base, the same on
// every member (the defaults). Not safe for concurrent use (the FSM's lock
// guards it).
type dedupTable struct {
	base      dedupParams
	window    int64
	ttlMs     int64
	lastSweep int64 // log time (ms) of the last TTL sweep; in snapshots
	m         map[dedupKey]*dedupWindow
}

func newDedupTable(window int, ttlMs int64) *dedupTable {
	base := dedupParams{Window: int64(window), TTLms: ttlMs}
	return &dedupTable{base: base, window: base.Window, ttlMs: base.TTLms, m: map[dedupKey]*dedupWindow{}}
}

func (d *dedupTable) params() dedupParams { return dedupParams{Window: d.window, TTLms: d.ttlMs} }

// setParams applies a CmdDedupParams entry: later lookups, records and
// sweeps use the new window and TTL.
func (d *dedupTable) setParams(p dedupParams) { d.window, d.ttlMs = p.Window, p.TTLms }

// lookup reports whether seq of stream k was already stored. A number that
// fell out of the window (far below the highest seen) counts as a duplicate
// with an unknown original (ok=false): a producer never reuses numbers, so it
// can only be an old retry.
func (d *dedupTable) lookup(k dedupKey, seq int64) (e dedupEntry, dup, known bool) {
	w := d.m[k]
	if w == nil {
		return e, false, false
	}
	if e, ok := w.Seqs[seq]; ok {
		return e, true, true
	}
	if seq <= w.Max-d.window {
		return e, true, false
	}
	return e, false, false
}

// record remembers seq of stream k at log time nowMs.
func (d *dedupTable) record(k dedupKey, seq int64, e dedupEntry, nowMs int64) {
	w := d.m[k]
	if w == nil {
		w = &dedupWindow{Max: seq, Seqs: map[int64]dedupEntry{}}
		d.m[k] = w
	}
	w.Seqs[seq] = e
	w.Max = max(w.Max, seq)
	w.Last = max(w.Last, nowMs)
	if int64(len(w.Seqs)) > 2*d.window {
		for s := range w.Seqs {
			if s <= w.Max-d.window {
				delete(w.Seqs, s)
			}
		}
	}
}

// dropTopic forgets the streams of a deleted topic: its messages are
// gone, and a replica that dispatched them again after the delete (a
// re-applied log) recorded them without queue offsets.
func (d *dedupTable) dropTopic(topic string) {
	for k := range d.m {
		if k.Topic == topic {
			delete(d.m, k)
		}
	}
}

// sweep drops streams idle for longer than the TTL, at most once per tenth
// of the TTL of log time.
func (d *dedupTable) sweep(nowMs int64) {
	if nowMs-d.lastSweep < d.ttlMs/10 {
		return
	}
	d.lastSweep = nowMs
	for k, w := range d.m {
		if nowMs-w.Last > d.ttlMs {
			delete(d.m, k)
		}
	}
}

// dedupImage is the snapshot form of the table.
type dedupImage struct {
	LastSweep int64              `json:"lastSweep"`
	Streams   []dedupStreamImage `json:"streams,omitempty"`
	// Window and TTLms are the replicated parameters; absent while they
	// are the base ones (images from before CmdDedupParams).
	Window int64 `json:"window,omitempty"`
	TTLms  int64 `json:"ttlMs,omitempty"`
}

type dedupStreamImage struct {
	Producer string `json:"p"`
	Topic    string `json:"t"`
	QueueID  int32  `json:"q"`
	Max      int64  `json:"max"`
	Last     int64  `json:"last"`
	// Seqs holds [seq, physicalOffset, queueOffset, storeTimestamp, size].
	Seqs [][5]int64 `json:"seqs"`
}

func (d *dedupTable) image() dedupImage {
	img := dedupImage{LastSweep: d.lastSweep}
	if p := d.params(); p != d.base {
		img.Window, img.TTLms = p.Window, p.TTLms
	}
	for k, w := range d.m {
		s := dedupStreamImage{Producer: k.Producer, Topic: k.Topic, QueueID: k.QueueID, Max: w.Max, Last: w.Last}
		for seq, e := range w.Seqs {
			s.Seqs = append(s.Seqs, [5]int64{seq, e.PhysicalOffset, e.QueueOffset, e.StoreTimestamp, int64(e.Size)})
		}
		sort.Slice(s.Seqs, func(i, j int) bool { return s.Seqs[i][0] < s.Seqs[j][0] })
		img.Streams = append(img.Streams, s)
	}
	return img
}

func (d *dedupTable) load(img dedupImage) {
	d.setParams(d.base)
	if p := (dedupParams{Window: img.Window, TTLms: img.TTLms}); p.valid() {
		d.setParams(p)
	}
	d.lastSweep = img.LastSweep
	d.m = make(map[dedupKey]*dedupWindow, len(img.Streams))
	for _, s := range img.Streams {
		w := &dedupWindow{Max: s.Max, Last: s.Last, Seqs: make(map[int64]dedupEntry, len(s.Seqs))}
		for _, e := range s.Seqs {
			w.Seqs[e[0]] = dedupEntry{PhysicalOffset: e[1], QueueOffset: e[2], StoreTimestamp: e[3], Size: int32(e[4])}
		}
		d.m[dedupKey{s.Producer, s.Topic, s.QueueID}] = w
	}
}
