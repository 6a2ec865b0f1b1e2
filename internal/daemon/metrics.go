package daemon

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mcpgate/mcpgate/internal/backend"
	"github.com/mcpgate/mcpgate/internal/listeners"
)

// metrics is the daemon's one Prometheus registry. Labels are backend
// names, states and outcomes only: bounded by the configuration, never
// carrying tool arguments or client data; and on every series the host
// (hostLabel), so that series of several hosts behind one balancer stay
// apart.
type metrics struct {
	reg      *prometheus.Registry
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec

	// series holds each backend's (*backend.Backend → *callSeries) series
	// once used: a call's end looks them up by pointer, not by hashing
	// its labels.
	series sync.Map
}

// callSeries are a backend's call series, each made when first used, so
// that an outcome that never happened has no series.
type callSeries struct {
	name     string
	outcomes [3]atomic.Pointer[prometheus.Counter] // ok, error, refused
	duration atomic.Pointer[prometheus.Observer]
}

var outcomes = [3]string{"ok", "error", "refused"}

func newMetrics(d *daemon) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgate_calls_total",
			Help: "Calls routed to a backend, by outcome: ok (a result), error (an error answer or a failed call) or refused (circuit open, a limit, not running).",
		}, []string{"backend", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcpgate_call_duration_seconds",
			Help:    "How long calls admitted by a backend took, from admission to answer.",
			Buckets: []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"backend"}),
	}
	prometheus.WrapRegistererWith(prometheus.Labels{"host": hostLabel()}, m.reg).MustRegister(m.calls, m.duration,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mcpgate_sessions", Help: "Open client sessions."},
			func() float64 { return float64(d.gw.NumSessions()) }),
		backendCollector{d},
	)
	return m
}

// observe records one finished call; it is the backends' OnCall.
func (m *metrics) observe(b *backend.Backend, outcome string, d time.Duration) {
	s := m.seriesOf(b)
	s.counter(m, outcome).Inc()
	if outcome != "refused" {
		obs := s.duration.Load()
		if obs == nil {
			o := m.duration.WithLabelValues(s.name)
			obs = &o
			s.duration.Store(obs)
		}
		(*obs).Observe(d.Seconds())
	}
}

func (m *metrics) seriesOf(b *backend.Backend) *callSeries {
	if s, ok := m.series.Load(b); ok {
		return s.(*callSeries)
	}
	s, _ := m.series.LoadOrStore(b, &callSeries{name: b.Name()})
	return s.(*callSeries)
}

// counter returns the backend's counter of calls that ended with outcome.
func (s *callSeries) counter(m *metrics, outcome string) prometheus.Counter {
	i := slices.Index(outcomes[:], outcome)
	if i < 0 {
		return m.calls.WithLabelValues(s.name, outcome)
	}
	if c := s.outcomes[i].Load(); c != nil {
		return *c
	}
	c := m.calls.WithLabelValues(s.name, outcome)
	s.outcomes[i].Store(&c)
	return c
}

// forget drops the series of a backend a reload removed.
func (m *metrics) forget(name string) {
	m.series.Range(func(b, s any) bool {
		if s.(*callSeries).name == name {
			m.series.Delete(b)
		}
		return true
	})
	m.calls.DeletePartialMatch(prometheus.Labels{"backend": name})
	m.duration.DeletePartialMatch(prometheus.Labels{"backend": name})
}

// backendCollector reads every backend's state at scrape time.
type backendCollector struct{ d *daemon }

var (
	descState = prometheus.NewDesc("mcpgate_backend_state",
		"1 for the state the backend is in: starting, healthy, unhealthy, stopped or failed.", []string{"backend", "state"}, nil)
	descRestarts = prometheus.NewDesc("mcpgate_backend_restarts_total",
		"Automatic restarts of the backend after crashes; unlike NRestarts, a start by hand does not reset it.", []string{"backend"}, nil)
	descCheck = prometheus.NewDesc("mcpgate_health_check_latency_seconds",
		"How long the backend's last health check took.", []string{"backend"}, nil)
	descFailures = prometheus.NewDesc("mcpgate_health_check_consecutive_failures",
		"Failed health checks in a row.", []string{"backend"}, nil)
	descCircuit = prometheus.NewDesc("mcpgate_circuit_open",
		"1 while the backend's circuit is open and its calls fail at once.", []string{"backend"}, nil)
	descInFlight = prometheus.NewDesc("mcpgate_calls_in_flight",
		"Calls admitted by the backend and not yet answered.", []string{"backend"}, nil)
	descQueued = prometheus.NewDesc("mcpgate_calls_queued",
		"Calls waiting for one of the backend's max_concurrent_calls slots.", []string{"backend"}, nil)
	descFallbacks = prometheus.NewDesc("mcpgate_fallbacks_total",
		"Calls the backend could not serve that a fallback served.", []string{"backend"}, nil)
	descUpstream = prometheus.NewDesc("mcpgate_upstream_calls_total",
		"Calls of clients to a backend that exchanges their tokens (oauth_token_exchange), by who they ran as at its server: exchanged (the caller's own subject), service (the backend's own token, oauth_exchange_fallback), or refused (a caller without an OAuth token).",
		[]string{"backend", "as"}, nil)
	descPending = prometheus.NewDesc("mcpgate_integrity_pending_changes",
		"Tools, prompts and resource templates of the backend that differ from the approved baseline (integrity).", []string{"backend"}, nil)
)

