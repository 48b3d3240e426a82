package store

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"go.uber.org/goleak"

	"github.com/raftmq/raftmq/storage"
	"github.com/raftmq/raftmq/wire"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// storeConfig is a small-footprint store config for tests.
func storeConfig(fsys storage.FS, root string) Config {
	c := DefaultConfig()
	c.StorePathRootDir = root
	c.FS = fsys
	c.MappedFileSizeCommitLog = 1 << 20
	c.MaxMessageSize = 64 << 10
	c.MappedFileSizeConsumeQueue = 1000 * CQUnitSize
	c.MaxHashSlotNum = 1000
	c.MaxIndexNum = 4000
	c.FlushIntervalConsumeQueue = 50 * time.Millisecond
	c.CleanResourceInterval = 50 * time.Millisecond
	return c
}

// pullAll reads a whole queue and returns the bodies in queue order.
func pullAll(t *testing.T, s *testStore, topic string, qid int32) []string {
	t.Helper()
	var out []string
	off := int64(0)
	for {
		r, err := s.GetMessage("g", topic, qid, off, 32, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != Found {
			if r.Status != OffsetOverflowOne && r.Status != NoMessageInQueue && r.Status != NoMatchedLogicQueue {
				t.Fatalf("pull %s/%d at %d: %v", topic, qid, off, r.Status)
			}
			return out
		}
		for i, b := range r.Messages {
			m, _, err := decodeUnchecked(b)
			if err != nil {
				t.Fatalf("pulled message: %v", err)
			}
			if m.QueueOffset != r.QueueOffsets[i] || m.QueueOffset != off+int64(i) {
				t.Fatalf("queue offset %d, want %d", m.QueueOffset, off+int64(i))
			}
			out = append(out, string(m.Body))
		}
		off = r.NextBeginOffset
	}
}

type fsCase struct {
	name string
	mk   func(t *testing.T) (storage.FS, string)
}

func allFS() []fsCase {
	return []fsCase{
		{"os", func(t *testing.T) (storage.FS, string) { return storage.OSFS(), t.TempDir() }},
		{"fault", func(t *testing.T) (storage.FS, string) { return storage.NewFaultFS(1), "/data" }},
	}
}

// storeContent is what TestStorePutGetReopen and
// TestStoreReopenAfterCrash put: 300 messages over three queues of TopicA,
// one entry each, then a batch of three in one entry on TopicB.
type storeContent struct {
	want map[int32][]string
	ids  []string
}

func putContent(t *testing.T, s *testStore) storeContent {
	t.Helper()
	c := storeContent{want: map[int32][]string{}}
	for i := 0; i < 300; i++ {
		q := int32(i % 3)
		body := fmt.Sprintf("m-%d-%s", i, strings.Repeat("z", i*7))
		r := s.put(coreMsg("TopicA", q, body))[0]
		if r.ConsumeQueueOffset != int64(len(c.want[q])) {
			t.Fatalf("put %d: queue offset %d, want %d", i, r.ConsumeQueueOffset, len(c.want[q]))
		}
		c.want[q] = append(c.want[q], body)
		c.ids = append(c.ids, wire.OffsetMsgID(s.cfg.StoreHost, r.CommitLogOffset))
	}
	rs := s.put(coreMsg("TopicB", 0, "b0"), coreMsg("TopicB", 0, "b1"), coreMsg("TopicB", 0, "b2"))
	for i, r := range rs {
		if r.ConsumeQueueOffset != int64(i) {
			t.Fatalf("batch message %d: queue offset %d", i, r.ConsumeQueueOffset)
		}
	}
	return c
}

func (c storeContent) check(t *testing.T, s *testStore) {
	t.Helper()
	for q, bodies := range c.want {
		if got := pullAll(t, s, "TopicA", q); !reflect.DeepEqual(got, bodies) {
			t.Fatalf("queue %d: got %d messages, want %d", q, len(got), len(bodies))
		}
	}
	if got := pullAll(t, s, "TopicB", 0); !reflect.DeepEqual(got, []string{"b0", "b1", "b2"}) {
		t.Fatalf("batch queue: %v", got)
	}
	id, err := wire.ParseMessageID(c.ids[42])
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.LookMessageByOffset(id.Offset)
	if err != nil || !strings.HasPrefix(string(m.Body), "m-42-") || m.MsgID() != c.ids[42] {
		t.Fatalf("look by offset: %v %v", m, err)
	}
}

// TestStorePutGetReopen: committed messages are served in queue order,
// also after a clean restart (which re-applies the log), and queue offsets
// continue where they were.
func TestStorePutGetReopen(t *testing.T) {
	for _, c := range allFS() {
		t.Run(c.name, func(t *testing.T) {
			fsys, dir := c.mk(t)
			cfg := storeConfig(fsys, dir)
			log := &segLog{}
			s := openTestStore(t, cfg, log)
			content := putContent(t, s)
			content.check(t, s)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if ok, _ := fileExists(fsys, s.abortPath()); ok {
				t.Fatal("abort file left after a clean close")
			}
			s = openTestStore(t, cfg, log)
			defer s.Close()
			content.check(t, s)
			if r := s.put(coreMsg("TopicA", 0, "after"))[0]; r.ConsumeQueueOffset != int64(len(content.want[0])) {
				t.Fatalf("put after reopen: queue offset %d, want %d", r.ConsumeQueueOffset, len(content.want[0]))
			}
		})
	}
}

// TestStoreReopenAfterCrash crashes the file system with ConsumeQueue and
// index data partly unflushed and torn; the reopened store verifies the
// units past the checkpoint and the re-applied log brings every queue back.
func TestStoreReopenAfterCrash(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			fsys := storage.NewFaultFS(seed)
			cfg := storeConfig(fsys, "/s")
			cfg.FlushIntervalConsumeQueue = time.Hour
			log := &segLog{}
			s := openTestStore(t, cfg, log)
			content := putContent(t, s)
			crashed := fsys.Crash(storage.CrashOptions{Tear: seed%2 == 0, TearPages: seed%2 == 1})
			_ = s.Close() // its writes fail: the disk is gone

			cfg.FS = crashed
			s = openTestStore(t, cfg, log)
			defer s.Close()
			content.check(t, s)
		})
	}
}

