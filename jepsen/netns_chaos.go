package jepsen

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// HostIP is the root namespace's address on the bridge: where the suite's
// SDK clients (and its status and final-read requests) come from.
func (n *netnsNet) HostIP() string { return fmt.Sprintf("10.201.%d.1", n.subnet) }

// DropClients makes node i discard every packet from the root namespace
// (the suite's clients); HealAll's INPUT flush lifts it.
func (n *netnsNet) DropClients(i int) error {
	return run("ip", "netns", "exec", n.memberNS(fmt.Sprintf("n%d", i)), "iptables", "-w", "-A", "INPUT", "-s", n.HostIP(), "-j", "DROP")
}

// LossDelay makes node i lose lossPct % of the packets it sends and delay
// the rest by delayMs ± jitterMs (netem on its eth0). A kernel without
// sch_netem gets the loss alone, as an iptables statistic rule dropping that
// share of what node i receives. It returns what was applied.
func (n *netnsNet) LossDelay(i, lossPct, delayMs, jitterMs int) (string, error) {
	ns := n.memberNS(fmt.Sprintf("n%d", i))
	err := run("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", "eth0", "root", "netem",
		"loss", fmt.Sprintf("%d%%", lossPct), "delay", fmt.Sprintf("%dms", delayMs), fmt.Sprintf("%dms", jitterMs))
	if err == nil {
		return fmt.Sprintf("netem loss %d%% delay %dms±%dms", lossPct, delayMs, jitterMs), nil
	}
	if !strings.Contains(err.Error(), "qdisc kind is unknown") && !strings.Contains(err.Error(), "executable file not found") {
		return "", err
	}
	err = run("ip", "netns", "exec", ns, "iptables", "-w", "-A", "INPUT", "-m", "statistic", "--mode", "random",
		"--probability", fmt.Sprintf("%.2f", float64(lossPct)/100), "-j", "DROP")
	return fmt.Sprintf("loss %d%% of received packets (iptables statistic; no sch_netem in this kernel, so no delay)", lossPct), err
}

// ClearQdisc removes node i's root qdisc (none left is fine).
func (n *netnsNet) ClearQdisc(i int) error {
	err := run("ip", "netns", "exec", n.memberNS(fmt.Sprintf("n%d", i)), "tc", "qdisc", "del", "dev", "eth0", "root")
	if err != nil && (strings.Contains(err.Error(), "No such file") || strings.Contains(err.Error(), "Cannot delete qdisc with handle of zero") ||
		strings.Contains(err.Error(), "executable file not found")) {
		return nil
	}
	return err
}

// EnsureNetnsTools installs iproute2 and iptables with apt-get when ip or
// iptables is missing and the process is root on a system with apt-get, so
// a full run on a fresh machine gets the netns mode rather than the proxy
// fallback. It reports what it did on out; a failure is returned (the run
// then fails under RequireNetns, or falls back loudly).
func EnsureNetnsTools(out io.Writer) error {
	var missing []string
	for _, tool := range []string{"ip", "iptables", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: %s missing and not root (apt-get install -y iproute2 iptables)", ErrUnsupported, strings.Join(missing, ", "))
	}
	apt, err := exec.LookPath("apt-get")
	if err != nil {
		return fmt.Errorf("%w: %s missing and no apt-get: install iproute2 and iptables", ErrUnsupported, strings.Join(missing, ", "))
	}
	fmt.Fprintf(out, "raftmq-jepsen: %s missing: apt-get install -y iproute2 iptables\n", strings.Join(missing, ", "))
	install := func() error { return runLong(apt, "install", "-y", "-qq", "iproute2", "iptables") }
	if err := install(); err != nil {
		if uerr := runLong(apt, "update", "-qq"); uerr != nil {
			return fmt.Errorf("%w: apt-get update: %v", ErrUnsupported, uerr)
		}
		if err := install(); err != nil {
			return fmt.Errorf("%w: %v", ErrUnsupported, err)
		}
	}
	return nil
}

// runLong is run with a bound fit for a package installation.
func runLong(argv ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