func (c backendCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descState, descRestarts, descCheck, descFailures, descCircuit, descInFlight, descQueued, descFallbacks, descPending, descUpstream} {
		ch <- d
	}
}

func (c backendCollector) Collect(ch chan<- prometheus.Metric) {
	for _, b := range c.d.sup.Backends() {
		st, h, name := b.Status(), b.Health(), b.Name()
		for _, s := range []backend.State{backend.Starting, backend.Healthy, backend.Unhealthy, backend.Stopped, backend.Failed} {
			ch <- prometheus.MustNewConstMetric(descState, prometheus.GaugeValue, boolValue(st.State == s), name, s.String())
		}
		ch <- prometheus.MustNewConstMetric(descRestarts, prometheus.CounterValue, float64(b.RestartsTotal()), name)
		ch <- prometheus.MustNewConstMetric(descCheck, prometheus.GaugeValue, h.LastCheckLatency.Seconds(), name)
		ch <- prometheus.MustNewConstMetric(descFailures, prometheus.GaugeValue, float64(h.ConsecutiveFailures), name)
		ch <- prometheus.MustNewConstMetric(descCircuit, prometheus.GaugeValue, boolValue(!h.CircuitOpen.IsZero()), name)
		ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(h.CallsInFlight), name)
		ch <- prometheus.MustNewConstMetric(descQueued, prometheus.GaugeValue, float64(h.CallsQueued), name)
		ch <- prometheus.MustNewConstMetric(descFallbacks, prometheus.CounterValue, float64(h.NFallbacks), name)
		ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, float64(c.d.integrity.NumPending(name)), name)
		if exchanged, service, refused, ok := b.UpstreamCalls(); ok {
			ch <- prometheus.MustNewConstMetric(descUpstream, prometheus.CounterValue, float64(exchanged), name, backend.UpstreamExchanged)
			ch <- prometheus.MustNewConstMetric(descUpstream, prometheus.CounterValue, float64(service), name, backend.UpstreamService)
			ch <- prometheus.MustNewConstMetric(descUpstream, prometheus.CounterValue, float64(refused), name, backend.UpstreamRefused)
		}
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// serveMetrics serves /metrics on [gateway] metrics_listen: off by default,
// an address, a unix socket, or the socket-activated fd named "metrics". It
// returns a function that stops the server.
func (d *daemon) serveMetrics() (stop func(), err error) {
	addr := d.cfg.Gateway.MetricsListen
	var l *listeners.Listener
	switch {
	case addr == "":
		if d.lns.Metrics != nil {
			d.log.Warn("closing the socket-activated fd named metrics: [gateway] metrics_listen is off; set metrics_listen = \"fd:metrics\" to serve metrics on it")
			d.lns.Metrics.Close()
		}
		return func() {}, nil
	case addr == "fd:metrics":
		if d.lns.Metrics == nil {
			return nil, errors.New(`[gateway] metrics_listen = "fd:metrics" but systemd passed no socket named metrics; add a ListenStream= with FileDescriptorName=metrics to the socket unit, or give an address`)
		}
		l = d.lns.Metrics
	default:
		if l, err = listeners.BindOne(addr); err != nil {
			return nil, fmt.Errorf("metrics_listen: %w", err)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(d.metrics.reg, promhttp.HandlerOpts{ErrorLog: nil}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("metrics listener failed", "listener", l.Name, "err", err)
		}
	}()
	d.log.Info("serving Prometheus metrics", "listener", l.Name, "path", "/metrics")
	return func() {
		srv.Close()
		<-done
	}, nil
}
