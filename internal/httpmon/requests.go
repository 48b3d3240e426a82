package httpmon

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/raftmq/raftmq/remoting"
)

// RequestMetrics counts remoting requests and their handling latency by
// request code. Wrap a handler with Wrap; the per-code children are
// resolved once and cached, so a request costs two atomic adds and a
// histogram observation, no label allocation. A request answered
// REQUEST_CODE_NOT_SUPPORTED counts under the code "other": any client can
// send every one of the 65,536 codes, and each would otherwise add series.
type RequestMetrics struct {
	total   *prometheus.CounterVec
	latency *prometheus.HistogramVec
	byCode  sync.Map // int16 → *codeMetrics, codes some handler supports
	other   *codeMetrics
}

// OtherCode is the code label of requests answered
// REQUEST_CODE_NOT_SUPPORTED.
const OtherCode = "other"

type codeMetrics struct {
	total   prometheus.Counter
	latency prometheus.Observer
}

// NewRequestMetrics registers <namespace>_requests_total{code} and
// <namespace>_request_duration_seconds{code} on reg.
func NewRequestMetrics(reg prometheus.Registerer, namespace string) *RequestMetrics {
	m := &RequestMetrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "requests_total",
			Help: "Remoting requests handled, by request code."}, []string{"code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "request_duration_seconds",
			Help:    "Time from dispatch to the handler's return, by request code (a held long poll counts until it is parked).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 12)}, []string{"code"}),
	}
	reg.MustRegister(m.total, m.latency)
	m.other = &codeMetrics{total: m.total.WithLabelValues(OtherCode), latency: m.latency.WithLabelValues(OtherCode)}
	return m
}

func (m *RequestMetrics) code(c int16) *codeMetrics {
	if v, ok := m.byCode.Load(c); ok {
		return v.(*codeMetrics)
	}
	l := strconv.Itoa(int(c))
	v, _ := m.byCode.LoadOrStore(c, &codeMetrics{total: m.total.WithLabelValues(l), latency: m.latency.WithLabelValues(l)})
	return v.(*codeMetrics)
}

// Wrap returns h instrumented by the request's code.
func (m *RequestMetrics) Wrap(h remoting.HandlerFunc) remoting.HandlerFunc {
	return func(ctx context.Context, conn *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		start := time.Now()
		resp, err := h(ctx, conn, req)
		cm := m.other
		if resp == nil || resp.Code != remoting.ResponseRequestCodeNotSupported {
			cm = m.code(req.Code)
		}
		cm.total.Inc()
		cm.latency.Observe(time.Since(start).Seconds())
		return resp, err
	}
}
