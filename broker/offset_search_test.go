package broker

import (
	"strconv"
	"testing"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestSearchOffsetBoundaryType: SEARCH_OFFSET_BY_TIMESTAMP answers by the
// request's boundaryType as RocketMQ 5 does (DefaultMQAdminExt's
// searchLowerBoundaryOffset / searchUpperBoundaryOffset): LOWER (the
// default) the first message stored at or after the time, UPPER the last
// one stored at or before it, so a range query [from, to] counts the
// messages of the range.
func TestSearchOffsetBoundaryType(t *testing.T) {
	pc := startRealCluster(t, nil)
	l := pc.leader()
	addr := pc.nodes[l].Addr()
	pc.createTopic(addr, "BT", 1)
	for i := range 5 {
		if r := pc.call(addr, remoting.RequestSendMessage, sendExt("BT", 0, ""), []byte("m"+strconv.Itoa(i))); r.Code != remoting.ResponseSuccess {
			t.Fatalf("send: %d %s", r.Code, r.Remark)
		}
	}
	res, err := pc.groups[l].Store().GetMessage("", "BT", 0, 0, 5, nil)
	if err != nil || len(res.Messages) != 5 {
		t.Fatalf("read back: %d messages, %v", len(res.Messages), err)
	}
	var times []int64
	for _, b := range res.Messages {
		m, _, err := wire.DecodeMessage(b, false)
		if err != nil {
			t.Fatal(err)
		}
		times = append(times, m.StoreTimestamp)
	}
	lower := func(ts int64) int64 { // first stored at or after ts; the queue's end if none
		for i, st := range times {
			if st >= ts {
				return int64(i)
			}
		}
		return int64(len(times))
	}
	upper := func(ts int64) int64 { // last stored at or before ts; the first if none
		for i := len(times) - 1; i >= 0; i-- {
			if times[i] <= ts {
				return int64(i)
			}
		}
		return 0
	}
	search := func(ts int64, boundary string) int64 {
		ext := map[string]string{"topic": "BT", "queueId": "0", "timestamp": strconv.FormatInt(ts, 10)}
		if boundary != "" {
			ext["boundaryType"] = boundary
		}
		r := pc.call(addr, remoting.RequestSearchOffsetByTimestamp, ext, nil)
		off, err := strconv.ParseInt(r.ExtFields["offset"], 10, 64)
		if r.Code != remoting.ResponseSuccess || err != nil {
			t.Fatalf("search %d %s: %d %q offset %q", ts, boundary, r.Code, r.Remark, r.ExtFields["offset"])
		}
		return off
	}
	for _, ts := range []int64{times[0] - 1, times[0], times[2], times[4], times[4] + 1} {
		for _, b := range []string{"", "LOWER", "lower"} {
			if got, want := search(ts, b), lower(ts); got != want {
				t.Errorf("search %d boundaryType %q: offset %d, want %d (store times %v)", ts, b, got, want, times)
			}
		}
		for _, b := range []string{"UPPER", "upper"} {
			if got, want := search(ts, b), upper(ts); got != want {
				t.Errorf("search %d boundaryType %q: offset %d, want %d (store times %v)", ts, b, got, want, times)
			}
		}
	}
}
