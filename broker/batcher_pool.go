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

// getEncodeBuf returns an empty buffer for a request's messages and the
// pool's handle for it, which putEncodeBufs puts back (a fresh handle per
// Put would be an allocation per request).
func getEncodeBuf() (*[]byte, []byte) {
	h := encodeBufPool.Get().(*[]byte)
	return h, (*h)[:0]
}

// putEncodeBufs returns the batch's request buffers once their bytes have
// been copied into the entry; the requests must not read data again.
func putEncodeBufs(batch []*putRequest) {
	for _, r := range batch {
		if h, b := r.buf, r.data; h != nil && cap(b) > 0 && cap(b) <= encodeBufMax {
			*h = b[:0]
			encodeBufPool.Put(h)
		}
		r.buf, r.data = nil, nil
	}
}
