package broker

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/raftmq/raftmq/wire"
)

// Golden command entries (Extensions hex, Data) as the broker writes them.
// Decoding them must give the same command, and encoding that command must
// give the same bytes: entries like these are in Raft logs on disk.
var goldenCommands = []struct {
	name string
	ext  string
	data string
	want Command
}{
	{
		name: "update topic, every field",
		ext:  "0301",
		data: `{"topicName":"TopicTest","readQueueNums":8,"writeQueueNums":4,"perm":6,"topicFilterType":"SINGLE_TAG","topicSysFlag":1,"order":true,"attributes":{"+message.type":"FIFO"}}`,
		want: Command{Type: CmdUpdateTopic, Topic: wire.TopicConfig{TopicName: "TopicTest", ReadQueueNums: 8, WriteQueueNums: 4,
			Perm: 6, TopicFilterType: "SINGLE_TAG", TopicSysFlag: 1, Order: true, Attributes: map[string]string{"+message.type": "FIFO"}}},
	},
	{
		name: "update topic, zero fields",
		ext:  "0301",
		data: `{"topicName":"plain","readQueueNums":1,"writeQueueNums":1,"perm":4,"topicFilterType":"","topicSysFlag":0,"order":false}`,
		want: Command{Type: CmdUpdateTopic, Topic: wire.TopicConfig{TopicName: "plain", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 4}},
	},
	{
		name: "update group",
		ext:  "0501",
		data: `{"groupName":"g1","consumeEnable":true,"consumeFromMinEnable":true,"consumeBroadcastEnable":false,"consumeMessageOrderly":true,` +
			`"retryQueueNums":2,"retryMaxTimes":5,"brokerId":1,"whichBrokerWhenConsumeSlowly":2,"notifyConsumerIdsChangedEnable":true,"groupSysFlag":3}`,
		want: Command{Type: CmdUpdateGroup, Group: wire.SubscriptionGroupConfig{GroupName: "g1", ConsumeEnable: true, ConsumeFromMinEnable: true,
			ConsumeMessageOrderly: true, RetryQueueNums: 2, RetryMaxTimes: 5, BrokerID: 1, WhichBrokerWhenConsumeSlowly: 2,
			NotifyConsumerIdsChangedEnable: true, GroupSysFlag: 3}},
	},
	{name: "delete topic", ext: "0401", data: "TopicTest", want: Command{Type: CmdDeleteTopic, Name: "TopicTest"}},
	{name: "delete topic and its queues", ext: "0402", data: "TopicTest", want: Command{Type: CmdDeleteTopic, Name: "TopicTest", DropQueues: true}},
	{name: "delete group", ext: "0601", data: "g1", want: Command{Type: CmdDeleteGroup, Name: "g1"}},
	{name: "delete group, offsets kept", ext: "060201", data: "g1", want: Command{Type: CmdDeleteGroup, Name: "g1", KeepOffsets: true}},
	{
		name: "offsets", ext: "0201", data: "\x01\x01g\x01t\x02\xc6\x01",
		want: Command{Type: CmdOffsets, Offsets: []OffsetCommit{{Group: "g", Topic: "t", QueueID: 1, Offset: 99}}},
	},
	{
		name: "schedule offsets", ext: "0701", data: "\x02\x02\x0a\x24\x0e",
		want: Command{Type: CmdScheduleOffsets, Schedule: map[int32]int64{1: 5, 18: 7}},
	},
	{
		name: "member address", ext: "0801", data: "\x02n0\x0f127.0.0.1:10911",
		want: Command{Type: CmdMemberAddr, MemberID: "n0", MemberAddr: "127.0.0.1:10911"},
	},
	{
		name: "timer progress", ext: "0b01", data: "\x0a\x00\x0c\x00\x06",
		want: Command{Type: CmdTimerProgress, Timer: TimerProgress{From: TimerCursor{Bucket: 5}, To: TimerCursor{Bucket: 6}, Done: 3}},
	},
	{
		name: "messages with idempotent keys", ext: "0101020001700203017104",
		want: Command{Type: CmdMessages, Idem: []idemKey{{Index: 0, Producer: "p", Seq: 1}, {Index: 3, Producer: "q", Seq: 2}}},
	},
	{name: "transaction commit", ext: "0901c80101", want: Command{Type: CmdTxnEnd, TxnHalf: 100, TxnCommit: true}},
	{name: "transaction rollback", ext: "0901c80100", want: Command{Type: CmdTxnEnd, TxnHalf: 100}},
	{
		name: "dedup params", ext: "0c01", data: "\x04\xd0\x0f",
		want: Command{Type: CmdDedupParams, Dedup: dedupParams{Window: 4, TTLms: 1000}},
	},
	{
		name: "transaction check", ext: "0a01", data: "\x06\xe8\x07\x02\xb0\x09\xb0\x09\x01\x90\x03",
		want: Command{Type: CmdTxnCheck, TxnCheck: &txnCheck{FloorQueue: 3, FloorPhy: 500, Checked: []int64{600, 600}, Discarded: []int64{200}}},
	},
}

