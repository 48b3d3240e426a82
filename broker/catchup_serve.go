package broker

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// The serving side of catch-up (catchup.go): CATCHUP_READ answers a
// member's reads of this member's retained log and queue units, and
// groupSource reads a Group directly (tests on in-memory parts).

var castagnoliTable = crc32.MakeTable(crc32.Castagnoli)

// catchupReader is what CATCHUP_READ reads from (a Group).
type catchupReader interface {
	catchupLogStart() (uint64, int64, error)
	catchupReadLog(pos int64, n int) ([]byte, error)
	catchupReadUnits(topic string, queueID int32, from int64, n int) (int64, []store.CQUnit, error)
	catchupPace() int64
}

func (g *Group) catchupLogStart() (uint64, int64, error) {
	g.catchup.pace.served(time.Now())
	return g.logs.FirstPosition()
}

// catchupReadLog serves the log from pos, up to the end of the last entry
// this member applied (so committed): past it the log may hold entries
// Raft truncates, and a reader never needs them (it fetches what lies
// before its snapshot). pos comes from the request, so it is read only
// where an entry starts: a position inside an entry (inside a message a
// client wrote to look like a broken frame) is bad input, while damage
// found at a real entry stops this member. The end comes from the last
// entry's header alone, so that damage in its data is found by the read
// (and stops the member) rather than refusing every read.
func (g *Group) catchupReadLog(pos int64, n int) ([]byte, error) {
	g.catchup.pace.served(time.Now())
	last, h, err := g.logs.LocateHeader(g.raft.AppliedIndex())
	if err != nil {
		return nil, fmt.Errorf("%w: the end of the committed log is not known yet (%v); retry", raftlog.ErrLogMismatch, err)
	}
	end := last + int64(h.Size)
	if pos < 0 || pos >= end {
		return nil, fmt.Errorf("%w: position %d is not below the end of the committed log %d", raftlog.ErrLogMismatch, pos, end)
	}
	if !g.entryStartsAt(pos) {
		return nil, fmt.Errorf("%w: position %d is not an entry boundary", raftlog.ErrLogMismatch, pos)
	}
	b, err := g.logs.ReadRange(pos, int(min(int64(max(n, 0)), catchupChunk, end-pos)))
	if errors.Is(err, raftlog.ErrDamagedLog) {
		g.noteDamage(err, "catch-up read") // scrub.go: never served
	}
	return b, err
}

// entryStartsAt reports whether an entry of the log starts at pos: the
// frame of a present index (its position from the index sidecar, not from
// the bytes at pos), or the blank filler right after the last frame of a
// segment.
func (g *Group) entryStartsAt(pos int64) bool {
	next, err := g.logs.FirstIndexFrom(pos)
	if err != nil {
		return false
	}
	if next != 0 {
		// A position comes back with a header that fails its checks too:
		// that is damage at a real frame, for ReadRange to report.
		if p, _, err := g.logs.LocateHeader(next); p == pos && (err == nil || p != 0) {
			return true
		}
	}
	prev := next - 1
	if next == 0 {
		if prev, err = g.logs.LastIndex(); err != nil {
			return false
		}
	}
	if prev == 0 {
		return false
	}
	p, h, err := g.logs.LocateHeader(prev)
	return err == nil && p+int64(h.Size) == pos
}

func (g *Group) catchupReadUnits(topic string, queueID int32, from int64, n int) (int64, []store.CQUnit, error) {
	g.catchup.pace.served(time.Now())
	cq := g.ms.ConsumeQueues().Get(topic, queueID)
	if cq == nil {
		return 0, nil, fmt.Errorf("no queue %s/%d", topic, queueID)
	}
	return cq.UnitsFrom(from, min(max(n, 0), catchupUnits))
}

// registerCatchup registers CATCHUP_READ (admin-only under ACL: members
// sign with the cluster account).
func (c *Controller) registerCatchup(s *remoting.Server) {
	r, ok := c.rep.(catchupReader)
	if !ok {
		return
	}
	s.Register(remoting.RequestCatchupRead, func(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		return serveCatchupRead(r, req), nil
	}, 2, 16)
}

