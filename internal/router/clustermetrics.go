package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"tandem/internal/api/openai"
	"tandem/internal/router/answer"
	"tandem/internal/router/pool"
)

// clusterMetrics are the cluster-level series the router exports, the one
// URL users have: vLLM's names (model_name labelled, vLLM's buckets) over
// the requests the router answered, so vLLM's dashboards read a whole
// Tandem cluster from the router alone, and each room's outcome by reason.
// A Prometheus that also scrapes the workers sees their own vllm: series
// beside these; dashboards tell them apart by job or instance.
type clusterMetrics struct {
	ttft      *prometheus.HistogramVec // model_name: arrival to a sample's first token at the client
	itl       *prometheus.HistogramVec // model_name: gap between a streamed sample's token events
	e2e       *prometheus.HistogramVec // model_name: arrival to the end of the answer
	promptLen *prometheus.HistogramVec // model_name: per sample with a usage seen
	genLen    *prometheus.HistogramVec // model_name
	promptTok *prometheus.CounterVec   // model_name
	genTok    *prometheus.CounterVec   // model_name
	success   *prometheus.CounterVec   // model_name, finished_reason: one per sample
	rooms     *prometheus.CounterVec   // path, outcome, reason: one per attempt (room)
}

// vLLM's buckets (vllm/v1/metrics/loggers.py); the token-count buckets
// are its 1-2-5 series.
var (
	clusterTTFTBuckets    = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	clusterITLBuckets     = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	clusterRequestBuckets = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
	clusterTokenBuckets   = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000, 500000, 1000000}
)

func newClusterMetrics(reg prometheus.Registerer) (*clusterMetrics, error) {
	ml := []string{"model_name"}
	h := func(name, help string, b []float64) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: b}, ml)
	}
	c := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, ml)
	}
	m := &clusterMetrics{
		ttft:      h("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds (the router: arrival to a sample's first token written to the client).", clusterTTFTBuckets),
		itl:       h("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds (the router: the gap between a streamed sample's events carrying tokens, as written to the client).", clusterITLBuckets),
		e2e:       h("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds (the router: arrival to the end of the answer).", clusterRequestBuckets),
		promptLen: h("vllm:request_prompt_tokens", "Number of prefill tokens processed (the router: per sample whose usage it saw).", clusterTokenBuckets),
		genLen:    h("vllm:request_generation_tokens", "Number of generation tokens processed (the router: per sample whose usage it saw).", clusterTokenBuckets),
		promptTok: c("vllm:prompt_tokens_total", "Number of prefill tokens processed (the router: samples whose usage it saw: unstreamed, or streamed with include_usage)."),
		genTok:    c("vllm:generation_tokens_total", "Number of generation tokens processed (the router: samples whose usage it saw: unstreamed, or streamed with include_usage)."),
		success: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm:request_success_total",
			Help: "Count of finished requests (the router: samples), by finished_reason (stop, length, abort: the client left, error: every attempt failed)."},
			[]string{"model_name", "finished_reason"}),
		rooms: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tandem_router_rooms_total",
			Help: "Rooms (one per attempt of a sample) the router closed, by path (local, disaggregated), outcome (succeeded, failed) " +
				"and reason (empty when succeeded; else the failed leg and kind, e.g. decode_unreachable, or the request's end: " +
				"client_abort, client_gone, request_timeout, other_sample_failed, router_stopping, draining, client_error)."},
			[]string{"path", "outcome", "reason"}),
	}
	for _, col := range []prometheus.Collector{m.ttft, m.itl, m.e2e, m.promptLen, m.genLen, m.promptTok, m.genTok, m.success, m.rooms} {
		if err := reg.Register(col); err != nil {
			return nil, fmt.Errorf("register router cluster metrics: %w", err)
		}
	}
	return m, nil
}

// sampleAnswered counts a sample answered in full: its finish reason
// (stop when the worker named none) and, when its usage was seen, its
// tokens.
func (m *clusterMetrics) sampleAnswered(model, finish string, u *openai.Usage) {
	if finish == "" {
		finish = "stop"
	}
	m.success.WithLabelValues(model, finish).Inc()
	if u == nil {
		return
	}
	m.promptTok.WithLabelValues(model).Add(float64(u.PromptTokens))
	m.genTok.WithLabelValues(model).Add(float64(u.CompletionTokens))
	m.promptLen.WithLabelValues(model).Observe(float64(u.PromptTokens))
	m.genLen.WithLabelValues(model).Observe(float64(u.CompletionTokens))
}

// ctxReason names why a request's context ended, for the rooms' reason
// label.
func ctxReason(cause error) string {
	switch {
	case errors.Is(cause, errRequestTimeout):
		return "request_timeout"
	case errors.Is(cause, errOtherFailed):
		return "other_sample_failed"
	case errors.Is(cause, errClientGone):
		return "client_gone"
	case errors.Is(cause, errStopping):
		return "router_stopping"
	case errors.Is(cause, context.Canceled):
		return "client_abort"
	}
	return "cancelled"
}

