package broker

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
)

// TestDeletedTopicNotRoutedAgain: DELETE_TOPIC_IN_BROKER is answered only
// once no registration carrying the topic can still reach a name server.
// The admin deletes the topic from the name servers when the brokers have
// answered (mqadmin deleteTopic), and a name server keeps what a
// registration routes until one that changes it: a round begun before the
// deletion and applied after the name server's removed the topic again
// for good, and with autoCreateTopicEnable the next send re-created it.
// Registrations here reach the name server late (a slow link) and follow
// each other without a pause, so one is always under way.
func TestDeletedTopicNotRoutedAgain(t *testing.T) {
	t.Parallel()
	tc, _ := startFakeProc(t, func(c *BrokerConfig) {
		// Rounds last longer than the period (at least 1 s): each
		// begins as the last ends.
		c.NamesrvAddr = delayingProxy(t, c.NamesrvAddr, 1500*time.Millisecond)
		c.RegisterNameServerPeriod = time.Second
	})
	addr := tc.nodes[0].Addr()
	tc.waitRoute("TBW102")
	for _, topic := range []string{"DelA"} {
		if resp := tc.tryCreateTopic(addr, topic, 4); resp.Code != 0 {
			t.Fatalf("create %s: %d %s", topic, resp.Code, resp.Remark)
		}
		tc.waitRoute(topic)
		if resp := tc.call(addr, remoting.RequestDeleteTopicInBroker, map[string]string{"topic": topic}, nil); resp.Code != 0 {
			t.Fatalf("delete %s: %d %s", topic, resp.Code, resp.Remark)
		}
		tc.ns.Routes().DeleteTopic(topic, "") // as the admin does next
		// Every round under way at the deletion has ended once two more
		// have begun and ended.
		reg := tc.nodes[0].reg
		reg.mu.Lock()
		target := reg.started + 2
		reg.mu.Unlock()
		testutil.WaitFor(t, 10*time.Second, "two more registration rounds", func() bool {
			reg.mu.Lock()
			defer reg.mu.Unlock()
			return reg.finished >= target
		})
		if rd := tc.ns.Routes().PickupTopicRouteData(topic); rd != nil {
			t.Fatalf("deleted topic %s routed again: %+v", topic, rd.QueueDatas)
		}
	}
}

// delayingProxy forwards TCP connections to target, holding every byte
// sent towards target for delay (answers pass at once), and returns its
// address. Its goroutines end with the test.
func delayingProxy(t *testing.T, target string, delay time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		close(done)
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				_ = in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			type chunk struct {
				at time.Time
				b  []byte
			}
			ch := make(chan chunk, 1024)
			wg.Add(3)
			go func() {
				defer wg.Done()
				defer close(ch)
				for {
					b := make([]byte, 64<<10)
					n, err := in.Read(b)
					if n > 0 {
						select {
						case ch <- chunk{time.Now().Add(delay), b[:n]}:
						case <-done:
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
			go func() {
				defer wg.Done()
				defer func() { _ = out.Close() }()
				for c := range ch {
					select {
					case <-time.After(time.Until(c.at)):
					case <-done:
						return
					}
					if _, err := out.Write(c.b); err != nil {
						return
					}
				}
			}()
			go func() {
				defer wg.Done()
				_, _ = io.Copy(in, out)
				_ = in.Close()
			}()
		}
	}()
	return ln.Addr().String()
}