func TestCommandGoldenEntries(t *testing.T) {
	for _, g := range goldenCommands {
		t.Run(g.name, func(t *testing.T) {
			ext, err := hex.DecodeString(g.ext)
			if err != nil {
				t.Fatal(err)
			}
			c, err := DecodeCommand(ext, []byte(g.data))
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(*c, g.want) {
				t.Fatalf("decoded\n %+v\nwant\n %+v", *c, g.want)
			}
			ext2, data2, err := EncodeCommand(&g.want, []byte(g.data))
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			if !bytes.Equal(ext2, ext) || string(data2) != g.data {
				t.Fatalf("encoded %x %q\nwant    %x %q", ext2, data2, ext, g.data)
			}
		})
	}
}

// goldenImage is a snapshot's table JSON as brokers write it; it must load,
// and the loaded state must write it back byte for byte.
const goldenImage = `{"topics":{"T":{"topicName":"T","readQueueNums":2,"writeQueueNums":2,"perm":6,"topicFilterType":"SINGLE_TAG","topicSysFlag":0,"order":false}},` +
	`"topicsVersion":{"stateVersion":0,"timestamp":1700000000000,"counter":1},` +
	`"groups":{"g":{"groupName":"g","consumeEnable":true,"consumeFromMinEnable":true,"consumeBroadcastEnable":true,"consumeMessageOrderly":false,` +
	`"retryQueueNums":1,"retryMaxTimes":16,"brokerId":0,"whichBrokerWhenConsumeSlowly":1,"notifyConsumerIdsChangedEnable":true,"groupSysFlag":0}},` +
	`"offsets":{},"schedule":{},"members":{},"dedup":{"lastSweep":0},"queues":null}`

func TestSnapshotImageGolden(t *testing.T) {
	var img stateImage
	if err := json.Unmarshal([]byte(goldenImage), &img); err != nil {
		t.Fatal(err)
	}
	s := newState(0, 0)
	s.loadLocked(img)
	if tc, ok := s.Topic("T"); !ok || tc.ReadQueueNums != 2 || tc.TopicFilterType != "SINGLE_TAG" {
		t.Fatalf("topic %+v %v", tc, ok)
	}
	if g, ok := s.SubscriptionGroup("g"); !ok || g != wire.DefaultSubscriptionGroupConfig("g") {
		t.Fatalf("group %+v %v", g, ok)
	}
	if v := s.TopicsDataVersion(); v != (wire.DataVersion{Timestamp: 1700000000000, Counter: 1}) {
		t.Fatalf("data version %+v", v)
	}
	b, err := json.Marshal(s.imageLocked())
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != goldenImage {
		t.Fatalf("image\n got %s\nwant %s", b, goldenImage)
	}

	// The same tables built by applying commands write the same image.
	s = newState(0, 0)
	s.applyLocked(&Command{Type: CmdUpdateTopic, Topic: wire.TopicConfig{TopicName: "T", ReadQueueNums: 2, WriteQueueNums: 2,
		Perm: wire.PermRead | wire.PermWrite, TopicFilterType: "SINGLE_TAG"}}, 1700000000000)
	s.applyLocked(&Command{Type: CmdUpdateGroup, Group: wire.DefaultSubscriptionGroupConfig("g")}, 1700000000001)
	if b, _ := json.Marshal(s.imageLocked()); string(b) != goldenImage {
		t.Fatalf("applied image\n got %s\nwant %s", b, goldenImage)
	}
}

// TestRecordsCarryEveryWireField fails when a wire type gains a field that
// its broker record does not carry: set every field to a non-zero value
// and require the record round trip to keep it.
func TestRecordsCarryEveryWireField(t *testing.T) {
	var tc wire.TopicConfig
	fillNonZero(t, reflect.ValueOf(&tc).Elem())
	if got := topicRecordOf(tc).config(); !reflect.DeepEqual(got, tc) {
		t.Fatalf("topic record dropped a field:\n got %+v\nwant %+v", got, tc)
	}
	var g wire.SubscriptionGroupConfig
	fillNonZero(t, reflect.ValueOf(&g).Elem())
	if got := groupRecordOf(g).config(); got != g {
		t.Fatalf("group record dropped a field:\n got %+v\nwant %+v", got, g)
	}
	var v wire.DataVersion
	fillNonZero(t, reflect.ValueOf(&v).Elem())
	if got := versionRecordOf(v).dataVersion(); got != v {
		t.Fatalf("version record dropped a field:\n got %+v\nwant %+v", got, v)
	}
}

func fillNonZero(t *testing.T, v reflect.Value) {
	t.Helper()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("x" + v.Type().Field(i).Name)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			f.SetInt(int64(i + 1))
		case reflect.Map:
			m := reflect.MakeMap(f.Type())
			m.SetMapIndex(reflect.New(f.Type().Key()).Elem(), reflect.New(f.Type().Elem()).Elem())
			f.Set(m)
		default:
			t.Fatalf("fillNonZero: field %s of kind %s needs a case", v.Type().Field(i).Name, f.Kind())
		}
	}
}
