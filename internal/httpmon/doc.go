// Package httpmon is the monitoring HTTP endpoint shared by brokers and
// name servers (listenPort+3 by default): Prometheus /metrics from a
// per-process registry (never the global one, so several nodes can run in
// one process as in `raftmq dev` and tests), /health for orchestrators and
// load balancers, and net/http/pprof under /debug/pprof/ for profiling
// once EnablePprof (pprofEnable=true). It binds 127.0.0.1 unless the node's
// metricsBindAddr says otherwise: the endpoints have no authentication.
//
// Handle mounts more on the same port: the name server's web console
// (package console).
//
// It is a server package: the SDK never imports it.
//
// # Files
//
//   - httpmon.go: the HTTP server and its handlers.
//   - requests.go: RequestMetrics, request counts and durations by request
//     code, with per-code children cached so a request allocates no labels.
//   - errors.go: the package's sentinels.
package httpmon
