package wire

// CatchupReadRequestHeader is raftmq's CATCHUP_READ header: a member
// catching up reads its leader's retained log or queue units.
type CatchupReadRequestHeader struct {
	// Op is "start" (first retained index and position), "log" (N bytes of
	// the log at Pos) or "units" (N units of Topic/QueueID from From).
	Op      string `ext:"op"`
	Pos     int64  `ext:"pos,omitempty"`
	N       int32  `ext:"n,omitempty"`
	Topic   string `ext:"topic,omitempty"`
	QueueID int32  `ext:"queueId,omitempty"`
	From    int64  `ext:"from,omitempty"`
}

// CatchupReadResponseHeader answers CATCHUP_READ. CRC is the CRC32-C of
// the body (log bytes, or 20-byte units), checked by the reader; Index and
// Pos answer "start"; Min is, for "units", the queue offset of the first
// unit: max(From, the queue's minimum), or past a queue file missing there.
type CatchupReadResponseHeader struct {
	CRC   uint32 `ext:"crc"`
	Index uint64 `ext:"index,omitempty"`
	Pos   int64  `ext:"pos,omitempty"`
	Min   int64  `ext:"min,omitempty"`
	// Pace answers "pace": the bytes per second the leader wants
	// catch-ups fetched at (0: no opinion).
	Pace int64 `ext:"pace,omitempty"`
}