func TestStoreGetMessageStatuses(t *testing.T) {
	s := openTestStore(t, storeConfig(storage.NewFaultFS(1), "/s"), &segLog{})
	defer s.Close()
	r, _ := s.GetMessage("g", "Nope", 0, 0, 32, nil)
	if r.Status != NoMatchedLogicQueue {
		t.Fatalf("unknown queue: %v", r.Status)
	}
	for i := 0; i < 10; i++ {
		m := coreMsg("T", 0, fmt.Sprint(i))
		m.Properties["TAGS"] = []string{"A", "B"}[i%2]
		s.put(m)
	}
	r, _ = s.GetMessage("g", "T", 0, 10, 32, nil)
	if r.Status != OffsetOverflowOne || r.NextBeginOffset != 10 || r.MaxOffset != 10 {
		t.Fatalf("at max: %+v", r)
	}
	r, _ = s.GetMessage("g", "T", 0, 50, 32, nil)
	if r.Status != OffsetOverflowBadly || r.NextBeginOffset != 0 {
		t.Fatalf("past max: %v next %d", r.Status, r.NextBeginOffset)
	}
	r, _ = s.GetMessage("g", "T", 0, 0, 3, nil)
	if r.Status != Found || len(r.Messages) != 3 || r.NextBeginOffset != 3 {
		t.Fatalf("limit 3: %v %d next %d", r.Status, len(r.Messages), r.NextBeginOffset)
	}
	r, _ = s.GetMessage("g", "T", 0, 0, 32, NewTagsFilter("B"))
	if r.Status != Found || len(r.Messages) != 5 || r.QueueOffsets[0] != 1 || r.NextBeginOffset != 10 {
		t.Fatalf("tag filter: %v %d %v", r.Status, len(r.Messages), r.QueueOffsets)
	}
	r, _ = s.GetMessage("g", "T", 0, 0, 32, NewTagsFilter("C"))
	if r.Status != NoMatchedMessage || r.NextBeginOffset != 10 {
		t.Fatalf("no match: %v next %d", r.Status, r.NextBeginOffset)
	}
	if s.GetMaxOffsetInQueue("T", 0) != 10 || s.GetMinOffsetInQueue("T", 0) != 0 {
		t.Fatal("min/max offset")
	}
	if ts, err := s.GetEarliestMessageTime("T", 0); err != nil || ts <= 0 {
		t.Fatalf("earliest: %d %v", ts, err)
	}
	if off, err := s.GetOffsetInQueueByTime("T", 0, 0); err != nil || off != 0 {
		t.Fatalf("by time 0: %d %v", off, err)
	}
	if off, err := s.GetOffsetInQueueByTime("T", 0, time.Now().Add(time.Hour).UnixMilli()); err != nil || off != 10 {
		t.Fatalf("by future time: %d %v", off, err)
	}
	q, err := s.QueryMessage("T", "key-7", 10, 0, time.Now().Add(time.Hour).UnixMilli())
	if err != nil || len(q.Messages) != 1 || string(q.Messages[0].Body) != "7" {
		t.Fatalf("query by key: %+v %v", q, err)
	}
	if ts, err := s.GetEarliestStoreTime(); err != nil || ts <= 0 {
		t.Fatalf("earliest store time %d %v", ts, err)
	}
}

