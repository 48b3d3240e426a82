package client

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"hash/crc32"
	"net/netip"
	"os"
	"testing"

	"github.com/raftmq/raftmq/wire"
)

// storedMessage describes one entry for encodeStored.
type storedMessage struct {
	topic                 string
	body                  []byte
	props                 string
	queueID, flag         int32
	queueOffset, physical int64
	sysFlag               int32
	born, store           netip.AddrPort
	bornTS, storeTS       int64
	reconsume             int32
	v2                    bool
	compress              bool
}

// encodeStored writes one entry in the CommitLog / pull-body format, the
// test's independent implementation of what a broker sends.
func encodeStored(t testing.TB, m storedMessage) []byte {
	t.Helper()
	body := m.body
	if m.compress {
		var buf bytes.Buffer
		zw := zlib.NewWriter(&buf)
		zw.Write(body)
		zw.Close()
		body = buf.Bytes()
		m.sysFlag |= wire.SysFlagCompressed
	}
	if !m.born.IsValid() {
		m.born = netip.MustParseAddrPort("10.0.0.1:5000")
	}
	if !m.store.IsValid() {
		m.store = netip.MustParseAddrPort("127.0.0.1:10911")
	}
	if m.born.Addr().Is6() {
		m.sysFlag |= wire.SysFlagBornHostV6
	}
	if m.store.Addr().Is6() {
		m.sysFlag |= wire.SysFlagStoreHostV6
	}
	host := func(b []byte, ap netip.AddrPort) []byte {
		b = append(b, ap.Addr().AsSlice()...)
		return binary.BigEndian.AppendUint32(b, uint32(ap.Port()))
	}
	var b []byte
	b = binary.BigEndian.AppendUint32(b, 0) // TOTALSIZE, patched below
	magic := wire.MagicV1
	if m.v2 {
		magic = wire.MagicV2
	}
	b = binary.BigEndian.AppendUint32(b, magic)
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(body)&0x7FFFFFFF)
	b = binary.BigEndian.AppendUint32(b, uint32(m.queueID))
	b = binary.BigEndian.AppendUint32(b, uint32(m.flag))
	b = binary.BigEndian.AppendUint64(b, uint64(m.queueOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(m.physical))
	b = binary.BigEndian.AppendUint32(b, uint32(m.sysFlag))
	b = binary.BigEndian.AppendUint64(b, uint64(m.bornTS))
	b = host(b, m.born)
	b = binary.BigEndian.AppendUint64(b, uint64(m.storeTS))
	b = host(b, m.store)
	b = binary.BigEndian.AppendUint32(b, uint32(m.reconsume))
	b = binary.BigEndian.AppendUint64(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	b = append(b, body...)
	if m.v2 {
		b = binary.BigEndian.AppendUint16(b, uint16(len(m.topic)))
	} else {
		b = append(b, byte(len(m.topic)))
	}
	b = append(b, m.topic...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(m.props)))
	b = append(b, m.props...)
	binary.BigEndian.PutUint32(b, uint32(len(b)))
	return b
}

func osPid16() int { return int(uint16(osGetpid())) }

var osGetpid = os.Getpid
