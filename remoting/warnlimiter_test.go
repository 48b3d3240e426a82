package remoting

import (
	"testing"
	"time"
)

func TestWarnLimiter(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	l := WarnLimiter{Now: func() time.Time { return now }}
	if ok, held := l.Allow(); !ok || held != 0 {
		t.Fatalf("first warning: ok=%v held=%d, want true 0", ok, held)
	}
	for i := range 3 {
		now = now.Add(WarnInterval / 4)
		if ok, _ := l.Allow(); ok {
			t.Fatalf("warning %d within the interval passed", i+2)
		}
	}
	now = now.Add(WarnInterval / 4)
	if ok, held := l.Allow(); !ok || held != 3 {
		t.Fatalf("after the interval: ok=%v held=%d, want true 3", ok, held)
	}
	if ok, _ := l.Allow(); ok {
		t.Fatal("a second warning at the same instant passed")
	}
}
