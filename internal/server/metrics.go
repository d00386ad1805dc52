package server

import (
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"tandem/internal/engine"
)

// metrics are the server's Prometheus metrics. Engine gauges and counters
// are read from Backend.Stats at scrape time (statsCollector); latencies
// and request outcomes are observed by the handlers.
type metrics struct {
	requests *prometheus.CounterVec   // endpoint, status
	finished *prometheus.CounterVec   // finish_reason (one per choice)
	ttft     prometheus.Histogram     // submit → first token, per choice
	itl      prometheus.Histogram     // gap between tokens, per token
	e2e      *prometheus.HistogramVec // endpoint; request start → last byte
}

func newMetrics(reg prometheus.Registerer, b Backend, log *slog.Logger) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_http_requests_total",
			Help: "HTTP requests answered, by endpoint and status code.",
		}, []string{"endpoint", "status"}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_request_finished_total",
			Help: "Generated choices that ended, by finish reason (stop, length, cancelled, error).",
		}, []string{"finish_reason"}),
		ttft: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tandem_time_to_first_token_seconds",
			Help:    "Time from a request's arrival to its first generated token, per choice.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80},
		}),
		itl: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tandem_inter_token_latency_seconds",
			Help:    "Time between consecutive generated tokens of a choice.",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5},
		}),
		e2e: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tandem_e2e_request_latency_seconds",
			Help:    "Time from a generation request's arrival to the end of its answer.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320, 640},
		}, []string{"endpoint"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.finished, m.ttft, m.itl, m.e2e, newStatsCollector(b)} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				log.Error("register metric", "err", err)
			} else {
				log.Warn("metric already registered; this server's values are not exported", "err", err)
			}
		}
	}
	return m
}

// statsCollector exports a Backend's Stats at scrape time.
type statsCollector struct {
	b                                     Backend
	waiting, running, pagesUsed, pagesTot *prometheus.Desc
	oldest                                *prometheus.Desc
	prompt, generated, prefixHit, preempt *prometheus.Desc
	steps                                 *prometheus.Desc
}

func newStatsCollector(b Backend) *statsCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &statsCollector{
		b:         b,
		waiting:   d("tandem_num_requests_waiting", "Sequences queued for admission."),
		running:   d("tandem_num_requests_running", "Sequences in the running batch."),
		pagesUsed: d("tandem_kv_pages_used", "KV cache pages in use (sequences and prefix cache)."),
		pagesTot:  d("tandem_kv_pages", "KV cache pages in the arena (in use or free)."),
		oldest:    d("tandem_oldest_waiting_seconds", "Age of the oldest queued sequence."),
		prompt:    d("tandem_prompt_tokens_total", "Prompt tokens computed or reused."),
		generated: d("tandem_generation_tokens_total", "Tokens generated."),
		prefixHit: d("tandem_prefix_cache_hit_tokens_total", "Prompt tokens served from the prefix cache."),
		preempt:   d("tandem_preemptions_total", "Sequences preempted (pages released, recomputed later)."),
		steps:     d("tandem_engine_steps_total", "Engine steps run."),
	}
}

// Describe sends the descriptors of every metric Collect sends.
func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.waiting, c.running, c.pagesUsed, c.pagesTot, c.oldest,
		c.prompt, c.generated, c.prefixHit, c.preempt, c.steps} {
		ch <- d
	}
}

// Collect reads the backend's Stats once and sends them.
func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	var s engine.Stats = c.b.Stats()
	g := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	n := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	g(c.waiting, float64(s.Waiting))
	g(c.running, float64(s.Running))
	g(c.pagesUsed, float64(s.PagesUsed))
	g(c.pagesTot, float64(s.PagesTot))
	g(c.oldest, s.OldestWaiting.Seconds())
	n(c.prompt, s.PromptTokens)
	n(c.generated, s.GeneratedTokens)
	n(c.prefixHit, s.PrefixHitTokens)
	n(c.preempt, s.Preemptions)
	n(c.steps, s.Steps)
}