// legReason names a failed leg for the rooms' reason label: the leg and
// the kind (decode_unreachable, prefill_timeout, ...), draining for a
// draining worker's refusal, client_error for a refusal of the request
// itself.
func legReason(le *legError) string {
	switch {
	case le.draining():
		return "draining"
	case le.clientFault():
		return "client_error"
	}
	return le.legName() + "_" + le.kind
}

// noteAnswer reads what the metrics want from one object of decode's
// answer (a streamed chunk or the whole answer): the first choice's
// finish_reason and the usage, when present.
func (f *follower) noteAnswer(obj answer.Object) {
	if raw, ok := obj.Get("usage"); ok && !answer.IsNull(raw) {
		var u openai.Usage
		if json.Unmarshal(raw, &u) == nil {
			f.seenUsage = &u
		}
	}
	raw, ok := obj.Get("choices")
	if !ok {
		return
	}
	cs, err := answer.ParseArray(raw)
	if err != nil {
		return
	}
	for _, c := range cs {
		co, err := answer.ParseObject(c)
		if err != nil {
			continue
		}
		if fr, ok := co.Get("finish_reason"); ok && !answer.IsNull(fr) {
			var s string
			if json.Unmarshal(fr, &s) == nil && s != "" {
				f.finish = s
			}
		}
	}
}

// roomClosed counts a closed room by its path, outcome and reason.
func (rt *Router) roomClosed(rec *record, outcome, reason string) {
	rt.met.cluster.rooms.WithLabelValues(rec.dec.path, outcome, reason).Inc()
}

// workerCollector exports, at scrape time, what the router knows of each
// worker (pool.Debug): its engine's queue, running sequences and KV use
// from its last /pd/status, and the membership: how many workers of each
// role are healthy (taking legs), draining or out.
type workerCollector struct{ p *pool.Pool }

var (
	workerWaitingDesc = prometheus.NewDesc("tandem_router_worker_waiting",
		"Sequences queued in each worker's engine, as its last /pd/status said.", []string{"worker", "role"}, nil)
	workerRunningDesc = prometheus.NewDesc("tandem_router_worker_running",
		"Sequences running in each worker's engine, as its last /pd/status said.", []string{"worker", "role"}, nil)
	workerKVDesc = prometheus.NewDesc("tandem_router_worker_kv_usage",
		"Each worker's KV cache use (0..1, vLLM's kv_cache_usage_perc), as its last /pd/status said.", []string{"worker", "role"}, nil)
	clusterWaitingDesc = prometheus.NewDesc("vllm:num_requests_waiting",
		"Number of requests waiting to be processed (the router: the sum over its workers' last /pd/status).", []string{"model_name"}, nil)
	clusterRunningDesc = prometheus.NewDesc("vllm:num_requests_running",
		"Number of requests in model execution batches (the router: the sum over its workers' last /pd/status).", []string{"model_name"}, nil)
	clusterKVDesc = prometheus.NewDesc("vllm:kv_cache_usage_perc",
		"KV-cache usage. 1 means 100 percent usage (the router: the mean over the workers that reported one).", []string{"model_name"}, nil)
	workersDesc = prometheus.NewDesc("tandem_router_workers",
		"Workers the router knows, by role and state (healthy: takes legs; draining; down: fails its health checks).", []string{"role", "state"}, nil)
)

// Describe sends the collector's descriptors.
func (workerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{workerWaitingDesc, workerRunningDesc, workerKVDesc, workersDesc,
		clusterWaitingDesc, clusterRunningDesc, clusterKVDesc} {
		ch <- d
	}
}

// Collect reads the pool once and sends the gauges.
func (c workerCollector) Collect(ch chan<- prometheus.Metric) {
	states := map[string]map[string]int{}
	for _, r := range []string{string(pool.Prefill), string(pool.Decode)} {
		states[r] = map[string]int{"healthy": 0, "draining": 0, "down": 0}
	}
	var waiting, running, kvSum float64
	kvN := 0
	for _, w := range c.p.Debug() {
		g := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, w.URL, w.Role)
		}
		if w.Waiting != nil {
			g(workerWaitingDesc, float64(*w.Waiting))
			waiting += float64(*w.Waiting)
		}
		if w.Running != nil {
			g(workerRunningDesc, float64(*w.Running))
			running += float64(*w.Running)
		}
		if w.KVUsage != nil {
			g(workerKVDesc, *w.KVUsage)
			kvSum += *w.KVUsage
			kvN++
		}
		st := "down"
		switch {
		case w.Healthy && w.Draining:
			st = "draining"
		case w.Healthy:
			st = "healthy"
		}
		if states[w.Role] == nil {
			states[w.Role] = map[string]int{}
		}
		states[w.Role][st]++
	}
	for role, m := range states {
		for st, n := range m {
			ch <- prometheus.MustNewConstMetric(workersDesc, prometheus.GaugeValue, float64(n), role, st)
		}
	}
	model := c.p.Model()
	ch <- prometheus.MustNewConstMetric(clusterWaitingDesc, prometheus.GaugeValue, waiting, model)
	ch <- prometheus.MustNewConstMetric(clusterRunningDesc, prometheus.GaugeValue, running, model)
	if kvN > 0 {
		ch <- prometheus.MustNewConstMetric(clusterKVDesc, prometheus.GaugeValue, kvSum/float64(kvN), model)
	}
}
