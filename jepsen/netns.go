package jepsen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// Network mode names, as the history and the verdict table print them.
const (
	ModeProxy = "loopback + userspace Raft proxy"
	ModeNetns = "network namespaces + iptables DROP"
)

// netnsPrefix starts every namespace the suite creates; the owner's PID
// follows it so a later run can tell a dead run's leftovers from a live
// run's namespaces.
const netnsPrefix = "rmqj"

// Fixed ports inside the namespaces: every member has its own address, so
// nothing needs to be allocated.
const (
	netnsNamesrvPort = 9876
	netnsBrokerPort  = 10911
	netnsRaftPort    = 20911
)

// NetnsSupport reports why the namespace mode cannot run here, or nil:
// it needs root, ip (iproute2) and iptables, and a probe namespace with
// an iptables rule must work (containers often lack CAP_NET_ADMIN).
func NetnsSupport() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: network namespaces need root", ErrUnsupported)
	}
	for _, tool := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%w: %s not installed (apt-get install -y iproute2 iptables)", ErrUnsupported, tool)
		}
	}
	probe := fmt.Sprintf("%s%d-probe", netnsPrefix, os.Getpid())
	if err := run("ip", "netns", "add", probe); err != nil {
		return fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	defer func() { _ = run("ip", "netns", "del", probe) }()
	if err := run("ip", "netns", "exec", probe, "iptables", "-w", "-A", "INPUT", "-s", "10.201.255.254", "-j", "DROP"); err != nil {
		return fmt.Errorf("%w: iptables in a namespace: %v", ErrUnsupported, err)
	}
	return nil
}

