package client

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync"
	"time"

	"github.com/raftmq/raftmq/wire"
)

// The idempotent producer (option Idempotent) marks every message with two
// properties, the contract with the broker's FSM, which deduplicates on
// them:
//
//   - wire.PropertyProducerID identifies one producer instance: 32 random hex
//     characters unless IdempotentProducerID fixed it. A restarted
//     producer is a new producer. Brokers store (and deduplicate by) its
//     SHA-256, so the id read back from a stored message cannot be used
//     to send into this producer's streams.
//   - wire.PropertySequence is a decimal uint64, unique per (producer id,
//     topic, brokerName, queueId), assigned in send order starting at the
//     producer's creation time in nanoseconds: a producer restarted with
//     the same IdempotentProducerID then numbers past its predecessor
//     (brokers remember a stream's numbers for an hour and would drop a
//     new message with an old number as a duplicate). Every retry of a
//     message carries the same producer id and sequence and goes to the
//     same queue.
//
// Concurrent sends to one queue may reach the broker out of sequence order
// (by at most the number of sends in flight) and a send that failed
// definitively leaves a gap, so the broker must remember which sequences
// it stored (e.g. the highest and a window below it) rather than expect
// them to be contiguous. A message whose (producer id, queue, sequence) is
// already stored is answered with the original result and not stored
// again.

// sequencer hands out per-queue sequence numbers.
type sequencer struct {
	producerID string
	first      uint64 // every queue's first number

	mu   sync.Mutex
	next map[MessageQueue]uint64 // guarded by mu
}

func newSequencer(id string) *sequencer {
	if id == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	return &sequencer{producerID: id, first: uint64(time.Now().UnixNano()), next: map[MessageQueue]uint64{}}
}

// assign returns the property name/value pairs stamping one message
// bound for mq.
func (s *sequencer) assign(mq MessageQueue) []string {
	s.mu.Lock()
	seq, ok := s.next[mq]
	if !ok {
		seq = s.first
	}
	s.next[mq] = seq + 1
	s.mu.Unlock()
	return []string{wire.PropertyProducerID, s.producerID, wire.PropertySequence, strconv.FormatUint(seq, 10)}
}
