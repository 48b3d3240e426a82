package ha

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"

	"github.com/hashicorp/memberlist"
)

// NodeKind says what a gossip member is. Brokers and name servers share one
// gossip pool so a name server hears about broker deaths directly.
type NodeKind string

const (
	// KindNameServer is a `raftmq namesrv` process.
	KindNameServer NodeKind = "namesrv"
	// KindBroker is one node of a broker group (one Raft member).
	KindBroker NodeKind = "broker"
)

// RaftRole is a broker node's Raft state as last published by the node.
// Empty means unknown (not started yet, or not a broker).
type RaftRole string

const (
	// RoleLeader is the group's Raft leader, which serves as brokerId 0.
	RoleLeader RaftRole = "leader"
	// RoleFollower replicates from the leader.
	RoleFollower RaftRole = "follower"
	// RoleCandidate is campaigning for leadership.
	RoleCandidate RaftRole = "candidate"
)

// NodeMeta is what a node tells the gossip pool about itself. It travels in
// every memberlist alive message, so it is kept small: the binary encoding
// must fit memberlist.MetaMaxSize (512 bytes) and Encode refuses anything
// larger rather than letting memberlist panic.
type NodeMeta struct {
	Kind         NodeKind // namesrv or broker
	Cluster      string   // brokerClusterName
	BrokerName   string   // the group (one Raft group)
	RaftID       string   // Raft server id inside the group, e.g. "n0"
	Role         RaftRole // leader, follower, candidate or "" (unknown)
	RemotingAddr string   // host:port clients and name servers use
	RaftAddr     string   // host:port of the Raft transport, for leadership transfer
	Term         uint64   // Raft term the Role was observed in
	BrokerID     int64    // 0 for the leader, >0 for followers, -1 when unknown
}

// Wire codes for NodeKind and RaftRole. ONLY APPEND TO THESE TABLES: members
// of one pool may run different versions during a rolling upgrade, and a
// code's meaning must never change.
var (
	kindCodes = []NodeKind{0: "", 1: KindNameServer, 2: KindBroker}
	roleCodes = []RaftRole{0: "", 1: RoleLeader, 2: RoleFollower, 3: RoleCandidate}
)

// metaVersion is the layout version written by Encode. Layout v1:
//
//	version  byte (1)
//	kind     byte (kindCodes index)
//	role     byte (roleCodes index)
//	term     uvarint
//	brokerId zigzag varint
//	cluster, brokerName, raftId, remotingAddr, raftAddr: uvarint length + UTF-8 bytes
//
// Later versions may only append fields, so a decoder reads the v1 prefix
// of a newer layout and ignores the rest; for v1 itself trailing bytes are
// corruption.
const metaVersion = 1

func codeOf[T comparable](table []T, v T) (byte, bool) {
	for i, c := range table {
		if c == v {
			return byte(i), true
		}
	}
	return 0, false
}

// Validate reports whether m can be encoded (known kind and role, valid
// UTF-8 strings, fits MetaMaxSize).
func (m NodeMeta) Validate() error {
	_, err := m.Encode()
	return err
}

func (m NodeMeta) strings() [5]string {
	return [5]string{m.Cluster, m.BrokerName, m.RaftID, m.RemotingAddr, m.RaftAddr}
}

// Encode returns the compact binary form of m, or an error wrapping
// ErrInvalidMeta or ErrMetaTooLarge.
func (m NodeMeta) Encode() ([]byte, error) {
	kind, ok := codeOf(kindCodes, m.Kind)
	if !ok {
		return nil, fmt.Errorf("%w: unknown node kind %q (want %q or %q)", ErrInvalidMeta, m.Kind, KindNameServer, KindBroker)
	}
	role, ok := codeOf(roleCodes, m.Role)
	if !ok {
		return nil, fmt.Errorf("%w: unknown raft role %q (want leader, follower, candidate or empty)", ErrInvalidMeta, m.Role)
	}
	buf := make([]byte, 0, 64)
	buf = append(buf, metaVersion, kind, role)
	buf = binary.AppendUvarint(buf, m.Term)
	buf = binary.AppendVarint(buf, m.BrokerID)
	for _, s := range m.strings() {
		if !utf8.ValidString(s) {
			return nil, fmt.Errorf("%w: %q is not valid UTF-8", ErrInvalidMeta, s)
		}
		buf = binary.AppendUvarint(buf, uint64(len(s)))
		buf = append(buf, s...)
	}
	if len(buf) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("%w: %d bytes encoded, memberlist allows %d", ErrMetaTooLarge, len(buf), memberlist.MetaMaxSize)
	}
	return buf, nil
}

// metaReader walks an encoded NodeMeta, remembering the first error.
type metaReader struct {
	b   []byte
	err error
}

func (r *metaReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format, append([]any{ErrCorruptMeta}, args...)...)
	}
}

func (r *metaReader) byte1(what string) byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.fail("truncated before %s", what)
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *metaReader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	// Only the minimal encoding is accepted, so that decode∘encode is the
	// identity on every accepted input (the fuzz target checks it).
	if n <= 0 || n != uvarintLen(v) {
		r.fail("bad varint for %s", what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *metaReader) str(what string) string {
	n := r.uvarint(what + " length")
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)) {
		r.fail("%s length %d exceeds the %d bytes left", what, n, len(r.b))
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	if !utf8.ValidString(s) {
		r.fail("%s is not valid UTF-8", what)
		return ""
	}
	return s
}

func uvarintLen(v uint64) int {
	var tmp [binary.MaxVarintLen64]byte
	return binary.PutUvarint(tmp[:], v)
}

// DecodeNodeMeta parses the bytes memberlist carries in Node.Meta. Errors
// wrap ErrCorruptMeta.
func DecodeNodeMeta(b []byte) (NodeMeta, error) {
	if len(b) > memberlist.MetaMaxSize {
		return NodeMeta{}, fmt.Errorf("%w: %d bytes, more than memberlist's %d", ErrCorruptMeta, len(b), memberlist.MetaMaxSize)
	}
	r := &metaReader{b: b}
	var m NodeMeta
	version := r.byte1("version")
	if r.err == nil && version == 0 {
		r.fail("version 0")
	}
	kind := r.byte1("kind")
	role := r.byte1("role")
	if r.err == nil && int(kind) >= len(kindCodes) {
		r.fail("unknown node kind code %d", kind)
	}
	if r.err == nil && int(role) >= len(roleCodes) {
		r.fail("unknown raft role code %d", role)
	}
	if r.err == nil {
		m.Kind, m.Role = kindCodes[kind], roleCodes[role]
	}
	m.Term = r.uvarint("term")
	bid := r.uvarint("brokerId")
	m.BrokerID = int64(bid>>1) ^ -int64(bid&1) // zigzag, as binary.Varint
	m.Cluster = r.str("cluster")
	m.BrokerName = r.str("brokerName")
	m.RaftID = r.str("raftId")
	m.RemotingAddr = r.str("remotingAddr")
	m.RaftAddr = r.str("raftAddr")
	if r.err == nil && version == metaVersion && len(r.b) != 0 {
		r.fail("%d trailing bytes", len(r.b))
	}
	if r.err != nil {
		return NodeMeta{}, r.err
	}
	return m, nil
}
