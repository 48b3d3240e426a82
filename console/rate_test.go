package console

import (
	"testing"
	"time"
)

// A rate is shown as the current one. After a spell nobody polled, the
// first collection's rate was the average over the whole spell (an hour
// of traffic divided by an hour), not the -1 the API documents for "no
// recent collection to compare with".
func TestRateNeedsARecentSample(t *testing.T) {
	now := time.Now()
	k := queueKey{topic: "T", broker: "b", queue: 0}
	for _, tc := range []struct {
		ago  time.Duration
		want float64
	}{
		{time.Second, 100},
		{maxRateSpan, 100 / maxRateSpan.Seconds()},
		{time.Hour, -1},
	} {
		prev := map[queueKey]sample{k: {at: now.Add(-tc.ago), offset: 0}}
		if got := rate(prev, k, now, 100); got != tc.want {
			t.Errorf("100 messages since a sample %v ago: rate %v, want %v", tc.ago, got, tc.want)
		}
	}
	if got := rate(nil, k, now, 100); got != -1 {
		t.Errorf("no sample: rate %v, want -1", got)
	}
}
