package raftlog

import (
	"unsafe"

	"github.com/hashicorp/raft"
)

// defaultCacheBytes bounds the recent-entries cache (Options.CacheBytes).
// Raft reads back only the last entry or two of every append, so a few
// rounds of full entries (1 MiB each at most in the broker) are plenty.
const defaultCacheBytes = 8 << 20

// recentLogs holds the entries of the latest StoreLogs calls, consecutive
// by index, so that GetLog of a just-appended index is served from memory.
// Raft reads every new entry back right after storing it: the leader's
// replication reads the new entry and the previous one (for its term) per
// follower, and each follower reads the entry again to apply it once the
// next AppendEntries carries the commit index — on a follower that read is
// on the path to its response. From the files each read costs a CRC pass
// and a copy of the entry (about 35 µs for a 64 KiB entry here).
//
// Each entry's frame position is kept too, so LocateHeader, which the FSM
// calls for every entry it applies, answers a just-appended index without
// reading the header back through the mapping: that read is the process's
// first touch of the page, a page fault per entry on every replica.
//
// Entries are kept exactly as given to StoreLogs: a command entry's Data
// is the caller's bytes before Options.PatchCommand (which writes into the
// file only). PatchCommand must therefore be a deterministic, idempotent
// function of the entry and its position (it is documented so); the
// broker's FSM takes positions from LocateHeader, never from Data.
//
// Guarded by LogStore.mu: written with it held exclusively (under wmu),
// read with it held shared.
type recentLogs struct {
	logs     []*raft.Log
	pos      []int64 // pos[i] is the frame position of logs[i]
	bytes    int
	maxBytes int
}

// entryBytes is what an entry pins in memory: its bytes, the raft.Log and
// its pointer and position in the cache.
func entryBytes(l *raft.Log) int {
	return len(l.Data) + len(l.Extensions) + int(unsafe.Sizeof(raft.Log{})) + 16
}

// add appends a stored batch (consecutive indexes) and its frames'
// positions. A batch that does not continue the cached run (after a
// truncation or reset) replaces it.
func (c *recentLogs) add(batch []*raft.Log, pos []int64) {
	if c.maxBytes <= 0 || len(batch) == 0 {
		return
	}
	if n := len(c.logs); n > 0 && c.logs[n-1].Index+1 != batch[0].Index {
		c.clear()
	}
	c.logs = append(c.logs, batch...)
	c.pos = append(c.pos, pos...)
	for _, l := range batch {
		c.bytes += entryBytes(l)
	}
	drop := 0
	for drop < len(c.logs) && c.bytes > c.maxBytes {
		c.bytes -= entryBytes(c.logs[drop])
		drop++
	}
	if drop > 0 {
		n := copy(c.logs, c.logs[drop:])
		clear(c.logs[n:])
		c.logs = c.logs[:n]
		c.pos = c.pos[:copy(c.pos, c.pos[drop:])]
	}
}

// get returns the cached entry at index, or nil.
func (c *recentLogs) get(index uint64) *raft.Log {
	if i, ok := c.slot(index); ok {
		return c.logs[i]
	}
	return nil
}

// locate returns the frame position and header of a cached index: the
// header is the one appendFrameLocked wrote for that entry.
func (c *recentLogs) locate(index uint64) (int64, FrameHeader, bool) {
	i, ok := c.slot(index)
	if !ok {
		return 0, FrameHeader{}, false
	}
	return c.pos[i], headerOf(c.logs[i]), true
}

func (c *recentLogs) slot(index uint64) (uint64, bool) {
	if len(c.logs) == 0 || index < c.logs[0].Index {
		return 0, false
	}
	i := index - c.logs[0].Index
	return i, i < uint64(len(c.logs))
}

// clear drops every entry (truncation, reset, close).
func (c *recentLogs) clear() {
	clear(c.logs)
	c.logs = c.logs[:0]
	c.pos = c.pos[:0]
	c.bytes = 0
}
