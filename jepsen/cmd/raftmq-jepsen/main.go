// Command raftmq-jepsen runs the raftmq chaos suite: a name server and a
// 3-node broker group as real processes, SDK producers and consumers,
// nemeses on a schedule, then a checker and a report (verdict.txt,
// history.json, timeline.png) under a directory it prints.
//
//	go run ./jepsen/cmd/raftmq-jepsen -profile full
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/jepsen"
)

func main() {
	os.Exit(run())
}

func run() int {
	profile := flag.String("profile", "short", "profile: short (about 75 s: kills, crash-unsynced, pauses, partitions), full (30 min, every default nemesis, 400 sends/s) or saturation (full's faults under an unpaced closed loop)")
	seed := flag.Int64("seed", time.Now().UnixNano(), "seed of the fault schedule")
	dir := flag.String("dir", "", "run directory (default: a new directory under the system temp dir)")
	duration := flag.Duration("duration", 0, "override the profile's duration")
	nemeses := flag.String("nemeses", "", "comma-separated nemeses overriding the profile's (known: "+strings.Join(jepsen.NemesisNames(), ", ")+")")
	verbose := flag.Bool("v", false, "log the suite's own actions")
	netns := flag.Bool("netns", false, "run every process in its own network namespace, partitions as iptables DROP rules (root, ip, iptables); default on for full and saturation, where an unavailable netns mode is an error unless -allow-proxy")
	allowProxy := flag.Bool("allow-proxy", false, "full and saturation: fall back to the loopback proxy mode (loudly) when the netns mode is unavailable")
	groups := flag.Int("groups", 1, "broker groups (1 or 2) of 3 nodes each; producers spread over all")
	audit := flag.Duration("audit", -1, "override the period of the cross-replica ConsumeQueue audit (0: none; default: the profile's, 5s)")
	flag.Parse()

	p, ok := jepsen.Profiles()[*profile]
	if !ok {
		fmt.Fprintf(os.Stderr, "raftmq-jepsen: %v: %q\n", jepsen.ErrUnknownProfile, *profile)
		return 2
	}
	if *duration > 0 {
		p.Duration = *duration
	}
	if *audit >= 0 {
		p.AuditInterval = *audit
	}
	if *groups < 1 || *groups > 2 {
		fmt.Fprintln(os.Stderr, "raftmq-jepsen: -groups must be 1 or 2")
		return 2
	}
	p.Groups = *groups
	if *nemeses != "" {
		p.Nemeses = strings.Split(*nemeses, ",")
	}
	// Full and saturation runs need namespaces for partition-clients and
	// net-loss-delay: on unless -netns=false, tools installed when missing,
	// and no silent fallback.
	netnsSet := false
	flag.Visit(func(f *flag.Flag) { netnsSet = netnsSet || f.Name == "netns" })
	longRun := p.Name == "full" || p.Name == "saturation"
	if longRun && !netnsSet {
		*netns = true
	}
	requireNetns := longRun && *netns && !*allowProxy
	if *netns {
		if err := jepsen.EnsureNetnsTools(os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "raftmq-jepsen:", err)
		}
	}
	if longRun && !*netns {
		fmt.Fprintln(os.Stderr, "raftmq-jepsen: WARNING: -netns=false: proxy mode; partition-clients and net-loss-delay will not be injected")
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "raftmq-jepsen-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "raftmq-jepsen:", err)
			return 1
		}
		*dir = d
	}
	log := zap.NewNop()
	if *verbose {
		log, _ = zap.NewDevelopment()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Printf("raftmq-jepsen: profile %s, %v, nemeses %s, seed %d, run directory %s\n", p.Name, p.Duration, strings.Join(p.Nemeses, ","), *seed, *dir)
	res, err := jepsen.Run(ctx, jepsen.Options{Profile: p, Seed: *seed, Dir: *dir, Log: log, Netns: *netns, RequireNetns: requireNetns})
	if res != nil {
		fmt.Print(res.Table)
		fmt.Printf("report: %s (verdict.txt, history.json, timeline.png)\n", filepath.Join(res.ReportDir))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "raftmq-jepsen:", err)
		if errors.Is(err, jepsen.ErrInvalid) {
			return 1
		}
		return 3
	}
	return 0
}
