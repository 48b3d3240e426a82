package client

import (
	"context"
	"sync"
)

// waitGroup waits for wg, or until ctx ends and then returns ctx's error.
// Close uses it so that a listener or request that ignores cancellation
// cannot hold Close past the caller's deadline: the goroutines still
// running have been cancelled and end on their own, as does the one this
// starts to wait for them.
func waitGroup(ctx context.Context, wg *sync.WaitGroup) error {
	if ctx.Done() == nil {
		wg.Wait()
		return nil
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		select {
		case <-done: // finished as ctx ended: nothing was given up
			return nil
		default:
			return ctx.Err()
		}
	}
}