// TestStoreFlippedBitNeverServed: a message damaged on disk after it was
// stored is refused by pulls and lookups (ErrCorruptMessage), never served.
func TestStoreFlippedBitNeverServed(t *testing.T) {
	f := storage.NewFaultFS(5)
	s := openTestStore(t, storeConfig(f, "/s"), &segLog{})
	defer s.Close()
	var reqs []*DispatchRequest
	for i := 0; i < 5; i++ {
		reqs = append(reqs, s.put(coreMsg("T", 0, fmt.Sprintf("body-%d", i)))...)
	}
	bad := reqs[3]
	if err := f.FlipBit("/s/commitlog/"+storage.FileName(0), bad.CommitLogOffset+int64(bad.MsgSize)-30, 2); err != nil {
		t.Fatal(err)
	}
	r, err := s.GetMessage("g", "T", 0, 0, 32, nil)
	if err == nil && r.Status == Found && len(r.Messages) > 3 {
		t.Fatalf("damaged message served: %d messages", len(r.Messages))
	}
	if _, err := s.LookMessageByOffset(bad.CommitLogOffset); !errors.Is(err, ErrCorruptMessage) {
		t.Fatalf("look up of the damaged message: %v", err)
	}
	// A pull starting at it fails, naming the file and the offset in it.
	want := fmt.Sprintf("file /s/commitlog/%s, offset %d", storage.FileName(0), bad.CommitLogOffset)
	if r, err := s.GetMessage("g", "T", 0, 3, 32, nil); !errors.Is(err, ErrCorruptMessage) || !strings.Contains(err.Error(), want) {
		t.Fatalf("pull at the damaged message: %d messages, %v; want an error with %q", len(r.Messages), err, want)
	}
	if m, err := s.LookMessageByOffset(reqs[2].CommitLogOffset); err != nil || string(m.Body) != "body-2" {
		t.Fatalf("intact message: %v %v", m, err)
	}
}

// TestStoreDiskGuard: above the full ratio (as reported by statfs) the
// store tells the Raft group to refuse writes; reads go on; writes resume
// once space is back.
func TestStoreDiskGuard(t *testing.T) {
	f := storage.NewFaultFS(4)
	s := openTestStore(t, storeConfig(f, "/s"), &segLog{})
	defer s.Close()
	s.put(coreMsg("T", 0, "before"))
	if err := s.CheckDiskWritable(); err != nil {
		t.Fatal(err)
	}
	f.SetDiskUsage(95, 100)
	testutil.WaitFor(t, 5*time.Second, "disk guard trips", func() bool {
		err := s.CheckDiskWritable()
		return errors.Is(err, ErrDiskFull) && errors.Is(err, ErrServiceNotAvailable)
	})
	if !s.DiskFull() {
		t.Fatal("DiskFull is false while writes are refused")
	}
	if got := pullAll(t, s, "T", 0); len(got) != 1 || got[0] != "before" {
		t.Fatalf("reads during disk pressure: %v", got)
	}
	f.ClearDiskUsage()
	testutil.WaitFor(t, 5*time.Second, "disk guard clears", func() bool { return s.CheckDiskWritable() == nil })
}

