package client

import (
	"bytes"
	"context"
	"sync"
	"testing"
)

// BenchmarkSendAsync measures SendAsync with 256 sends in flight against
// the in-process fake broker (1 KiB bodies); ns/op is per message.
//
//	go test ./client -run XXX -bench 'SendAsync' -benchtime 50000x
func BenchmarkSendAsync(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 1024)
	p := benchProducer(b, benchSetup(b), body)
	sem := make(chan struct{}, 256)
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		sem <- struct{}{}
		wg.Add(1)
		if err := p.SendAsync(context.Background(), NewMessage("Bench", body), func(_ *SendResult, err error) {
			if err != nil {
				b.Error(err)
			}
			<-sem
			wg.Done()
		}); err != nil {
			b.Fatal(err)
		}
	}
	wg.Wait()
}