// run executes a command and folds its output into the error.
func run(argv ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// netnsNet is one run's private network: a namespace holding a bridge,
// one namespace per member (name server, nodes) with a veth whose other
// end is on the bridge, and a veth from the root namespace (where the
// suite's SDK clients run) to the bridge. Addresses are 10.201.<k>.0/24
// with k picked so no root-namespace route already covers it; nothing is
// routed anywhere else (the namespaces have no default route).
type netnsNet struct {
	log    *zap.Logger
	tag    string // netnsPrefix + PID
	subnet int
	hostIf string
	nsList []string // namespaces created, the bridge's first
}

// memberNS is the namespace of member m ("ns" for the name server, "n0",
// "n1", ...).
func (n *netnsNet) memberNS(m string) string { return n.tag + "-" + m }

// NodeIP is node i's address.
func (n *netnsNet) NodeIP(i int) string { return fmt.Sprintf("10.201.%d.%d", n.subnet, 10+i) }

// NamesrvIP is the name server's address.
func (n *netnsNet) NamesrvIP() string { return fmt.Sprintf("10.201.%d.5", n.subnet) }

// Wrap runs argv inside member m's namespace. ip netns exec execs the
// command in place (no fork), so the PID the suite signals is the
// broker's and the parent-death signal survives.
func (n *netnsNet) Wrap(m string, argv []string) []string {
	return append([]string{"ip", "netns", "exec", n.memberNS(m)}, argv...)
}

// pickSubnet returns a k in 1..254 such that 10.201.k.0/24 appears in no
// root-namespace route (another run or the host may use some).
func pickSubnet() (int, error) {
	out, err := exec.Command("ip", "-4", "route", "show", "table", "all").Output()
	if err != nil {
		return 0, fmt.Errorf("ip route: %w", err)
	}
	routes := string(out)
	start := os.Getpid()%200 + 20
	for d := 0; d < 254; d++ {
		k := (start+d)%254 + 1
		if !strings.Contains(routes, fmt.Sprintf("10.201.%d.", k)) {
			return k, nil
		}
	}
	return 0, errors.New("jepsen: no free 10.201.k.0/24 subnet")
}

// newNetns builds the network for a name server and nodes nodes. On any
// error everything made so far is removed.
func newNetns(nodes int, log *zap.Logger) (_ *netnsNet, err error) {
	cleanupNetnsLeftovers(log)
	k, err := pickSubnet()
	if err != nil {
		return nil, err
	}
	tag := fmt.Sprintf("%s%d", netnsPrefix, os.Getpid())
	n := &netnsNet{log: log, tag: tag, subnet: k, hostIf: fmt.Sprintf("rj%dh", os.Getpid())}
	defer func() {
		if err != nil {
			_ = n.Close()
		}
	}()
	br := n.memberNS("br")
	if err := n.addNS(br); err != nil {
		return nil, err
	}
	cmds := [][]string{
		{"ip", "-n", br, "link", "set", "lo", "up"},
		{"ip", "-n", br, "link", "add", "br0", "type", "bridge"},
		{"ip", "-n", br, "link", "set", "br0", "up"},
		// The suite's own end: root namespace, an address on the bridge.
		{"ip", "link", "add", n.hostIf, "type", "veth", "peer", "name", "host", "netns", br},
		{"ip", "addr", "add", fmt.Sprintf("10.201.%d.1/24", k), "dev", n.hostIf},
		{"ip", "link", "set", n.hostIf, "up"},
		{"ip", "-n", br, "link", "set", "host", "master", "br0", "up"},
	}
	for _, c := range cmds {
		if err := run(c...); err != nil {
			return nil, err
		}
	}
	members := map[string]string{"ns": n.NamesrvIP()}
	names := []string{"ns"}
	for i := 0; i < nodes; i++ {
		m := fmt.Sprintf("n%d", i)
		members[m] = n.NodeIP(i)
		names = append(names, m)
	}
	for _, m := range names {
		ns := n.memberNS(m)
		if err := n.addNS(ns); err != nil {
			return nil, err
		}
		tmp := fmt.Sprintf("rj%d%s", os.Getpid(), m)
		cmds := [][]string{
			{"ip", "-n", ns, "link", "set", "lo", "up"},
			{"ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", tmp, "netns", br},
			{"ip", "-n", ns, "addr", "add", members[m] + "/24", "dev", "eth0"},
			{"ip", "-n", ns, "link", "set", "eth0", "up"},
			{"ip", "-n", br, "link", "set", tmp, "master", "br0", "up"},
		}
		for _, c := range cmds {
			if err := run(c...); err != nil {
				return nil, err
			}
		}
	}
	log.Info("network namespaces up", zap.String("tag", tag), zap.Int("subnet", k))
	return n, nil
}

func (n *netnsNet) addNS(ns string) error {
	if err := run("ip", "netns", "add", ns); err != nil {
		return err
	}
	n.nsList = append(n.nsList, ns)
	return nil
}

// Drop makes node to discard every packet from node from (an INPUT rule
// in to's namespace). Dropping on input, not output, is what a lossy
// network does: an OUTPUT drop would fail the sender's syscalls with
// EPERM instead of leaving TCP to retransmit.
func (n *netnsNet) Drop(to, from int) error {
	return run("ip", "netns", "exec", n.memberNS(fmt.Sprintf("n%d", to)), "iptables", "-w", "-A", "INPUT", "-s", n.NodeIP(from), "-j", "DROP")
}

// Flush removes every rule from every node's namespace.
func (n *netnsNet) Flush(nodes int) error {
	var errs []error
	for i := 0; i < nodes; i++ {
		errs = append(errs, run("ip", "netns", "exec", n.memberNS(fmt.Sprintf("n%d", i)), "iptables", "-w", "-F", "INPUT"))
	}
	return errors.Join(errs...)
}

// Close deletes the namespaces (their veths and the bridge go with them)
// and the root namespace's veth end if it survived. Call it after the
// processes inside are dead: a namespace with live processes outlives its
// name.
func (n *netnsNet) Close() error {
	var errs []error
	for i := len(n.nsList) - 1; i >= 0; i-- {
		errs = append(errs, run("ip", "netns", "del", n.nsList[i]))
	}
	n.nsList = nil
	if linkExists(n.hostIf) {
		errs = append(errs, run("ip", "link", "del", n.hostIf))
	}
	return errors.Join(errs...)
}

func linkExists(name string) bool {
	return exec.Command("ip", "link", "show", name).Run() == nil
}

var (
	leftoverNS   = regexp.MustCompile(`^` + netnsPrefix + `(\d+)-\S+`)
	leftoverLink = regexp.MustCompile(`^\d+: (rj(\d+)h)[@:]`)
)

// pidAlive reports whether a process with this PID exists.
func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// cleanupNetnsLeftovers removes namespaces and root veths of runs whose
// process is gone (a run killed before its deferred cleanup). A live
// run's network is left alone.
func cleanupNetnsLeftovers(log *zap.Logger) {
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			m := leftoverNS.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			pid, _ := strconv.Atoi(m[1])
			if pid == os.Getpid() || pidAlive(pid) {
				continue
			}
			name := strings.Fields(line)[0]
			if err := run("ip", "netns", "del", name); err != nil {
				log.Warn("leftover namespace not removed", zap.String("ns", name), zap.Error(err))
			} else {
				log.Info("leftover namespace removed", zap.String("ns", name))
			}
		}
	}
	if out, err := exec.Command("ip", "-o", "link", "show").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			m := leftoverLink.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			pid, _ := strconv.Atoi(m[2])
			if pid == os.Getpid() || pidAlive(pid) {
				continue
			}
			_ = run("ip", "link", "del", m[1])
		}
	}
}
