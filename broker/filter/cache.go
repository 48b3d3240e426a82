package filter

import (
	"container/list"
	"sync"
)

// Cache holds compiled expressions keyed by their text, at most a fixed
// number of them, evicting the least recently used.
//
// The broker compiles a subscription when a heartbeat or CHECK_CLIENT_CONFIG
// brings a new subscription version and on pulls that carry their own
// expression; many groups and versions share one text, and the text alone
// determines the compiled form, so the text is the key: a new version with
// the same expression costs nothing, a changed expression is a new entry,
// and the old one ages out. Failures are cached too, so a client retrying
// a bad expression does not make the broker parse it again. The bound keeps
// memory flat however many distinct expressions clients send.
type Cache struct {
	mu      sync.Mutex
	max     int
	entries map[string]*list.Element // guarded by mu
	lru     list.List                // of *cacheEntry, most recent first; guarded by mu
}

type cacheEntry struct {
	src  string
	expr *Expr
	err  error
}

// NewCache returns a cache of at most size expressions (at least 1).
func NewCache(size int) *Cache {
	return &Cache{max: max(size, 1), entries: make(map[string]*list.Element)}
}

// Compile returns the compiled expression for src, compiling it on a miss.
// The error is Compile's.
func (c *Cache) Compile(src string) (*Expr, error) {
	c.mu.Lock()
	if el, ok := c.entries[src]; ok {
		c.lru.MoveToFront(el)
		e := el.Value.(*cacheEntry)
		c.mu.Unlock()
		return e.expr, e.err
	}
	c.mu.Unlock()

	// Compiling outside the lock lets pulls of other subscriptions go on;
	// two callers racing on one new text both compile, and one result wins.
	expr, err := Compile(src)

	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[src]; ok {
		c.lru.MoveToFront(el)
		return expr, err
	}
	c.entries[src] = c.lru.PushFront(&cacheEntry{src: src, expr: expr, err: err})
	for c.lru.Len() > c.max {
		old := c.lru.Back()
		c.lru.Remove(old)
		delete(c.entries, old.Value.(*cacheEntry).src)
	}
	return expr, err
}

// Len returns the number of cached expressions.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}
