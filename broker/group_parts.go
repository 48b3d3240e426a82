package broker

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/storage"
)

// Parts are what a Group is built from besides its config, in the manner of
// raft.NewRaft(conf, fsm, logs, stable, snaps, trans). The message store and
// the Raft log are not separate parts: the log's entries are the CommitLog's
// bytes (raftlog.OpenOnQueue on the store's segment queue), so both are
// opened by NewGroup over one FS.
//
// NewGroup owns the parts it is given: Close (and a NewGroup that fails)
// closes the transport, and the stable store if it has a Close method (the
// BoltDB one does). The in-memory FS, stable store and snapshot store need
// no closing and keep their contents, so a test restarts a member on them
// with a new transport (InmemNetwork.Reopen).
type Parts struct {
	// FS holds the message store and the Raft log. nil: cfg.Store.FS, or
	// the OS file system when that is nil too.
	FS storage.FS
	// Stable holds Raft's current term and vote.
	Stable raft.StableStore
	// Snapshots holds Raft snapshots. NewGroup wraps it in
	// raftlog.IndexedSnapshotStore (an IndexedSnapshotStore given here is
	// unwrapped first).
	Snapshots raft.SnapshotStore
	// Transport carries Raft's RPCs; its LocalAddr must be this member's
	// dLegerPeers address.
	Transport raft.Transport
}

// OpenDiskParts opens a member's production parts: the OS file system (or
// cfg.Store.FS), the BoltDB stable store and the file snapshot store under
// storePathRootDir/raft, and a TCP transport listening on the member's
// dLegerPeers address (mutual TLS with the raftTls* keys, peers named by
// their certificates). On error nothing stays open.
func OpenDiskParts(cfg GroupConfig, log *zap.Logger) (Parts, error) {
	return openDiskParts(cfg, log, nil)
}

// openDiskParts is OpenDiskParts with a wrapper around the TCP stream layer
// (partition tests cut a member off the network through it).
func openDiskParts(cfg GroupConfig, log *zap.Logger, wrap func(raft.StreamLayer) raft.StreamLayer) (p Parts, err error) {
	if log == nil {
		log = zap.NewNop()
	}
	addr, err := cfg.Raft.SelfAddr()
	if err != nil {
		return Parts{}, err
	}
	p.FS = cfg.Store.FS
	if p.FS == nil {
		p.FS = storage.OSFS()
	}
	raftDir := filepath.Join(cfg.Store.StorePathRootDir, "raft")
	if err := storage.MkdirAllDurable(storage.OSFS(), raftDir); err != nil {
		return Parts{}, err
	}
	stable, err := raftlog.OpenStableStore(filepath.Join(raftDir, "stable.db"))
	if err != nil {
		return Parts{}, err
	}
	defer func() {
		if err != nil {
			_ = stable.Close()
		}
	}()
	// BoltDB syncs the file it creates, not its name: the term and vote
	// it holds must not vanish with a power cut right after the first start.
	if err = storage.OSFS().SyncDir(raftDir); err != nil {
		return Parts{}, err
	}
	snaps, err := raftlog.OpenSnapshotStore(filepath.Join(raftDir, "snapshots"), cfg.Raft.SnapshotRetain, log)
	if err != nil {
		return Parts{}, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return Parts{}, fmt.Errorf("broker: raft transport listen on %s (dLegerPeers entry of %s): %w", addr, cfg.Raft.DLegerSelfID, err)
	}
	stream, tlsStream, err := newRaftStream(ln, cfg.RaftTLS, cfg.Raft.DLegerGroup)
	if err != nil {
		_ = ln.Close()
		return Parts{}, err
	}
	if wrap != nil {
		stream = wrap(stream)
	}
	watch := &closeWatchStream{StreamLayer: stream} // fastelect.go
	p.Stable, p.Snapshots = stable, snaps
	p.Transport = &raftTransport{NetworkTransport: raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: watch, MaxPool: cfg.Raft.TransportMaxPool, Timeout: cfg.Raft.TransportTimeout,
		Logger: raftlog.HCLogger(log, "raft"),
	}), tls: tlsStream, watch: watch}
	return p, nil
}

// closeTransport closes a Raft transport, its pooled connections first.
func closeTransport(t raft.Transport) error {
	if t == nil {
		return nil
	}
	// Pooled outbound connections too (NetworkTransport): peers' inbound
	// handlers only return when their connection closes.
	if cs, ok := t.(interface{ CloseStreams() }); ok {
		cs.CloseStreams()
	}
	if c, ok := t.(raft.WithClose); ok {
		return c.Close()
	}
	return nil
}

// tcpStream is the Raft transport's stream layer: plain TCP on the node's
// dLegerPeers address (raft.NewTCPTransport's, rebuilt here so tests can wrap
// it).
type tcpStream struct {
	net.Listener
}

// Dial implements raft.StreamLayer.
func (t *tcpStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(address), timeout)
}

