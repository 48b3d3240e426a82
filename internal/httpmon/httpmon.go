package httpmon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// HealthFunc reports the node's health: serving=false answers 503. The
// body is encoded as JSON either way.
type HealthFunc func() (serving bool, body any)

// ReadyFunc reports readiness for /readyz (e.g. a broker: leader known and
// log applied); nil means ready == serving.
type ReadyFunc func() (ready bool, body any)

// Server is the monitoring HTTP server. Start listens; Shutdown stops it.
type Server struct {
	reg    *prometheus.Registry
	health HealthFunc
	ready  ReadyFunc
	log    *zap.Logger
	srv    *http.Server
	mux    *http.ServeMux
	ln     net.Listener
	wg     sync.WaitGroup
}

// DefaultBindAddr is where the monitor listens unless configured
// (metricsBindAddr): the local host only, since /metrics names every topic
// and group and the endpoints have no authentication. Deployments that
// scrape from another host set the key explicitly.
const DefaultBindAddr = "127.0.0.1"

// EnablePprof serves /debug/pprof/ (profile, trace, heap, cmdline, ...).
// Off unless pprofEnable=true: a profile or trace costs CPU on demand and
// cmdline shows the process's arguments. Call before Start.
func (s *Server) EnablePprof() {
	s.mux.HandleFunc("/debug/pprof/", pprof.Index)
	s.mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	s.mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	s.mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	s.mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}

// New builds a server for addr ("host:port") over reg. log may be nil.
func New(addr string, reg *prometheus.Registry, health HealthFunc, log *zap.Logger) *Server {
	if log == nil {
		log = zap.NewNop()
	}
	s := &Server{reg: reg, health: health, log: log}
	mux := http.NewServeMux()
	s.mux = mux
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	// /health answers 503 unless serving (RocketMQ-style single check);
	// /healthz is liveness (200 whenever the process answers, body says
	// its state); /readyz is readiness (Kubernetes probes).
	mux.HandleFunc("/health", s.serveHealth)
	mux.HandleFunc("/healthz", s.serveLive)
	mux.HandleFunc("/readyz", s.serveReady)
	s.srv = &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout: readTimeout, WriteTimeout: writeTimeout, IdleTimeout: idleTimeout}
	return s
}

// Connection lifetimes. Without them a client that keeps a connection
// idle after a request, or stops reading an answer (a /metrics page of
// many MiB), holds its goroutine, buffers and file descriptor for good,
// and a few thousand such connections exhaust the process's descriptors,
// which its remoting port needs too. The write bound covers the longest
// handler: a console action (under a minute) or a CPU profile
// (/debug/pprof/profile refuses a seconds= past it).
var (
	readTimeout  = 30 * time.Second
	writeTimeout = 2 * time.Minute
	idleTimeout  = 2 * time.Minute
)

// Start listens and serves in a tracked goroutine.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.srv.Addr)
	if err != nil {
		return fmt.Errorf("%w on %s: %v", ErrListen, s.srv.Addr, err)
	}
	s.ln = ln
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Warn("monitoring http server stopped", zap.Error(err))
		}
	}()
	return nil
}

// Addr is the bound address (after Start).
func (s *Server) Addr() string {
	if s.ln == nil {
		return s.srv.Addr
	}
	return s.ln.Addr().String()
}

// Shutdown stops serving, letting in-flight scrapes finish within ctx.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.ln == nil {
		return nil
	}
	err := s.srv.Shutdown(ctx)
	s.wg.Wait()
	return err
}

// Handle serves h under pattern (http.ServeMux syntax) next to the
// monitoring endpoints, e.g. the name server's web console. Safe before
// and after Start.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// SetReady installs the readiness check for /readyz. Call before Start.
func (s *Server) SetReady(f ReadyFunc) { s.ready = f }

func (s *Server) serveHealth(w http.ResponseWriter, _ *http.Request) {
	serving, body := s.health()
	writeJSON(w, serving, body)
}

func (s *Server) serveLive(w http.ResponseWriter, _ *http.Request) {
	_, body := s.health()
	writeJSON(w, true, body)
}

func (s *Server) serveReady(w http.ResponseWriter, _ *http.Request) {
	f := s.ready
	if f == nil {
		f = ReadyFunc(s.health)
	}
	ok, body := f()
	writeJSON(w, ok, body)
}

func writeJSON(w http.ResponseWriter, ok bool, body any) {
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(body)
}
