package wire

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestOffsetMsgID(t *testing.T) {
	id := OffsetMsgID(netip.MustParseAddrPort("127.0.0.1:10911"), 0x1234)
	if id != "7F00000100002A9F0000000000001234" {
		t.Fatalf("msgId %s", id)
	}
	got, err := ParseMessageID(id)
	if err != nil || got.Addr.String() != "127.0.0.1:10911" || got.Offset != 0x1234 {
		t.Fatalf("parse: %+v %v", got, err)
	}
	ap6 := netip.MustParseAddrPort("[2001:db8::7]:9")
	got, err = ParseMessageID(OffsetMsgID(ap6, 77))
	if err != nil || got.Addr != ap6 || got.Offset != 77 {
		t.Fatalf("v6 parse: %+v %v", got, err)
	}
	if _, err := ParseMessageID("zz"); !errors.Is(err, ErrInvalidMessageID) {
		t.Fatalf("bad id: %v", err)
	}
	// A v4-mapped store host written as IPv6 keeps its 16-byte width in
	// an entry's id (the stored bytes), and is IPv4 in OffsetMsgID.
	mapped := netip.MustParseAddrPort("[::ffff:10.0.0.1]:7")
	e := Entry{StoreHost: mapped, SysFlag: SysFlagStoreHostV6, PhysicalOffset: 5}
	if n := len(e.OffsetMsgID()); n != 56 {
		t.Fatalf("entry id of a v6-stored host has %d characters", n)
	}
	if n := len(OffsetMsgID(mapped, 5)); n != 32 {
		t.Fatalf("OffsetMsgID of a mapped host has %d characters", n)
	}
}

// TestParseMessageIDErrorClipsLongID: the error for an id of the wrong
// length quotes only its start; it becomes a response's remark, and the
// id is whatever a client sent (a 1 MiB one made a 1 MiB remark).
func TestParseMessageIDErrorClipsLongID(t *testing.T) {
	_, err := ParseMessageID(strings.Repeat("A", 1<<20))
	if !errors.Is(err, ErrInvalidMessageID) || len(err.Error()) > 256 || !strings.Contains(err.Error(), "1048576 characters") {
		t.Fatalf("error of %d bytes: %.200v", len(err.Error()), err)
	}
}