// NewInmemParts returns in-memory parts for member cfg.Raft.DLegerSelfID:
// an in-memory FS (storage.FaultFS, which fails nothing unless told to), a
// raft.InmemStore, an in-memory snapshot store and a transport on n at the
// member's dLegerPeers address. Nothing touches the disk or the network,
// so tests whose point is not durability or TCP run without fsync and
// without ports; the dLegerPeers addresses are only names here.
func NewInmemParts(cfg GroupConfig, n *InmemNetwork) (Parts, error) {
	addr, err := cfg.Raft.SelfAddr()
	if err != nil {
		return Parts{}, err
	}
	return Parts{
		FS:        storage.NewFaultFS(1),
		Stable:    raft.NewInmemStore(),
		Snapshots: NewInmemSnapshotStore(cfg.Raft.SnapshotRetain),
		Transport: n.Transport(raft.ServerAddress(addr), cfg.Raft.TransportTimeout),
	}, nil
}

// InmemNetwork connects the in-memory Raft transports of a group's members:
// every member on it reaches every other one, except across a partition
// (SetPartitioned). A closed transport leaves the network, so peers fail
// fast when they call it, as a TCP dial to a dead process does.
type InmemNetwork struct {
	mu sync.Mutex
	// Guarded by mu.
	members map[raft.ServerAddress]*inmemTransport
	cut     map[raft.ServerAddress]bool
}

// NewInmemNetwork returns an empty network.
func NewInmemNetwork() *InmemNetwork {
	return &InmemNetwork{members: map[raft.ServerAddress]*inmemTransport{}, cut: map[raft.ServerAddress]bool{}}
}

// Transport returns a new transport at addr, connected to every member on
// the network that is not cut off; a transport already at addr is replaced
// (its member is gone). RPCs wait at most timeout for the peer to take
// and answer them (ten times that for a snapshot).
func (n *InmemNetwork) Transport(addr raft.ServerAddress, timeout time.Duration) raft.Transport {
	return n.transport(addr, timeout, false)
}

// transport is Transport, cut off from its first moment when cut.
func (n *InmemNetwork) transport(addr raft.ServerAddress, timeout time.Duration, cut bool) *inmemTransport {
	_, it := raft.NewInmemTransportWithTimeout(addr, timeout)
	t := &inmemTransport{InmemTransport: it, net: n, timeout: timeout}
	n.mu.Lock()
	defer n.mu.Unlock()
	if old := n.members[addr]; old != nil {
		n.detachLocked(old)
	}
	if cut {
		n.cut[addr] = true
	} else {
		delete(n.cut, addr)
	}
	n.members[addr] = t
	n.linkLocked(t)
	return t
}

// Reopen returns p with a new transport at its old transport's address:
// the parts of a member restarting after Close, with its FS, stable store
// and snapshots as the member left them. Call it right before the restart:
// until its Raft runs, RPCs to the new transport wait (a stopped member's
// closed transport fails them at once).
func (n *InmemNetwork) Reopen(p Parts) Parts { return n.reopen(p, false) }

// ReopenPartitioned is Reopen for a member restarting behind a partition:
// its new transport is cut off (SetPartitioned) before any peer can reach
// it, so nothing a peer sends meanwhile, such as a leader's last append
// to a member it removed, gets through until the partition heals.
func (n *InmemNetwork) ReopenPartitioned(p Parts) Parts { return n.reopen(p, true) }

func (n *InmemNetwork) reopen(p Parts, cut bool) Parts {
	timeout := 10 * time.Second
	if it, ok := p.Transport.(*inmemTransport); ok {
		timeout = it.timeout
	}
	p.Transport = n.transport(p.Transport.LocalAddr(), timeout, cut)
	return p
}

// SetPartitioned cuts the member at addr off from every other member
// (true: its RPCs and theirs to it fail at once, pipelines close) or joins
// it again (false).
func (n *InmemNetwork) SetPartitioned(addr raft.ServerAddress, cut bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if cut {
		n.cut[addr] = true
	} else {
		delete(n.cut, addr)
	}
	t := n.members[addr]
	if t == nil {
		return
	}
	if cut {
		n.detachLocked(t)
	} else {
		n.linkLocked(t)
	}
}

// linkLocked connects t and every member not cut off, both ways.
func (n *InmemNetwork) linkLocked(t *inmemTransport) {
	if n.cut[t.LocalAddr()] {
		return
	}
	for addr, o := range n.members {
		if o == t || n.cut[addr] {
			continue
		}
		t.Connect(addr, o.InmemTransport)
		o.Connect(t.LocalAddr(), t.InmemTransport)
	}
}

// detachLocked disconnects t from every member, both ways.
func (n *InmemNetwork) detachLocked(t *inmemTransport) {
	t.DisconnectAll()
	for _, o := range n.members {
		if o != t {
			o.Disconnect(t.LocalAddr())
		}
	}
}

// inmemTransport is a raft.InmemTransport that leaves its network on Close.
type inmemTransport struct {
	*raft.InmemTransport
	net     *InmemNetwork
	timeout time.Duration
}

// errTransportClosed answers the RPCs a closed in-memory transport had
// not handed to its Raft.
var errTransportClosed = errors.New("broker: in-memory raft transport closed")

