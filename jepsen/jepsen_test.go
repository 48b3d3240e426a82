package jepsen

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestShortProfile is the CI chaos run: a real name server and 3-node
// group as OS processes (the crashfs build, since the profile has
// crash-unsynced), kills, crashes that lose unsynced writes, pauses and
// partitions (ring included) for about 75 s, then heal, drain and check. It fails on any lost, phantom or inconsistent
// message, an idempotent duplicate or two leaders in a term.
// It runs only with RAFTMQ_CHAOS=1 or RAFTMQ_LONG=1: .ci/run runs it as a
// step of its own, so the README's test command stays short.
// RAFTMQ_SEED fixes the fault schedule; RAFTMQ_JEPSEN_SECONDS changes the
// duration; RAFTMQ_LONG=1 runs the full profile instead;
// RAFTMQ_JEPSEN_NETNS=1 asks for the network-namespace mode (root, ip and
// iptables; the proxy mode runs otherwise and the table says so);
// RAFTMQ_JEPSEN_GROUPS=2 runs two broker groups.
func TestShortProfile(t *testing.T) {
	p := Profiles()["short"]
	switch {
	case os.Getenv("RAFTMQ_LONG") == "1":
		p = Profiles()["full"]
	case os.Getenv("RAFTMQ_CHAOS") != "1":
		t.Skip("the chaos run (about 2 minutes): RAFTMQ_CHAOS=1 go test -race -run TestShortProfile ./jepsen/, as .ci/run does")
	}
	if s := os.Getenv("RAFTMQ_JEPSEN_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("RAFTMQ_JEPSEN_SECONDS: %v", err)
		}
		p.Duration = time.Duration(n) * time.Second
	}
	if os.Getenv("RAFTMQ_JEPSEN_GROUPS") == "2" {
		p.Groups = 2
	}
	seed := time.Now().UnixNano()
	if s := os.Getenv("RAFTMQ_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("RAFTMQ_SEED: %v", err)
		}
	}
	dir := os.Getenv("RAFTMQ_JEPSEN_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	t.Logf("profile %s, %v, seed %d (RAFTMQ_SEED=%d reproduces the schedule), dir %s", p.Name, p.Duration, seed, seed, dir)
	netns := os.Getenv("RAFTMQ_JEPSEN_NETNS") == "1"
	res, err := Run(context.Background(), Options{Profile: p, Seed: seed, Dir: dir, Log: zap.NewNop(), Netns: netns})
	if res != nil {
		t.Log("\n" + res.Table)
	}
	if err != nil {
		t.Fatal(err)
	}
}
