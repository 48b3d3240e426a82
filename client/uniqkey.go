package client

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"time"
)

// UniqIDGenerator creates UNIQ_KEY values with the layout of RocketMQ's
// MessageClientIDSetter, so tools that parse them (queryMsgById, the
// dashboard) read ours too. 16 bytes, 32 upper-case hex characters for an
// IPv4 host:
//
//	IP (4 bytes) · pid (2) · "class loader hash" (4) ·
//	ms since the start of the current month (4) · counter (2)
//
// Go has no class loader; a random 4-byte value per generator plays its
// part, keeping two producers in one process apart. The time field is
// relative to the first day of the month in the local time zone, as in
// Java's Calendar; the 2-byte counter wraps.
type UniqIDGenerator struct {
	now    func() time.Time
	prefix string // hex of IP, pid, random

	mu        sync.Mutex
	counter   uint16    // guarded by mu
	monthFrom time.Time // guarded by mu; start of the current month
	monthTo   time.Time // guarded by mu; start of the next month
}

// NewUniqIDGenerator builds a generator for a host address (nil picks the
// first non-loopback IPv4 address, or a time-derived fake one as RocketMQ
// does) and a clock (nil means time.Now).
func NewUniqIDGenerator(ip net.IP, now func() time.Time) *UniqIDGenerator {
	if now == nil {
		now = time.Now
	}
	if ip == nil {
		ip = localIPv4()
	}
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	fixed := make([]byte, 0, len(ip)+6)
	fixed = append(fixed, ip...)
	fixed = binary.BigEndian.AppendUint16(fixed, uint16(os.Getpid()))
	fixed = binary.BigEndian.AppendUint32(fixed, rand.Uint32())
	return &UniqIDGenerator{now: now, prefix: strings.ToUpper(hex.EncodeToString(fixed))}
}

// localIPv4 picks the first non-loopback IPv4 address, or a fake one from
// the clock (MessageClientIDSetter.createFakeIP) when there is none.
func localIPv4() net.IP {
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() {
				if v4 := ipn.IP.To4(); v4 != nil {
					return v4
				}
			}
		}
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(time.Now().UnixMilli()))
	return net.IP(b[4:8])
}

// New returns the next id.
func (g *UniqIDGenerator) New() string { return g.newAt(g.now()) }

// newAt is New with the generator's clock already read (the producer
// reads it once per send for the key and the born timestamp).
func (g *UniqIDGenerator) newAt(now time.Time) string {
	g.mu.Lock()
	if !now.Before(g.monthTo) {
		y, m, _ := now.Date()
		g.monthFrom = time.Date(y, m, 1, 0, 0, 0, 0, now.Location())
		g.monthTo = g.monthFrom.AddDate(0, 1, 0)
	}
	diff := int32(now.Sub(g.monthFrom).Milliseconds())
	if diff < 0 && diff > -1_000_000 { // clock stepped back a little (NTP)
		diff = 0
	}
	c := g.counter
	g.counter++
	g.mu.Unlock()
	const hexDigits = "0123456789ABCDEF"
	var room [64]byte // the 32-byte key is built on the stack, copied once by string()
	buf := room[:0]
	if len(g.prefix)+12 > len(room) {
		buf = make([]byte, 0, len(g.prefix)+12)
	}
	buf = append(buf, g.prefix...)
	buf = buf[:len(g.prefix)+12]
	tail := buf[len(g.prefix):]
	v := uint64(uint32(diff))<<16 | uint64(c)
	for i := 11; i >= 0; i-- {
		tail[i] = hexDigits[v&0xF]
		v >>= 4
	}
	return string(buf)
}

// UniqIDInfo is what a UNIQ_KEY says about its origin.
type UniqIDInfo struct {
	// IP is the producer host's address.
	IP net.IP
	// Pid is the low 16 bits of the producer's process id.
	Pid uint16
	// MonthOffset is the time since the start of the month it was made in.
	MonthOffset time.Duration
	// Counter is the generator's sequence number (wraps at 65536).
	Counter uint16
}

// ParseUniqID decodes a UNIQ_KEY (32 hex characters for IPv4 hosts, 56 for
// IPv6), as MessageClientIDSetter.getIPFromID / getPidFromID do.
func ParseUniqID(id string) (UniqIDInfo, error) {
	raw, err := hex.DecodeString(id)
	if err != nil || (len(raw) != 16 && len(raw) != 28) {
		return UniqIDInfo{}, fmt.Errorf("%w: UNIQ_KEY %q must be 32 or 56 hex characters", ErrInvalidMessageID, id)
	}
	ipLen := len(raw) - 12
	return UniqIDInfo{
		IP:          net.IP(raw[:ipLen]),
		Pid:         binary.BigEndian.Uint16(raw[ipLen:]),
		MonthOffset: time.Duration(binary.BigEndian.Uint32(raw[ipLen+6:])) * time.Millisecond,
		Counter:     binary.BigEndian.Uint16(raw[ipLen+10:]),
	}, nil
}