// Close implements raft.WithClose. RPCs queued for this member fail at
// once, as on a TCP connection its process closed; otherwise their
// callers would wait out the transport timeout.
//
// Queued RPCs are answered before the network detaches t (which closes
// the peers' pipelines to it), so a pipelined append learns its error,
// and once more after, for any that arrived in between.
func (t *inmemTransport) Close() error {
	t.failQueued()
	n := t.net
	n.mu.Lock()
	if n.members[t.LocalAddr()] == t {
		delete(n.members, t.LocalAddr())
	}
	n.detachLocked(t)
	n.mu.Unlock()
	t.failQueued()
	return nil
}

// failQueued answers every RPC queued for t with errTransportClosed.
func (t *inmemTransport) failQueued() {
	for {
		select {
		case rpc := <-t.Consumer():
			rpc.Respond(emptyResponse(rpc.Command), errTransportClosed)
		default:
			return
		}
	}
}

// emptyResponse is the zero response of cmd's RPC type. An error answer
// still needs one: hashicorp/raft's in-memory pipeline copies the
// response out before it looks at the error.
func emptyResponse(cmd any) any {
	switch cmd.(type) {
	case *raft.AppendEntriesRequest:
		return &raft.AppendEntriesResponse{}
	case *raft.RequestVoteRequest:
		return &raft.RequestVoteResponse{}
	case *raft.RequestPreVoteRequest:
		return &raft.RequestPreVoteResponse{}
	case *raft.InstallSnapshotRequest:
		return &raft.InstallSnapshotResponse{}
	case *raft.TimeoutNowRequest:
		return &raft.TimeoutNowResponse{}
	}
	return nil
}

// InmemSnapshotStore is an in-memory raft.SnapshotStore keeping the newest
// retain snapshots. A snapshot becomes visible when its sink closes, so a
// snapshot being written is never listed or sent to a follower
// (raft.InmemSnapshotStore publishes it at Create).
type InmemSnapshotStore struct {
	retain int
	mu     sync.Mutex
	// Guarded by mu.
	snaps []*inmemSnapshot // oldest first
	seq   uint64
}

type inmemSnapshot struct {
	meta raft.SnapshotMeta
	data []byte
}

var _ raft.SnapshotStore = (*InmemSnapshotStore)(nil)

// NewInmemSnapshotStore returns an empty store keeping the newest retain
// (at least 1) snapshots.
func NewInmemSnapshotStore(retain int) *InmemSnapshotStore {
	return &InmemSnapshotStore{retain: max(retain, 1)}
}

// Create implements raft.SnapshotStore.
func (s *InmemSnapshotStore) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, _ raft.Transport) (raft.SnapshotSink, error) {
	if version != 1 {
		return nil, fmt.Errorf("broker: unsupported snapshot version %d", version)
	}
	s.mu.Lock()
	s.seq++
	id := strconv.FormatUint(term, 10) + "-" + strconv.FormatUint(index, 10) + "-" + strconv.FormatUint(s.seq, 10)
	s.mu.Unlock()
	return &inmemSnapshotSink{s: s, snap: &inmemSnapshot{meta: raft.SnapshotMeta{
		Version: version, ID: id, Index: index, Term: term,
		Configuration: configuration, ConfigurationIndex: configurationIndex,
	}}}, nil
}

// List implements raft.SnapshotStore: newest first.
func (s *InmemSnapshotStore) List() ([]*raft.SnapshotMeta, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*raft.SnapshotMeta, 0, len(s.snaps))
	for i := len(s.snaps) - 1; i >= 0; i-- {
		m := s.snaps[i].meta
		out = append(out, &m)
	}
	return out, nil
}

// Open implements raft.SnapshotStore.
func (s *InmemSnapshotStore) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sn := range s.snaps {
		if sn.meta.ID == id {
			m := sn.meta
			return &m, io.NopCloser(bytes.NewReader(sn.data)), nil
		}
	}
	return nil, nil, fmt.Errorf("broker: snapshot %s not found", id)
}

// inmemSnapshotSink buffers one snapshot until Close publishes it.
type inmemSnapshotSink struct {
	s    *InmemSnapshotStore
	snap *inmemSnapshot
	done bool
}

// Write implements raft.SnapshotSink.
func (k *inmemSnapshotSink) Write(p []byte) (int, error) {
	if k.done {
		return 0, errors.New("broker: write to a closed snapshot sink")
	}
	k.snap.data = append(k.snap.data, p...)
	return len(p), nil
}

// ID implements raft.SnapshotSink.
func (k *inmemSnapshotSink) ID() string { return k.snap.meta.ID }

// Close implements raft.SnapshotSink: the snapshot becomes the newest.
func (k *inmemSnapshotSink) Close() error {
	if k.done {
		return nil
	}
	k.done = true
	k.snap.meta.Size = int64(len(k.snap.data))
	s := k.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snaps = append(s.snaps, k.snap)
	if n := len(s.snaps) - s.retain; n > 0 {
		s.snaps = append(s.snaps[:0:0], s.snaps[n:]...)
	}
	return nil
}

// Cancel implements raft.SnapshotSink: the snapshot is dropped.
func (k *inmemSnapshotSink) Cancel() error {
	k.done = true
	return nil
}
