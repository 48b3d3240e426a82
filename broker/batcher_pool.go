package broker

import "sync"

// A send request's messages are encoded into a buffer of their own (on
// the sender's goroutine, in parallel) and then copied into the entry the
// batcher proposes; after that copy the buffer is garbage. Reusing it
// saves an allocation of about a message's stored size per message on
// the leader, its largest allocation site with the entry itself under
// load (BENCHMARKS.md, CPU per message).

// encodeBufMax bounds the buffers kept: a rare large request is not
// pinned in the pool.
const encodeBufMax = 256 << 10

var encodeBufPool = sync.Pool{New: func() any { return new([]byte) }}

// getEncodeBuf returns an empty buffer for a request's messages.
func getEncodeBuf() []byte { return (*encodeBufPool.Get().(*[]byte))[:0] }

// putEncodeBufs returns the batch's request buffers once their bytes have
// been copied into the entry; the requests must not read data again.
func putEncodeBufs(batch []*putRequest) {
	for _, r := range batch {
		if b := r.data; cap(b) > 0 && cap(b) <= encodeBufMax {
			r.data = nil
			encodeBufPool.Put(&b)
		}
	}
}
