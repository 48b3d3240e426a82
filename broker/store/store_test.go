package store

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"go.uber.org/goleak"

	"github.com/raftmq/raftmq/storage"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// coreConfig is a small-footprint store config for tests.
func coreConfig(fsys storage.FS, root string, mode FlushDiskType) Config {
	c := DefaultConfig()
	c.StorePathRootDir = root
	c.FS = fsys
	c.FlushDiskType = mode
	c.MappedFileSizeCommitLog = 1 << 20
	c.MaxMessageSize = 64 << 10
	c.MappedFileSizeConsumeQueue = 1000 * CQUnitSize
	c.MaxHashSlotNum = 1000
	c.MaxIndexNum = 4000
	c.FlushIntervalCommitLog = 20 * time.Millisecond
	c.FlushIntervalConsumeQueue = 50 * time.Millisecond
	c.CleanResourceInterval = 50 * time.Millisecond
	return c
}

func openCore(t *testing.T, cfg Config) *MessageStore {
	t.Helper()
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitDispatched waits until every appended message is in its ConsumeQueue.
func waitDispatched(t *testing.T, s *MessageStore) {
	t.Helper()
	testutil.WaitFor(t, 5*time.Second, "dispatch catches up", func() bool {
		return s.DispatchedOffset() >= s.CommitLog().MaxOffset()
	})
}

// pullAll reads a whole queue and returns the bodies in queue order.
func pullAll(t *testing.T, s *MessageStore, topic string, qid int32) []string {
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

func TestStorePutGetReopen(t *testing.T) {
	for _, c := range allFS() {
		for _, mode := range []FlushDiskType{SyncFlush, AsyncFlush} {
			t.Run(c.name+"/"+string(mode), func(t *testing.T) {
				fsys, dir := c.mk(t)
				cfg := coreConfig(fsys, dir, mode)
				s := openCore(t, cfg)
				want := map[int32][]string{}
				var ids []string
				for i := 0; i < 300; i++ {
					q := int32(i % 3)
					body := fmt.Sprintf("m-%d-%s", i, strings.Repeat("z", i*7))
					m := coreMsg("TopicA", q, body)
					r, err := s.PutMessage(m)
					if err != nil || r.Status != PutOK {
						t.Fatalf("put %d: %v %v", i, r.Status, err)
					}
					if r.QueueOffset != int64(len(want[q])) {
						t.Fatalf("put %d: queue offset %d, want %d", i, r.QueueOffset, len(want[q]))
					}
					want[q] = append(want[q], body)
					ids = append(ids, r.MsgID)
				}
				batch := []*Message{coreMsg("TopicB", 0, "b0"), coreMsg("TopicB", 0, "b1"), coreMsg("TopicB", 0, "b2")}
				r, err := s.PutMessages(batch)
				if err != nil || len(r.Appended) != 3 || strings.Count(r.MsgID, ",") != 2 {
					t.Fatalf("batch: %+v %v", r, err)
				}
				waitDispatched(t, s)
				check := func(s *MessageStore) {
					for q, bodies := range want {
						if got := pullAll(t, s, "TopicA", q); !reflect.DeepEqual(got, bodies) {
							t.Fatalf("queue %d: got %d messages, want %d", q, len(got), len(bodies))
						}
					}
					if got := pullAll(t, s, "TopicB", 0); !reflect.DeepEqual(got, []string{"b0", "b1", "b2"}) {
						t.Fatalf("batch queue: %v", got)
					}
					_, off, err := ParseOffsetMsgID(ids[42])
					if err != nil {
						t.Fatal(err)
					}
					m, err := s.LookMessageByOffset(off)
					if err != nil || !strings.HasPrefix(string(m.Body), "m-42-") || m.MsgID() != ids[42] {
						t.Fatalf("look by offset: %v %v", m, err)
					}
				}
				check(s)
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				if ok, _ := fileExists(fsys, s.abortPath()); ok {
					t.Fatal("abort file left after a clean close")
				}
				s = openCore(t, cfg)
				defer s.Close()
				if s.Recovery().Abnormal {
					t.Fatal("clean shutdown recovered as abnormal")
				}
				check(s)
				// Appends continue with the right queue offsets.
				r, err = s.PutMessage(coreMsg("TopicA", 0, "after"))
				if err != nil || r.QueueOffset != int64(len(want[0])) {
					t.Fatalf("put after reopen: %+v %v", r, err)
				}
			})
		}
	}
}

func TestStoreGetMessageStatuses(t *testing.T) {
	s := openCore(t, coreConfig(storage.NewFaultFS(1), "/s", SyncFlush))
	defer s.Close()
	r, _ := s.GetMessage("g", "Nope", 0, 0, 32, nil)
	if r.Status != NoMatchedLogicQueue {
		t.Fatalf("unknown queue: %v", r.Status)
	}
	for i := 0; i < 10; i++ {
		m := coreMsg("T", 0, fmt.Sprint(i))
		m.Properties["TAGS"] = []string{"A", "B"}[i%2]
		if _, err := s.PutMessage(m); err != nil {
			t.Fatal(err)
		}
	}
	waitDispatched(t, s)
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
		"flushDiskType", "flushIntervalCommitLog", "flushCommitLogLeastPages", "syncFlushTimeout", "maxMessageSize",
		"fileReservedTime", "deleteWhen", "diskMaxUsedSpaceRatio", "maxHashSlotNum", "maxIndexNum"} {
		if !keys[k] {
			t.Errorf("no field tagged prop:%q", k)
		}
	}
}

func TestStoreV2TopicAndIPv6ThroughStore(t *testing.T) {
	cfg := coreConfig(storage.NewFaultFS(1), "/s", AsyncFlush)
	cfg.StoreHost = netip.MustParseAddrPort("[::1]:10911")
	s := openCore(t, cfg)
	defer s.Close()
	topic := strings.Repeat("L", 200)
	r, err := s.PutMessage(coreMsg(topic, 0, "v2"))
	if err != nil || len(r.MsgID) != 56 {
		t.Fatalf("put: %+v %v", r, err)
	}
	waitDispatched(t, s)
	if got := pullAll(t, s, topic, 0); len(got) != 1 || got[0] != "v2" {
		t.Fatalf("pulled %v", got)
	}
}

func TestOpenRefusesBadRoot(t *testing.T) {
	f := storage.NewFaultFS(1)
	h, _ := f.OpenFile("/file", os.O_RDWR|os.O_CREATE, 0o644)
	h.Close()
	if _, err := Open(coreConfig(f, "/file", SyncFlush)); err == nil {
		t.Fatal("opened a store on a file")
	}
}
