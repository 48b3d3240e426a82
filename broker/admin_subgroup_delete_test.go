package broker

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestDeleteSubGroupCleanOffset: DELETE_SUBSCRIPTIONGROUP (207) removes the
// group's offsets only when its cleanOffset header is true, as RocketMQ's
// AdminBrokerProcessor.deleteSubscriptionGroup (mqadmin deleteSubGroup -r
// true); without it (every client before RocketMQ 5, and mqadmin's default)
// the group's config goes and its offsets stay, on every replica, pending
// commits included, so a group created again resumes where it was.
func TestDeleteSubGroupCleanOffset(t *testing.T) {
	tc := startRealCluster(t, func(c *BrokerConfig) { c.ConsumerOffsetCommitCoalescer = time.Hour })
	l := tc.createTopicOnLeader("KT", 2)
	node := tc.nodes[l]
	addr := node.Addr()
	for q := range 2 {
		for range 3 {
			if r := tc.call(addr, remoting.RequestSendMessage, sendExt("KT", q, ""), []byte("m")); r.Code != remoting.ResponseSuccess {
				t.Fatalf("send: %d %s", r.Code, r.Remark)
			}
		}
	}
	body, _ := json.Marshal(wire.DefaultSubscriptionGroupConfig("KG"))
	if r := tc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, body); r.Code != remoting.ResponseSuccess {
		t.Fatalf("create group KG: %d %s", r.Code, r.Remark)
	}
	commit := func(q, off int) {
		t.Helper()
		ext := map[string]string{"consumerGroup": "KG", "topic": "KT", "queueId": strconv.Itoa(q), "commitOffset": strconv.Itoa(off)}
		if r := tc.call(addr, remoting.RequestUpdateConsumerOffset, ext, nil); r.Code != remoting.ResponseSuccess {
			t.Fatalf("commit offset: %d %s", r.Code, r.Remark)
		}
	}
	commit(0, 2)
	node.offsets.flush()
	commit(1, 3) // still pending in the coalescer at the delete
	replicaOffsets := func(i int) map[int32]int64 { return tc.groups[i].State().ConsumerOffsets()["KT@KG"] }
	want := map[int32]int64{0: 2, 1: 3}

	// mqadmin deleteSubGroup without -r: the header is absent.
	if r := tc.call(addr, remoting.RequestDeleteSubscriptionGroup, map[string]string{"groupName": "KG"}, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("delete group: %d %s", r.Code, r.Remark)
	}
	node.offsets.flush()
	for i := range tc.groups {
		testutil.WaitFor(t, 5*time.Second, "group KG deleted on replica "+strconv.Itoa(i), func() bool {
			_, ok := tc.groups[i].State().SubscriptionGroup("KG")
			return !ok
		})
		testutil.WaitFor(t, 5*time.Second, "offsets of KG on replica "+strconv.Itoa(i), func() bool {
			return maps.Equal(replicaOffsets(i), want)
		})
	}
	// cleanOffset=false said outright keeps them too.
	if r := tc.call(addr, remoting.RequestDeleteSubscriptionGroup, map[string]string{"groupName": "KG", "cleanOffset": "false"}, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("delete group: %d %s", r.Code, r.Remark)
	}
	// Created again, the group resumes where it was.
	if r := tc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, body); r.Code != remoting.ResponseSuccess {
		t.Fatalf("create group KG again: %d %s", r.Code, r.Remark)
	}
	for q, off := range want {
		r := tc.call(addr, remoting.RequestQueryConsumerOffset, map[string]string{"consumerGroup": "KG", "topic": "KT", "queueId": strconv.Itoa(int(q))}, nil)
		if r.Code != remoting.ResponseSuccess || r.ExtFields["offset"] != strconv.FormatInt(off, 10) {
			t.Fatalf("KG's offset of queue %d after deleteSubGroup without cleanOffset: %d %v %s; want %d", q, r.Code, r.ExtFields, r.Remark, off)
		}
	}

	// mqadmin deleteSubGroup -r true: they go on every replica, a pending
	// commit included.
	commit(1, 1)
	if r := tc.call(addr, remoting.RequestDeleteSubscriptionGroup, map[string]string{"groupName": "KG", "cleanOffset": "true"}, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("delete group with cleanOffset: %d %s", r.Code, r.Remark)
	}
	node.offsets.flush()
	for i := range tc.groups {
		testutil.WaitFor(t, 5*time.Second, "offsets of KG gone on replica "+strconv.Itoa(i), func() bool {
			return len(replicaOffsets(i)) == 0
		})
	}
	if _, ok := node.offsets.lookup("KG", "KT", 1); ok {
		t.Fatal("a pending offset of KG is still served after deleteSubGroup with cleanOffset")
	}
	if keys := slices.Collect(maps.Keys(tc.groups[l].State().ConsumerOffsets())); len(keys) != 0 {
		t.Fatalf("offsets left after cleanOffset: %v", keys)
	}
}

// TestDeleteGroupEntryReplay: a delete-group entry of the first layout
// (every entry written before cleanOffset was honoured) replays as it
// always did, removing the group's offsets; the layout that keeps them
// changes only the group table. Other groups' offsets stay either way.
func TestDeleteGroupEntryReplay(t *testing.T) {
	for _, tt := range []struct {
		name, ext string
		want      []string
	}{
		{"first layout", "0601", []string{"T@other"}},
		{"offsets kept", "060201", []string{"T@g", "T@other", "U@g"}},
		{"second layout, offsets removed", "060200", []string{"T@other"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newState(0, 0)
			s.groups["g"] = wire.DefaultSubscriptionGroupConfig("g")
			s.groups["other"] = wire.DefaultSubscriptionGroupConfig("other")
			for _, k := range []string{"T@g", "U@g", "T@other"} {
				s.offsets[k] = map[int32]int64{0: 7}
			}
			ext, _ := hex.DecodeString(tt.ext)
			c, err := DecodeCommand(ext, []byte("g"))
			if err != nil {
				t.Fatal(err)
			}
			s.applyLocked(c, 1)
			if _, ok := s.SubscriptionGroup("g"); ok {
				t.Fatal("group g still configured")
			}
			if got := slices.Sorted(maps.Keys(s.ConsumerOffsets())); !slices.Equal(got, tt.want) {
				t.Fatalf("offsets after the entry: %v; want %v", got, tt.want)
			}
		})
	}
}

// TestDeleteGroupSecondLayoutOnly: version 2 is CmdDeleteGroup's alone,
// and its keep-offsets byte is checked, so a corrupt or foreign entry
// stops the FSM instead of applying as something else.
func TestDeleteGroupSecondLayoutOnly(t *testing.T) {
	for _, ext := range []string{"040201", "050201", "0602", "060202", "06020100", "0603"} {
		b, _ := hex.DecodeString(ext)
		if c, err := DecodeCommand(b, []byte("g")); !errors.Is(err, ErrBadCommand) {
			t.Errorf("extensions %s decoded to %+v, %v; want ErrBadCommand", ext, c, err)
		}
	}
}