func TestConfigValidateAndKeys(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	bad := []func(*Config){
		func(c *Config) { c.FlushDiskType = "SOMETIMES" },
		func(c *Config) { c.MappedFileSizeCommitLog = c.MaxMessageSize },
		func(c *Config) { c.MappedFileSizeConsumeQueue = 30 },
		func(c *Config) { c.StorePathRootDir = "" },
		func(c *Config) { c.DeleteWhen = "25" },
		func(c *Config) { c.FileReservedTime = 0 },
	}
	for i, mut := range bad {
		c := DefaultConfig()
		mut(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("case %d: %v", i, err)
		}
	}
	keys := map[string]bool{}
	rt := reflect.TypeOf(Config{})
	for i := 0; i < rt.NumField(); i++ {
		if k := rt.Field(i).Tag.Get("prop"); k != "" {
			keys[k] = true
		}
	}
	for _, k := range []string{"storePathRootDir", "storePathCommitLog", "mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue",
		"flushDiskType", "flushIntervalConsumeQueue", "maxMessageSize",
		"fileReservedTime", "deleteWhen", "diskMaxUsedSpaceRatio", "maxHashSlotNum", "maxIndexNum"} {
		if !keys[k] {
			t.Errorf("no field tagged prop:%q", k)
		}
	}
}

func TestStoreV2TopicAndIPv6ThroughStore(t *testing.T) {
	s := openTestStore(t, storeConfig(storage.NewFaultFS(1), "/s"), &segLog{})
	defer s.Close()
	topic := strings.Repeat("L", 200)
	m := coreMsg(topic, 0, "v2")
	m.StoreHost = netip.MustParseAddrPort("[::1]:10911")
	r := s.put(m)[0]
	id := wire.OffsetMsgID(m.StoreHost, r.CommitLogOffset)
	if len(id) != 56 {
		t.Fatalf("IPv6 msgId %q", id)
	}
	if got, err := s.LookMessageByOffset(r.CommitLogOffset); err != nil || got.MsgID() != id {
		t.Fatalf("look by offset: %v %v", got, err)
	}
	if got := pullAll(t, s, topic, 0); len(got) != 1 || got[0] != "v2" {
		t.Fatalf("pulled %v", got)
	}
}

func TestOpenRefusesBadRootOrNoRaftLog(t *testing.T) {
	f := storage.NewFaultFS(1)
	if _, err := Open(storeConfig(f, "/s")); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("opened without a Raft log: %v", err)
	}
	h, _ := f.OpenFile("/file", os.O_RDWR|os.O_CREATE, 0o644)
	h.Close()
	cfg := storeConfig(f, "/file")
	cfg.Raft = (&segLog{t: t}).hooks()
	if _, err := Open(cfg); err == nil {
		t.Fatal("opened a store on a file")
	}
}

