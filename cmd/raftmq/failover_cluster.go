package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/raftmq/raftmq/internal/proccluster"
)

// The failover report's cluster: a name server and a 3-node group, each a
// separate OS process running this binary from a conf file the report
// wrote (package proccluster, shared with the chaos suite).

const (
	failoverCluster = "FailoverCluster"
	failoverGroup   = "broker-f"
	failoverNodes   = 3
)

// procCluster is the report's process cluster plus the HTTP client its
// probes share.
type procCluster struct {
	*proccluster.Cluster
	http *http.Client
}

// newProcCluster places the processes and writes every conf file: metrics
// on listenPort+3 everywhere (the probes read the name server's gossip
// gauge and every node's /readyz). basePort 0 takes ports from freeport;
// otherwise the name server listens on basePort and node i on
// basePort+10(i+1), Raft on +5. brokerConf lines are added to every
// member's conf. Nothing runs until Start.
func newProcCluster(dir string, basePort int, launch proccluster.Launcher, brokerConf ...string) (*procCluster, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("failover: data directory: %w", err)
	}
	cfg := proccluster.Config{Dir: dir, Launch: launch, ClusterName: failoverCluster,
		GroupName: func(int) string { return failoverGroup }, Metrics: true, NamesrvLogLevel: "warn",
		BrokerConf: brokerConf}
	if basePort != 0 {
		cfg.Place = func(n *proccluster.Node) error {
			n.Host, n.ListenPort = "127.0.0.1", basePort+10*(n.Index+1)
			n.RaftPort = n.ListenPort + 5
			return nil
		}
	}
	pc, err := proccluster.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("failover: %w (or pass --base-port)", err)
	}
	if err := pc.WriteConfs(); err != nil {
		return nil, err
	}
	return &procCluster{Cluster: pc, http: &http.Client{Timeout: time.Second, Transport: &http.Transport{}}}, nil
}

// stopAll ends the brokers, then the name server.
func (c *procCluster) stopAll() {
	c.StopAll(10 * time.Second)
	c.http.CloseIdleConnections()
}

// httpStatus GETs path on addr and returns the status code (0 on error).
func (c *procCluster) httpStatus(ctx context.Context, addr, path string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return 0
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}
