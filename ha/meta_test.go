package ha

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/memberlist"
)

func sampleBrokerMeta() NodeMeta {
	return NodeMeta{
		Kind:         KindBroker,
		Cluster:      "DefaultCluster",
		BrokerName:   "broker-a",
		RaftID:       "n0",
		Role:         RoleLeader,
		RemotingAddr: "127.0.0.1:10911",
		RaftAddr:     "127.0.0.1:10914",
		Term:         7,
		BrokerID:     0,
	}
}

func TestNodeMetaRoundTrip(t *testing.T) {
	cases := []NodeMeta{
		{Kind: KindNameServer, RemotingAddr: "127.0.0.1:9876", BrokerID: -1},
		sampleBrokerMeta(),
		{Kind: KindBroker, Role: RoleFollower, BrokerName: "b", Term: 1<<64 - 1, BrokerID: -1 << 63},
		{Kind: KindBroker, Role: RoleCandidate, Cluster: "集群", BrokerID: 1<<63 - 1},
	}
	for _, want := range cases {
		b, err := want.Encode()
		if err != nil {
			t.Fatalf("encode %+v: %v", want, err)
		}
		got, err := DecodeNodeMeta(b)
		if err != nil {
			t.Fatalf("decode %+v: %v", want, err)
		}
		if got != want {
			t.Fatalf("round trip: got %+v, want %+v", got, want)
		}
	}
}

func TestNodeMetaCompact(t *testing.T) {
	b, err := sampleBrokerMeta().Encode()
	if err != nil {
		t.Fatal(err)
	}
	// Every alive message carries it: keep it far below the 512-byte cap.
	if len(b) > 80 {
		t.Fatalf("typical broker meta is %d bytes; want compact (<= 80)", len(b))
	}
}

func TestNodeMetaTooLarge(t *testing.T) {
	m := sampleBrokerMeta()
	m.BrokerName = strings.Repeat("x", memberlist.MetaMaxSize)
	if _, err := m.Encode(); !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("want ErrMetaTooLarge, got %v", err)
	}
	if err := m.Validate(); !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("Validate: want ErrMetaTooLarge, got %v", err)
	}
	// Right at the limit is fine: find the largest name that fits.
	m.BrokerName = ""
	base, _ := m.Encode()
	m.BrokerName = strings.Repeat("x", memberlist.MetaMaxSize-len(base)-1) // 2-byte length prefix
	b, err := m.Encode()
	if err != nil || len(b) != memberlist.MetaMaxSize {
		t.Fatalf("at the limit: len %d, err %v", len(b), err)
	}
}

func TestNodeMetaInvalid(t *testing.T) {
	for name, m := range map[string]NodeMeta{
		"kind":  {Kind: "proxy"},
		"role":  {Kind: KindBroker, Role: "observer"},
		"utf-8": {Kind: KindBroker, Cluster: "\xff"},
	} {
		if _, err := m.Encode(); !errors.Is(err, ErrInvalidMeta) {
			t.Errorf("%s: want ErrInvalidMeta, got %v", name, err)
		}
	}
}

func TestDecodeNodeMetaCorrupt(t *testing.T) {
	good, _ := sampleBrokerMeta().Encode()
	cases := map[string][]byte{
		"empty":          nil,
		"version 0":      append([]byte{0}, good[1:]...),
		"unknown kind":   {1, 9, 0, 0, 0, 0, 0, 0, 0, 0},
		"unknown role":   {1, 2, 9, 0, 0, 0, 0, 0, 0, 0},
		"truncated":      good[:len(good)-1],
		"trailing":       append(append([]byte{}, good...), 0),
		"long string":    {1, 2, 1, 0, 0, 50, 'a'},
		"non-canonical":  {1, 2, 1, 0x80, 0x00, 0, 0, 0, 0, 0, 0},
		"bad utf-8":      {1, 2, 1, 0, 0, 1, 0xff, 0, 0, 0, 0},
		"over max size":  bytes.Repeat([]byte{1}, memberlist.MetaMaxSize+1),
		"varint overrun": {1, 2, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	}
	for name, b := range cases {
		if _, err := DecodeNodeMeta(b); !errors.Is(err, ErrCorruptMeta) {
			t.Errorf("%s: want ErrCorruptMeta, got %v", name, err)
		}
	}
}

// A newer node may append fields (layout rule in meta.go); an older node
// must still read the fields it knows.
func TestDecodeNodeMetaNewerVersion(t *testing.T) {
	want := sampleBrokerMeta()
	b, _ := want.Encode()
	b[0] = 2
	b = append(b, 0x05, 'z', 'o', 'n', 'e', '1')
	got, err := DecodeNodeMeta(b)
	if err != nil {
		t.Fatalf("v2 with extra field: %v", err)
	}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}
