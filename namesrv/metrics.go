package namesrv

import (
	"net"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/ha"
	"github.com/raftmq/raftmq/internal/httpmon"
	"github.com/raftmq/raftmq/remoting"
)

// Monitoring HTTP on metricsPort (listenPort+3 by default): /metrics with
// a registry per name server, /health (200 once serving, 503 while
// starting or stopping), /debug/pprof/.

const metricsNamespace = "raftmq_namesrv"

// nsHealth is /health's JSON.
type nsHealth struct {
	State   string `json:"state"`
	Brokers int    `json:"brokers"`
}

// newMonitor builds the registry and, unless metricsPort is -1 (or the
// name server listens on an ephemeral port and no metricsPort is given),
// the HTTP server.
func (n *NameServer) newMonitor() {
	reg := prometheus.NewRegistry()
	n.requests = httpmon.NewRequestMetrics(reg, metricsNamespace)
	gauge := func(name, help string, f func() float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: name, Help: help}, f))
	}
	gauge("brokers", "Broker addresses in the route tables.", func() float64 { return float64(n.brokerCount()) })
	gauge("topics", "Topics in the route tables.", func() float64 { return float64(len(n.routes.AllTopics())) })
	gauge("gossip_live_brokers", "Broker nodes alive in the gossip pool (0 without gossipEnable).", func() float64 {
		g := n.gossip.Load()
		if g == nil {
			return 0
		}
		k := 0
		for _, m := range g.LiveMembers() {
			if m.Meta.Kind == ha.KindBroker {
				k++
			}
		}
		return float64(k)
	})
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	port := n.cfg.MetricsPort
	if port < 0 || (port == 0 && n.cfg.ListenPort == 0) {
		return
	}
	if port == 0 {
		port = n.cfg.ListenPort + 3
	}
	n.mon = httpmon.New(net.JoinHostPort(n.cfg.MetricsBindAddr, strconv.Itoa(port)), reg, n.health, n.log.Named("http"))
	if n.cfg.PprofEnable {
		n.mon.EnablePprof()
	}
}

// startMonitor listens. A port given explicitly must bind; the derived
// listenPort+3 only warns, since monitoring is no precondition for routing.
func (n *NameServer) startMonitor() error {
	if n.mon == nil {
		return nil
	}
	if err := n.mon.Start(); err != nil {
		if n.cfg.MetricsPort > 0 {
			return err
		}
		n.log.Warn("metrics port (listenPort+3) unavailable; monitoring off", zap.Error(err))
		n.mon = nil
	}
	return nil
}

// MetricsAddr is the monitoring address, "" when off.
func (n *NameServer) MetricsAddr() string {
	if n.mon == nil {
		return ""
	}
	return n.mon.Addr()
}

func (n *NameServer) brokerCount() int {
	k := 0
	for _, bd := range n.routes.ClusterInfo().BrokerAddrTable {
		k += len(bd.BrokerAddrs)
	}
	return k
}

func (n *NameServer) health() (bool, any) {
	st := n.monState.Load()
	return st == 1, nsHealth{State: [...]string{"starting", "serving", "stopping"}[st], Brokers: n.brokerCount()}
}

// instrument wraps a handler with the request metrics.
func (n *NameServer) instrument(h remoting.HandlerFunc) remoting.HandlerFunc {
	return n.requests.Wrap(h)
}
