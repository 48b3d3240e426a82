package broker

import (
	"bytes"
	"testing"

	"github.com/raftmq/raftmq/wire"
)

// FuzzDecodeCommand: the command decoder never panics, and whatever decodes
// re-encodes to an entry that decodes to the same command.
func FuzzDecodeCommand(f *testing.F) {
	seeds := []*Command{
		{Type: CmdMessages, Idem: []idemKey{{Index: 0, Producer: "p", Seq: 1}, {Index: 3, Producer: "q", Seq: -2}}},
		{Type: CmdMessages},
		{Type: CmdOffsets, Offsets: []OffsetCommit{{Group: "g", Topic: "t", QueueID: 1, Offset: 99}}},
		{Type: CmdUpdateTopic, Topic: wire.TopicConfig{TopicName: "t", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}},
		{Type: CmdDeleteTopic, Name: "t"},
		{Type: CmdDeleteTopic, Name: "t", DropQueues: true},
		{Type: CmdUpdateGroup, Group: wire.DefaultSubscriptionGroupConfig("g")},
		{Type: CmdDeleteGroup, Name: "g"},
		{Type: CmdDeleteGroup, Name: "g", KeepOffsets: true},
		{Type: CmdScheduleOffsets, Schedule: map[int32]int64{1: 5, 18: 7}},
		{Type: CmdMemberAddr, MemberID: "n0", MemberAddr: "127.0.0.1:10911"},
		{Type: CmdTxnEnd, TxnHalf: 4096, TxnCommit: true},
		{Type: CmdTxnCheck, TxnCheck: &txnCheck{FloorQueue: 3, FloorPhy: 500, Checked: []int64{600}, Discarded: []int64{700}}},
		{Type: CmdTimerProgress, Timer: TimerProgress{From: TimerCursor{Bucket: 1700000000, Fired: 4}, To: TimerCursor{Bucket: 1700000000, Fired: 9}}},
		{Type: CmdDedupParams, Dedup: dedupParams{Window: 1024, TTLms: 3_600_000}},
	}
	for _, c := range seeds {
		ext, data, err := EncodeCommand(c, nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(ext, data)
	}
	f.Fuzz(func(t *testing.T, ext, data []byte) {
		c, err := DecodeCommand(ext, data)
		if err != nil {
			return
		}
		ext2, data2, err := EncodeCommand(c, data)
		if err != nil {
			t.Fatalf("decoded command does not encode: %v", err)
		}
		c2, err := DecodeCommand(ext2, data2)
		if err != nil {
			t.Fatalf("re-encoded command does not decode: %v", err)
		}
		ext3, data3, _ := EncodeCommand(c2, data2)
		if !bytes.Equal(ext2, ext3) || !bytes.Equal(data2, data3) {
			t.Fatalf("encoding is not stable: %x/%x vs %x/%x", ext2, data2, ext3, data3)
		}
	})
}
