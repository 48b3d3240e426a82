package broker

import (
	"sync/atomic"
	"testing"
)

// TestGoFuncDuringStop: a role change may start a goroutine while Shutdown
// waits for the tracked ones (the race detector reports wg.Add racing
// wg.Wait); once stopping, goFunc starts nothing.
func TestGoFuncDuringStop(t *testing.T) {
	c := &Controller{}
	var ran atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 1000 {
			c.goFunc(func() { ran.Add(1) })
		}
	}()
	c.stopTracked()
	<-done
	before := ran.Load()
	c.goFunc(func() { ran.Add(1) })
	c.stopTracked()
	if after := ran.Load(); after != before {
		t.Fatalf("goFunc after stopTracked ran its function (%d → %d)", before, after)
	}
}
