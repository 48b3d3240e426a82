package jepsen

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"reflect"
	"sort"
	"strconv"
	"testing"
	"time"
)

// TestRingBlocksThreeNodes pins the 3-node ring: n0 hears n1 (not n2), n1
// hears n2 (not n0), n2 hears n0 (not n1).
func TestRingBlocksThreeNodes(t *testing.T) {
	got := RingBlocks([]int{0, 1, 2})
	sort.Slice(got, func(i, j int) bool { return got[i][1] < got[j][1] })
	want := [][2]int{{2, 0}, {0, 1}, {1, 2}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("blocked {from,to}: %v, want %v", got, want)
	}
	// Another ring order is the other orientation.
	got = RingBlocks([]int{0, 2, 1})
	sort.Slice(got, func(i, j int) bool { return got[i][1] < got[j][1] })
	want = [][2]int{{1, 0}, {2, 1}, {0, 2}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("order 0,2,1: %v, want %v", got, want)
	}
}

// TestRingBlocksMajorities checks the defining property for 3 to 7 nodes:
// every node hears a majority (itself included) and no two nodes hear
// the same set.
func TestRingBlocksMajorities(t *testing.T) {
	for n := 3; n <= 7; n++ {
		order := make([]int, n)
		for i := range order {
			order[i] = 10 + (i*(n-1))%n // other ids, reversed ring order
		}
		blocked := map[[2]int]bool{}
		for _, b := range RingBlocks(order) {
			if b[0] == b[1] {
				t.Fatalf("n=%d: a node blocked from itself: %v", n, b)
			}
			blocked[b] = true
		}
		seen := map[string]int{}
		for _, to := range order {
			var hears []int
			for _, from := range order {
				if !blocked[[2]int{from, to}] {
					hears = append(hears, from)
				}
			}
			if len(hears) != n/2+1 {
				t.Fatalf("n=%d: node %d hears %v, want a bare majority (%d)", n, to, hears, n/2+1)
			}
			sort.Ints(hears)
			k := fmt.Sprint(hears)
			if other, dup := seen[k]; dup {
				t.Fatalf("n=%d: nodes %d and %d hear the same majority %s", n, other, to, k)
			}
			seen[k] = to
		}
		if n == 5 {
			// Odd n ≥ 5: centred windows make every cut two-way.
			for b := range blocked {
				if !blocked[[2]int{b[1], b[0]}] {
					t.Fatalf("n=5: %d→%d blocked one way only", b[0], b[1])
				}
			}
		}
	}
}

// healNoting is a nemesis whose heal reports what it waited for and ends
// the schedule.
type healNoting struct{ stop context.CancelFunc }

func (healNoting) Name() string                                 { return "heal-noting" }
func (healNoting) Inject(context.Context, *Env) (string, error) { return "injected", nil }
func (h healNoting) Heal(context.Context, *Env) error           { h.stop(); return errors.New("heal failed") }
func (healNoting) HealDetail() string                           { return "waited 5 ms" }

// TestScheduleAddsHealDetail: a nemesis's heal account lands in its
// window's detail, next to the heal's error.
func TestScheduleAddsHealDetail(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &recorder{h: History{Start: time.Now()}}
	env := &Env{Cluster: &Cluster{}, Rand: rand.New(rand.NewSource(1))}
	Schedule{Nemeses: []Nemesis{healNoting{stop: cancel}}, Quiet: time.Millisecond, Hold: time.Millisecond}.run(ctx, env, rec)
	f := rec.snapshot().Faults
	if len(f) != 1 || f[0].Detail != "injected; heal: waited 5 ms" || f[0].HealNote != "heal failed" {
		t.Fatalf("windows %+v", f)
	}
}

// TestAwaitTraced: fsync-eio records a leader's fault window only once
// strace holds the process.
func TestAwaitTraced(t *testing.T) {
	sleeper := exec.Command("sleep", "30")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() }() // runs last
	pid := sleeper.Process.Pid
	if err := awaitTraced(context.Background(), pid, 50*time.Millisecond); err == nil {
		t.Fatal("an untraced process reported traced")
	}
	strace, err := exec.LookPath("strace")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("strace not installed (.ci/run installs it)")
		}
		t.Skip("strace not installed")
	}
	tracer := exec.Command(strace, append(fsyncEIOTrace(""), "-p", strconv.Itoa(pid))...)
	if err := tracer.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = sleeper.Process.Kill() // strace ends with its tracee
		waitOrKill(tracer, 5*time.Second)
	}()
	if err := awaitTraced(context.Background(), pid, 5*time.Second); err != nil {
		t.Fatalf("process under strace -p: %v", err)
	}
}
