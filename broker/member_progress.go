package broker

import (
	"io"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// peerProgress is what the leader last learned from one peer's answers:
// the highest log index the peer acknowledged holding (its match index)
// and when it last acknowledged anything, heartbeats included.
type peerProgress struct {
	match uint64
	at    time.Time
}

// progressTracker records, on the leader, each peer's progress as the
// peer's answers to AppendEntries and InstallSnapshot pass through the
// transport. hashicorp/raft keeps its own match indexes private; learner
// promotion (AddMember) and the quorum guard of RemoveMember need them.
type progressTracker struct {
	mu    sync.Mutex
	peers map[raft.ServerID]peerProgress // guarded by mu
}

func newProgressTracker() *progressTracker {
	return &progressTracker{peers: map[raft.ServerID]peerProgress{}}
}

// note records an acknowledgement from id holding the log up to match (0
// for a heartbeat, which says nothing about the log).
func (p *progressTracker) note(id raft.ServerID, match uint64) {
	now := time.Now()
	p.mu.Lock()
	pp := p.peers[id]
	pp.match, pp.at = max(pp.match, match), now
	p.peers[id] = pp
	p.mu.Unlock()
}

// lower records that id holds no more of the log than last: it refused an
// append, answering with its last index. A follower wiped and restarted
// under its id (or one whose unsynced tail a crash took) holds less than
// it once acknowledged, and a match kept from before would promote it, or
// count it for a removal, on data it no longer has.
func (p *progressTracker) lower(id raft.ServerID, last uint64) {
	p.mu.Lock()
	if pp, ok := p.peers[id]; ok && pp.match > last {
		pp.match = last
		p.peers[id] = pp
	}
	p.mu.Unlock()
}

// get returns id's progress (zero when nothing was heard).
func (p *progressTracker) get(id raft.ServerID) peerProgress {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peers[id]
}

// reset forgets id: a member added again (a wiped host under its old id)
// starts from an empty log.
func (p *progressTracker) reset(id raft.ServerID) {
	p.mu.Lock()
	delete(p.peers, id)
	p.mu.Unlock()
}

// progressTransport is the transport Raft is given: the member's own
// transport, with every successful AppendEntries and InstallSnapshot
// answer noted in a progressTracker. Everything else goes straight
// through. The Group keeps the inner transport for closing and for the
// TLS membership binding.
type progressTransport struct {
	raft.Transport
	p *progressTracker
}

// progressPreVoteTransport is a progressTransport over a transport that
// supports pre-vote: Raft turns pre-vote on by type assertion, so the
// wrapper has the method only when the inner transport does.
type progressPreVoteTransport struct {
	progressTransport
	pv raft.WithPreVote
}

// RequestPreVote implements raft.WithPreVote.
func (t *progressPreVoteTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest,
	resp *raft.RequestPreVoteResponse) error {
	return t.pv.RequestPreVote(id, target, args, resp)
}

// trackProgress wraps trans so that p sees the peers' acknowledgements.
func trackProgress(trans raft.Transport, p *progressTracker) raft.Transport {
	t := progressTransport{Transport: trans, p: p}
	if pv, ok := trans.(raft.WithPreVote); ok {
		return &progressPreVoteTransport{progressTransport: t, pv: pv}
	}
	return &t
}

// answered notes one AppendEntries answer: a success proves the entries
// sent, a refusal caps the match at the peer's last index.
func (p *progressTracker) answered(id raft.ServerID, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) {
	if resp.Success {
		p.note(id, matchOf(args))
	} else {
		p.lower(id, resp.LastLog)
	}
}

// matchOf is the index a successful AppendEntries proves the peer holds.
func matchOf(args *raft.AppendEntriesRequest) uint64 {
	if n := len(args.Entries); n > 0 {
		return args.Entries[n-1].Index
	}
	return args.PrevLogEntry
}

// AppendEntries implements raft.Transport.
func (t *progressTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest,
	resp *raft.AppendEntriesResponse) error {
	err := t.Transport.AppendEntries(id, target, args, resp)
	if err == nil {
		t.p.answered(id, args, resp)
	}
	return err
}

// InstallSnapshot implements raft.Transport.
func (t *progressTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest,
	resp *raft.InstallSnapshotResponse, data io.Reader) error {
	err := t.Transport.InstallSnapshot(id, target, args, resp, data)
	if err == nil && resp.Success {
		t.p.note(id, args.LastLogIndex)
	}
	return err
}

// AppendEntriesPipeline implements raft.Transport: the pipeline's
// finished appends are noted on their way to Raft.
func (t *progressTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	inner, err := t.Transport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	pl := &progressPipeline{AppendPipeline: inner, id: id, p: t.p, out: make(chan raft.AppendFuture, 128), stop: make(chan struct{})}
	go pl.forward()
	return pl, nil
}

// Close implements raft.WithClose (Raft closes its transport on
// shutdown).
func (t *progressTransport) Close() error {
	if c, ok := t.Transport.(raft.WithClose); ok {
		return c.Close()
	}
	return nil
}

// progressPipeline hands the inner pipeline's finished appends to Raft
// through its own channel, noting the successful ones.
type progressPipeline struct {
	raft.AppendPipeline
	id   raft.ServerID
	p    *progressTracker
	out  chan raft.AppendFuture
	stop chan struct{}
	once sync.Once
}

// Consumer implements raft.AppendPipeline.
func (pl *progressPipeline) Consumer() <-chan raft.AppendFuture { return pl.out }

// Close implements raft.AppendPipeline.
func (pl *progressPipeline) Close() error {
	pl.once.Do(func() { close(pl.stop) })
	return pl.AppendPipeline.Close()
}

func (pl *progressPipeline) forward() {
	in := pl.AppendPipeline.Consumer()
	for {
		select {
		case f, ok := <-in:
			if !ok {
				close(pl.out)
				return
			}
			// A future on the consumer channel is finished: Error does
			// not wait.
			if f.Error() == nil {
				pl.p.answered(pl.id, f.Request(), f.Response())
			}
			select {
			case pl.out <- f:
			case <-pl.stop:
				return
			}
		case <-pl.stop:
			return
		}
	}
}
