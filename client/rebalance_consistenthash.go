package client

import (
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"strconv"
)

// DefaultVirtualNodes is AllocateMessageQueueConsistentHash's default
// number of virtual nodes per consumer.
const DefaultVirtualNodes = 10

// HashFunc maps a key onto the ring. MD5Hash is RocketMQ's default.
type HashFunc func(key string) uint32

// MD5Hash is ConsistentHashRouter.MD5Hash: the first four bytes of the
// key's MD5 digest, big-endian.
func MD5Hash(key string) uint32 {
	d := md5.Sum([]byte(key))
	return binary.BigEndian.Uint32(d[:4])
}

// HashRing is a consistent-hash ring of named nodes with virtual nodes
// (RocketMQ's ConsistentHashRouter). Virtual node i of node n sits at
// hash("n-i"); a key belongs to the first virtual node at or after its
// hash, wrapping around. When two virtual nodes hash alike the one added
// later takes the point, as a Java TreeMap put would. Not safe for
// concurrent use.
type HashRing struct {
	hash   HashFunc
	points []uint32          // sorted
	owner  map[uint32]string // point → physical node
}

// NewHashRing returns an empty ring; hash nil means MD5Hash.
func NewHashRing(hash HashFunc) *HashRing {
	if hash == nil {
		hash = MD5Hash
	}
	return &HashRing{hash: hash, owner: map[uint32]string{}}
}

// Add puts vnodes more virtual nodes of node on the ring, numbered after
// the ones it already has.
func (r *HashRing) Add(node string, vnodes int) {
	existing := r.replicas(node)
	for i := 0; i < vnodes; i++ {
		p := r.hash(node + "-" + strconv.Itoa(existing+i))
		if _, taken := r.owner[p]; !taken {
			idx, _ := slices.BinarySearch(r.points, p)
			r.points = slices.Insert(r.points, idx, p)
		}
		r.owner[p] = node
	}
}

// Remove takes every virtual node of node off the ring.
func (r *HashRing) Remove(node string) {
	kept := r.points[:0]
	for _, p := range r.points {
		if r.owner[p] == node {
			delete(r.owner, p)
			continue
		}
		kept = append(kept, p)
	}
	r.points = kept
}

// replicas counts node's virtual nodes currently on the ring.
func (r *HashRing) replicas(node string) int {
	n := 0
	for _, owner := range r.owner {
		if owner == node {
			n++
		}
	}
	return n
}

// Route returns the node owning key, false on an empty ring.
func (r *HashRing) Route(key string) (string, bool) {
	if len(r.points) == 0 {
		return "", false
	}
	h := r.hash(key)
	i := sort.Search(len(r.points), func(i int) bool { return r.points[i] >= h })
	if i == len(r.points) {
		i = 0
	}
	return r.owner[r.points[i]], true
}

// consistentHash is AllocateMessageQueueConsistentHash.
type consistentHash struct {
	vnodes int
	hash   HashFunc
}

// AllocateConsistentHash returns the consistent-hash strategy
// ("CONSISTENT_HASH"): consumers are placed on a ring with vnodes virtual
// nodes each, and each queue goes to the consumer owning
// hash(MessageQueue.String()). A consumer joining or leaving moves only
// the queues next to its points. hash nil means MD5Hash. RocketMQ accepts
// 0 virtual nodes and then assigns nothing to anybody; that is refused
// here as a configuration error.
func AllocateConsistentHash(vnodes int, hash HashFunc) (AllocateStrategy, error) {
	if vnodes < 1 {
		return nil, fmt.Errorf("%w: consistent hash needs at least 1 virtual node per consumer, got %d", ErrInvalidOption, vnodes)
	}
	if hash == nil {
		hash = MD5Hash
	}
	return consistentHash{vnodes: vnodes, hash: hash}, nil
}

func (consistentHash) Name() string { return "CONSISTENT_HASH" }

func (s consistentHash) Allocate(group, currentCID string, mqAll []MessageQueue, cidAll []string) ([]MessageQueue, error) {
	ok, err := checkAllocateInput(group, currentCID, mqAll, cidAll)
	if !ok {
		return nil, err
	}
	ring := NewHashRing(s.hash)
	for _, cid := range cidAll {
		ring.Add(cid, s.vnodes)
	}
	var out []MessageQueue
	for _, mq := range mqAll {
		if owner, ok := ring.Route(mq.String()); ok && owner == currentCID {
			out = append(out, mq)
		}
	}
	return out, nil
}