// startCatchup starts this member's catch-up loop, reading from the
// leader over the members' remoting client.
func (c *Controller) startCatchup() {
	if g, ok := c.rep.(*Group); ok {
		g.startCatchup(func(addr string) catchupSource { return remotingSource{c: c.nsClient, addr: addr} })
	}
}

func serveCatchupRead(r catchupReader, req *remoting.RemotingCommand) *remoting.RemotingCommand {
	var h wire.CatchupReadRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err)
	}
	var rh wire.CatchupReadResponseHeader
	var body []byte
	var err error
	switch h.Op {
	case "start":
		rh.Index, rh.Pos, err = r.catchupLogStart()
	case "log":
		body, err = r.catchupReadLog(h.Pos, int(h.N))
	case "units":
		var units []store.CQUnit
		rh.Min, units, err = r.catchupReadUnits(h.Topic, h.QueueID, h.From, int(h.N))
		body = store.AppendCQUnits(nil, units)
	case "pace":
		rh.Pace = r.catchupPace()
	default:
		return response(remoting.ResponseSystemError, "CATCHUP_READ: unknown op %q (start, log, units, pace)", h.Op)
	}
	if err != nil {
		return response(remoting.ResponseSystemError, "CATCHUP_READ %s: %v", h.Op, err)
	}
	rh.CRC = crc32.Checksum(body, castagnoliTable)
	resp := success()
	resp.EncodeHeader(&rh)
	resp.Body = body
	return resp
}

// remotingSource reads a peer over CATCHUP_READ.
type remotingSource struct {
	c    *remoting.Client
	addr string
}

func (s remotingSource) call(ctx context.Context, h *wire.CatchupReadRequestHeader) (*wire.CatchupReadResponseHeader, []byte, error) {
	resp, err := s.c.InvokeSync(ctx, s.addr, remoting.NewRequest(remoting.RequestCatchupRead, h, nil))
	if err != nil {
		return nil, nil, err
	}
	if err := remoting.ResponseError(s.addr, resp); err != nil {
		return nil, nil, err
	}
	var rh wire.CatchupReadResponseHeader
	if err := resp.DecodeHeader(&rh); err != nil {
		return nil, nil, err
	}
	if got := crc32.Checksum(resp.Body, castagnoliTable); got != rh.CRC {
		return nil, nil, fmt.Errorf("CATCHUP_READ %s from %s: body crc %#08x, header says %#08x", h.Op, s.addr, got, rh.CRC)
	}
	return &rh, resp.Body, nil
}

func (s remotingSource) logStart(ctx context.Context) (uint64, int64, error) {
	rh, _, err := s.call(ctx, &wire.CatchupReadRequestHeader{Op: "start"})
	if err != nil {
		return 0, 0, err
	}
	return rh.Index, rh.Pos, nil
}

func (s remotingSource) pace(ctx context.Context) (int64, error) {
	rh, _, err := s.call(ctx, &wire.CatchupReadRequestHeader{Op: "pace"})
	if err != nil {
		return 0, err
	}
	return rh.Pace, nil
}

func (s remotingSource) readLog(ctx context.Context, pos int64, n int) ([]byte, error) {
	_, b, err := s.call(ctx, &wire.CatchupReadRequestHeader{Op: "log", Pos: pos, N: int32(n)})
	return b, err
}

func (s remotingSource) readUnits(ctx context.Context, topic string, queueID int32, from int64, n int) (int64, []store.CQUnit, error) {
	rh, b, err := s.call(ctx, &wire.CatchupReadRequestHeader{Op: "units", Topic: topic, QueueID: queueID, From: from, N: int32(n)})
	if err != nil {
		return 0, nil, err
	}
	units, err := store.DecodeCQUnits(b)
	return rh.Min, units, err
}

// groupSource reads another Group in the same process (tests).
type groupSource struct{ r catchupReader }

func (s groupSource) logStart(context.Context) (uint64, int64, error) { return s.r.catchupLogStart() }

func (s groupSource) pace(context.Context) (int64, error) { return s.r.catchupPace(), nil }

func (s groupSource) readLog(_ context.Context, pos int64, n int) ([]byte, error) {
	return s.r.catchupReadLog(pos, n)
}

func (s groupSource) readUnits(_ context.Context, topic string, queueID int32, from int64, n int) (int64, []store.CQUnit, error) {
	return s.r.catchupReadUnits(topic, queueID, from, n)
}
