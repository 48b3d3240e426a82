package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// The brokers' share of a bench run's CPU: every member the name server
// lists is asked for its runtime info (GET_BROKER_RUNTIME_INFO) before and
// after the run, and the growth of its process CPU time
// (wire.RuntimeProcessCPUMicros) is divided by the messages acknowledged.
// This works against any cluster the bench can reach, local or not, and
// charges the whole process: with other traffic on the brokers the figure
// includes it. Members that answer the same wire.RuntimeProcessInstance
// share one OS process (`raftmq dev`): their CPU is reported once.

// brokerCPU is one broker process's line of the summary.
type brokerCPU struct {
	// Members are "brokerName/role@addr" for each member the process
	// serves (several under `raftmq dev`).
	Members []string `json:"members"`
	// Role is LEADER or FOLLOWER as the member said after the run (with
	// "→" when it changed during the run); "shared" for a process serving
	// several members.
	Role string `json:"role"`
	// CPUus is the process's CPU time (user+system) per message.
	CPUus float64 `json:"cpuUsPerMsg"`
	// Shared is true when the members share one process.
	Shared bool `json:"sharedProcess,omitempty"`
}

// cpuSample is one member's runtime info at a moment.
type cpuSample struct {
	name, addr string
	leader     bool
	cpuUs      int64
	instance   string
}

// brokerCPUProbe asks the cluster's members for their process CPU time.
type brokerCPUProbe struct {
	a  *client.Admin
	rc *remoting.Client
}

func newBrokerCPUProbe(f *benchFlags, log *zap.Logger) (*brokerCPUProbe, error) {
	creds, err := f.acl.credentials()
	if err != nil {
		return nil, err
	}
	a, err := client.NewAdmin(client.NameServers(strings.Split(f.namesrv, ";")...), client.WithLogger(log), f.tls.clientOpt(),
		client.WithCredentials(creds.AccessKey, creds.SecretKey))
	if err != nil {
		return nil, err
	}
	rcfg := remoting.DefaultClientConfig()
	if rcfg.TLS, err = f.tls.remoting(); err != nil {
		_ = a.Close(context.Background())
		return nil, err
	}
	rc := remoting.NewClient(rcfg, log)
	if !creds.IsZero() {
		rc.AddHook(remoting.SigningHook(creds))
	}
	return &brokerCPUProbe{a: a, rc: rc}, nil
}

func (p *brokerCPUProbe) close() {
	_ = p.a.Close(context.Background())
	_ = p.rc.Close()
}

// sample returns the runtime CPU of every registered member, keyed by
// address; members that do not answer, or answer without the key (an older
// broker), are left out.
func (p *brokerCPUProbe) sample(ctx context.Context) map[string]cpuSample {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ci, err := p.a.ClusterInfo(ctx)
	if err != nil {
		return nil
	}
	out := map[string]cpuSample{}
	for name, bd := range ci.BrokerAddrTable {
		for _, addr := range bd.BrokerAddrs {
			resp, err := p.rc.InvokeSync(ctx, addr, remoting.NewRequest(remoting.RequestGetBrokerRuntimeInfo, nil, nil))
			if err != nil || remoting.ResponseError(addr, resp) != nil {
				continue
			}
			var kv wire.KVTable
			if json.Unmarshal(resp.Body, &kv) != nil {
				continue
			}
			us, err := strconv.ParseInt(kv.Table[wire.RuntimeProcessCPUMicros], 10, 64)
			if err != nil {
				continue
			}
			out[addr] = cpuSample{name: name, addr: addr, leader: kv.Table["raftLeader"] == "true",
				cpuUs: us, instance: kv.Table[wire.RuntimeProcessInstance]}
		}
	}
	return out
}

// brokerCPUPerMsg turns two samples into one line per process: members
// answering in both samples from the same process instance; a member that
// restarted between them is left out.
func brokerCPUPerMsg(before, after map[string]cpuSample, msgs int64) []brokerCPU {
	if msgs <= 0 {
		return nil
	}
	role := func(leader bool) string {
		if leader {
			return "LEADER"
		}
		return "FOLLOWER"
	}
	type proc struct {
		line  brokerCPU
		delta int64
	}
	procs := map[string]*proc{}
	for _, addr := range slices.Sorted(maps.Keys(after)) {
		a := after[addr]
		b, ok := before[addr]
		if !ok || b.instance != a.instance {
			continue
		}
		r := role(a.leader)
		if a.leader != b.leader {
			r = role(b.leader) + "→" + r
		}
		p := procs[a.instance]
		if p == nil {
			p = &proc{line: brokerCPU{Role: r}, delta: a.cpuUs - b.cpuUs}
			procs[a.instance] = p
		} else {
			p.line.Shared, p.line.Role = true, "shared"
		}
		p.line.Members = append(p.line.Members, fmt.Sprintf("%s/%s@%s", a.name, r, a.addr))
	}
	out := make([]brokerCPU, 0, len(procs))
	for _, p := range procs {
		p.line.CPUus = float64(p.delta) / float64(msgs)
		out = append(out, p.line)
	}
	// Leaders (after the run) first, then by first member.
	slices.SortFunc(out, func(x, y brokerCPU) int {
		if lx, ly := strings.HasSuffix(x.Role, "LEADER"), strings.HasSuffix(y.Role, "LEADER"); lx != ly {
			if lx {
				return -1
			}
			return 1
		}
		return strings.Compare(x.Members[0], y.Members[0])
	})
	return out
}

// brokersCPUText is the summary's broker CPU line ("" when no member
// answered).
func brokersCPUText(bs []brokerCPU, clientUs float64) string {
	if len(bs) == 0 {
		return ""
	}
	var parts []string
	total := 0.0
	for _, b := range bs {
		total += b.CPUus
		if b.Shared {
			parts = append(parts, fmt.Sprintf("one process serving %d members (%s; raftmq dev: counted once) %.1f",
				len(b.Members), strings.Join(b.Members, ", "), b.CPUus))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.1f", b.Members[0], b.CPUus))
	}
	return fmt.Sprintf("broker CPU µs/msg: %s; brokers %.1f + client %.1f = %.1f µs/msg",
		strings.Join(parts, ", "), total, clientUs, total+clientUs)
}