// A crash while the checkpoint is rewritten can leave WriteFileAtomic's
// temporary file beside it; opening the store removes it, and nothing else.
func TestStoreOpenRemovesCheckpointTempLeftover(t *testing.T) {
	fsys := storage.NewFaultFS(1)
	if err := storage.MkdirAllDurable(fsys, "/s"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"checkpoint.tmp.k3x9", "checkpoint.tmp"} {
		f, err := fsys.OpenFile("/s/"+name, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
	}
	s := openTestStore(t, storeConfig(fsys, "/s"), &segLog{})
	defer s.Close()
	if _, err := fsys.Stat("/s/checkpoint.tmp.k3x9"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the checkpoint's temporary file is still there after the open: %v", err)
	}
	if _, err := fsys.Stat("/s/checkpoint.tmp"); err != nil {
		t.Fatalf("a file that is no temporary file of the checkpoint was touched: %v", err)
	}
}

// storeWithDamagedUnitSize stores five messages on T/0 and flips the given bit of
// the top byte of the third ConsumeQueue unit's size field on disk.
func storeWithDamagedUnitSize(t *testing.T, bit uint) *testStore {
	t.Helper()
	f := storage.NewFaultFS(6)
	s := openTestStore(t, storeConfig(f, "/s"), &segLog{})
	for i := 0; i < 5; i++ {
		s.put(coreMsg("T", 0, fmt.Sprintf("body-%d", i)))
	}
	s.clean.Close() // retention reads the queue files FlipBit changes
	cqFile := "/s/consumequeue/T/0/" + storage.FileName(0)
	if err := f.FlipBit(cqFile, 2*CQUnitSize+8, bit); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestStoreDamagedUnitSizeNeverSkipped: a ConsumeQueue unit whose size was
// damaged on disk (a high bit flipped) makes the pull that reaches it
// fail, like a damaged message: the consumer neither skips the message it
// points at nor gets a batch sized by the damaged field.
func TestStoreDamagedUnitSizeNeverSkipped(t *testing.T) {
	// Bit 6 of the size's top byte: the unit now claims 1 GiB more.
	s := storeWithDamagedUnitSize(t, 6)
	defer s.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r, err := s.GetMessage("g", "T", 0, 2, 32, nil)
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatalf("pull at the damaged unit: %v, %d messages, next %d; want an error", r.Status, len(r.Messages), r.NextBeginOffset)
	}
	if !errors.Is(err, ErrCorruptMessage) {
		t.Fatalf("pull at the damaged unit: %v, want ErrCorruptMessage", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<20 {
		t.Fatalf("pull allocated %d bytes for five small messages", n)
	}
	// The messages before it go out; the batch stops in front of it.
	r, err = s.GetMessage("g", "T", 0, 0, 32, nil)
	if err != nil || len(r.Messages) != 2 || r.NextBeginOffset != 2 {
		t.Fatalf("pull before the damaged unit: %v %d messages, next %d, %v", r.Status, len(r.Messages), r.NextBeginOffset, err)
	}
}

// TestStoreFlushedQueuesSurviveCrash: the directories a new topic's
// ConsumeQueues are made in are named durably, so a crash after a
// checkpoint keeps every queue the checkpoint covers, though nothing below
// it is re-applied (the Raft snapshot covers that part of the log).
func TestStoreFlushedQueuesSurviveCrash(t *testing.T) {
	checkpointedQueuesSurviveCrash(t, storage.NewFaultFS(7))
}

// checkpointedQueuesSurviveCrash puts content into a store on fsys,
// checkpoints, crashes the disk and checks the reopened store serves it.
func checkpointedQueuesSurviveCrash(t *testing.T, fsys *storage.FaultFS) {
	t.Helper()
	cfg := storeConfig(fsys, "/s")
	cfg.FlushIntervalConsumeQueue = time.Hour
	log := &segLog{}
	s := openTestStore(t, cfg, log)
	content := putContent(t, s)
	if err := s.writeCheckpoint(false); err != nil {
		t.Fatal(err)
	}
	crashed := fsys.Crash(storage.CrashOptions{})
	_ = s.Close() // its writes fail: the disk is gone

	cfg.FS = crashed
	cfg.Raft = log.hooks()
	reopened, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	content.check(t, &testStore{MessageStore: reopened, log: log})
}

// TestStoreNegativeUnitSizeNeverPanics: a unit whose size's sign bit was
// flipped on disk reads as a negative size. A pull reaching it fails as
// at any damaged unit, and one starting before it serves the messages in
// front: it must not panic sizing its buffer by the batch's sizes (a
// held pull's wake-up reads on the hold goroutine, where a panic ends the
// broker).
func TestStoreNegativeUnitSizeNeverPanics(t *testing.T) {
	s := storeWithDamagedUnitSize(t, 7)
	defer s.Close()
	if _, err := s.GetMessage("g", "T", 0, 2, 32, nil); !errors.Is(err, ErrCorruptMessage) {
		t.Fatalf("pull at the damaged unit: %v, want ErrCorruptMessage", err)
	}
	r, err := s.GetMessage("g", "T", 0, 0, 32, nil)
	if err != nil || len(r.Messages) != 2 || r.NextBeginOffset != 2 {
		t.Fatalf("pull before the damaged unit: %v %d messages, next %d, %v", r.Status, len(r.Messages), r.NextBeginOffset, err)
	}
}

// bodyFilter is a MessageFilter passing the messages whose body contains
// want, as a SQL92 filter decides on the stored message.
type bodyFilter struct{ want string }

func (bodyFilter) MatchTagsCode(int64) bool { return true }

func (f bodyFilter) MatchMessage(b []byte) bool { return bytes.Contains(b, []byte(f.want)) }

// TestStoreFilterReadBounded: a pull whose filter decides on the stored
// message (SQL92) reads at most maxFilterReadBytes of messages it rejects
// before it answers where it got to, instead of up to 16,000 messages
// whatever they weigh (gigabytes read and CRC-checked per pull of a
// rarely matching subscription on large messages); the pulls that follow
// go on from there and skip nothing.
func TestStoreFilterReadBounded(t *testing.T) {
	f := storage.NewFaultFS(6)
	s := openTestStore(t, storeConfig(f, "/s"), &segLog{})
	defer s.Close()
	const n, size = 200, 60 << 10
	for i := 0; i < n; i++ {
		s.put(coreMsg("T", 0, fmt.Sprintf("%d-", i)+strings.Repeat("x", size)))
	}
	s.put(coreMsg("T", 0, "the match"))
	filter := bodyFilter{"the match"}
	r, err := s.GetMessage("g", "T", 0, 0, 32, filter)
	if err != nil || r.Status != NoMatchedMessage || r.NextBeginOffset > maxFilterReadBytes/size+1 {
		t.Fatalf("first pull: %v, next %d, %v; want NO_MATCHED_MESSAGE after at most %d messages", r.Status, r.NextBeginOffset, err,
			maxFilterReadBytes/size+1)
	}
	for off := r.NextBeginOffset; ; off = r.NextBeginOffset {
		if r, err = s.GetMessage("g", "T", 0, off, 32, filter); err != nil {
			t.Fatal(err)
		}
		if r.Status == Found {
			break
		}
		if r.Status != NoMatchedMessage || r.NextBeginOffset <= off {
			t.Fatalf("pull at %d: %v, next %d", off, r.Status, r.NextBeginOffset)
		}
	}
	if len(r.QueueOffsets) != 1 || r.QueueOffsets[0] != n || r.NextBeginOffset != n+1 {
		t.Fatalf("found offsets %v, next %d; want [%d], %d", r.QueueOffsets, r.NextBeginOffset, n, n+1)
	}
}

// TestStoreOpenMakesLeftoverDirectoriesDurable: a kill between a mkdir and
// the sync of its parent leaves directories that exist but are not named
// durably, and MkdirAllDurable never syncs an existing directory's parent.
// Opening the store makes those names durable, so what is flushed under
// them afterwards survives a power cut: the root itself, and (after an
// unclean stop, which a kill leaves behind as the abort file) a topic's
// ConsumeQueue directory whose units lie below the checkpoint (nothing
// re-applies those).
func TestStoreOpenMakesLeftoverDirectoriesDurable(t *testing.T) {
	for _, left := range []string{"/s", "/s/consumequeue/TopicB/0"} {
		t.Run(left, func(t *testing.T) {
			fsys := storage.NewFaultFS(7)
			if left != "/s" {
				if err := storage.MkdirAllDurable(fsys, "/s"); err != nil {
					t.Fatal(err)
				}
				if err := storage.WriteFileAtomic(fsys, "/s/abort", nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := fsys.MkdirAll(left, 0o755); err != nil {
				t.Fatal(err)
			}
			checkpointedQueuesSurviveCrash(t, fsys)
		})
	}
}

// TestStoreOffsetNoFileHoldsMovesConsumer: an offset inside the queue's
// range whose ConsumeQueue file is gone is answered, as RocketMQ does, with
// the first offset of the next file that exists, so the consumer moves on
// instead of asking for the same offset forever; what lies beyond is served.
func TestStoreOffsetNoFileHoldsMovesConsumer(t *testing.T) {
	fsys := storage.NewFaultFS(3)
	cfg := storeConfig(fsys, "/s")
	cfg.MappedFileSizeConsumeQueue = 10 * CQUnitSize
	log := &segLog{}
	s := openTestStore(t, cfg, log)
	defer s.Close()
	for i := 0; i < 35; i++ {
		s.put(coreMsg("T", 0, fmt.Sprint("m", i)))
	}
	cq := s.ConsumeQueues().Get("T", 0)
	// Files [0,10) and [10,20) go while the queue's minimum still covers
	// them.
	if n, err := cq.mfq.DeleteBefore(20 * CQUnitSize); err != nil || n != 2 {
		t.Fatalf("DeleteBefore: %d %v", n, err)
	}
	for _, off := range []int64{0, 13} {
		r, err := s.GetMessage("g", "T", 0, off, 32, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != OffsetFoundNull || r.NextBeginOffset != 20 || !r.SkippedRemoved {
			t.Fatalf("pull at %d: %v next %d skipped %v, want OFFSET_FOUND_NULL next 20 skipped", off, r.Status, r.NextBeginOffset, r.SkippedRemoved)
		}
	}
	r, err := s.GetMessage("g", "T", 0, 20, 32, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != Found || len(r.Messages) != 15 || r.QueueOffsets[0] != 20 {
		t.Fatalf("pull at 20: %v with %d messages", r.Status, len(r.Messages))
	}
}
