package server

import (
	"errors"
	"log/slog"
	"time"

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
	vllm     vllmMetrics
	// compileBusy counts requests refused because every grammar compile
	// slot was busy (429).
	compileBusy prometheus.Counter
}

// vllmMetrics are the same figures under vLLM's names (vllm:..., with a
// model_name label), so dashboards and Kubernetes endpoint pickers built
// for vLLM read Tandem's servers and workers as they read vLLM. Their
// buckets are vLLM's. Colons are legal in Prometheus names (promlint
// flags them; the e2e lint test exempts these).
type vllmMetrics struct {
	ttft    prometheus.Observer // vllm:time_to_first_token_seconds: arrival to first token, per choice
	itl     prometheus.Observer // vllm:inter_token_latency_seconds: per token
	e2e     prometheus.Observer // vllm:e2e_request_latency_seconds: arrival to the end of the answer, per request
	queue   prometheus.Observer // vllm:request_queue_time_seconds: Submit to first admission (engine.Update.QueueTime)
	prefill prometheus.Observer // vllm:request_prefill_time_seconds: first admission to first token
	decode  prometheus.Observer // vllm:request_decode_time_seconds: first token to last
	// Per choice answered in full: its prompt's tokens, its generated
	// tokens and the max_tokens it was given (vLLM's
	// request_max_num_generation_tokens).
	promptLen, genLen, maxGen prometheus.Observer
	// success counts choices that ended, by vLLM's finished_reason
	// (vllm:request_success_total).
	success *prometheus.CounterVec
}

// vllmFinishedReason maps a Tandem finish reason to vLLM's
// finished_reason label: cancelled is vLLM's abort; stop, length and
// error are the same word; grammar_budget stays Tandem's own.
func vllmFinishedReason(reason string) string {
	if reason == string(engine.FinishCancelled) {
		return "abort"
	}
	return reason
}

// buckets125 returns vLLM's 1-2-5 buckets (build_1_2_5_buckets) up to max:
// 1, 2, 5, 10, 20, 50, ... (at least 1, 2, 5 when max is unknown).
func buckets125(max int) []float64 {
	var b []float64
	for m := 1; ; m *= 10 {
		for _, k := range []int{1, 2, 5} {
			v := k * m
			if v > max && len(b) >= 3 {
				return b
			}
			b = append(b, float64(v))
		}
	}
}

// vLLM's buckets (vllm/v1/metrics/loggers.py).
var (
	vllmTTFTBuckets    = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	vllmITLBuckets     = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	vllmRequestBuckets = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
)

// newVLLMHistogram returns a vllm: histogram with model_name set to model.
func newVLLMHistogram(name, help, model string, buckets []float64) (prometheus.Collector, prometheus.Observer) {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, []string{"model_name"})
	return h, h.WithLabelValues(model)
}

func newMetrics(reg prometheus.Registerer, b Backend, log *slog.Logger, model string) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_http_requests_total",
			Help: "HTTP requests answered, by endpoint and status code.",
		}, []string{"endpoint", "status"}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_request_finished_total",
			Help: "Generated choices that ended, by finish reason (stop, length, cancelled, error, grammar_budget).",
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
	m.compileBusy = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tandem_grammar_compile_busy_total",
		Help: "Requests refused (429) because every grammar compile slot was busy.",
	})
	cs := []prometheus.Collector{m.requests, m.finished, m.ttft, m.itl, m.e2e, m.compileBusy, newStatsCollector(b, model)}
	for _, h := range []struct {
		name, help string
		buckets    []float64
		obs        *prometheus.Observer
	}{
		{"vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", vllmTTFTBuckets, &m.vllm.ttft},
		{"vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", vllmITLBuckets, &m.vllm.itl},
		{"vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", vllmRequestBuckets, &m.vllm.e2e},
		{"vllm:request_queue_time_seconds", "Histogram of time spent waiting for admission (Tandem: Submit to the sequence's pages allocated) in seconds.", vllmRequestBuckets, &m.vllm.queue},
		{"vllm:request_prefill_time_seconds", "Histogram of time spent in prefill (Tandem: arrival to first token, less the queue time) in seconds.", vllmRequestBuckets, &m.vllm.prefill},
		{"vllm:request_decode_time_seconds", "Histogram of time spent in decode (first token to last) in seconds.", vllmRequestBuckets, &m.vllm.decode},
	} {
		var c prometheus.Collector
		c, *h.obs = newVLLMHistogram(h.name, h.help, model, h.buckets)
		cs = append(cs, c)
	}
	lenBuckets := buckets125(b.ModelConfig().Context)
	for _, h := range []struct {
		name, help string
		obs        *prometheus.Observer
	}{
		{"vllm:request_prompt_tokens", "Number of prefill tokens processed.", &m.vllm.promptLen},
		{"vllm:request_generation_tokens", "Number of generation tokens processed.", &m.vllm.genLen},
		{"vllm:request_max_num_generation_tokens", "Histogram of maximum number of requested generation tokens.", &m.vllm.maxGen},
	} {
		var c prometheus.Collector
		c, *h.obs = newVLLMHistogram(h.name, h.help, model, lenBuckets)
		cs = append(cs, c)
	}
	m.vllm.success = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name:        "vllm:request_success_total",
		Help:        "Count of finished requests (Tandem: generated choices), by finished_reason (stop, length, abort, error, grammar_budget).",
		ConstLabels: prometheus.Labels{"model_name": model},
	}, []string{"finished_reason"})
	cs = append(cs, m.vllm.success)
	for _, c := range cs {
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

// finish counts a choice that ended with reason, under Tandem's and
// vLLM's names.
func (m *metrics) finish(reason engine.FinishReason) {
	m.finished.WithLabelValues(string(reason)).Inc()
	m.vllm.success.WithLabelValues(vllmFinishedReason(string(reason))).Inc()
}

// choiceDone observes the lengths of a choice answered in full: its
// prompt's tokens, its generated tokens and its max_tokens.
func (m *metrics) choiceDone(prompt, generated, maxTokens int) {
	m.vllm.promptLen.Observe(float64(prompt))
	m.vllm.genLen.Observe(float64(generated))
	m.vllm.maxGen.Observe(float64(maxTokens))
}

// firstToken observes a choice's time to first token (from the request's
// arrival) and, with the engine's queue time, vLLM's queue and prefill
// times.
func (m *metrics) firstToken(ttft, queue time.Duration) {
	m.ttft.Observe(ttft.Seconds())
	m.vllm.ttft.Observe(ttft.Seconds())
	m.vllm.queue.Observe(queue.Seconds())
	m.vllm.prefill.Observe(max(0, ttft-queue).Seconds())
}

// interToken observes one inter-token gap, in seconds.
func (m *metrics) interToken(gap float64) {
	m.itl.Observe(gap)
	m.vllm.itl.Observe(gap)
}

// decoded observes the decode time of a choice that finished (stop or
// length): its first token to its last.
func (m *metrics) decoded(first, last time.Time) {
	if !first.IsZero() {
		m.vllm.decode.Observe(last.Sub(first).Seconds())
	}
}

// requestDone observes a generation request answered in full.
func (m *metrics) requestDone(endpoint string, d time.Duration) {
	m.e2e.WithLabelValues(endpoint).Observe(d.Seconds())
	m.vllm.e2e.Observe(d.Seconds())
}

// statsCollector exports a Backend's Stats at scrape time.
type statsCollector struct {
	b                                     Backend
	waiting, running, pagesUsed, pagesTot *prometheus.Desc
	oldest                                *prometheus.Desc
	prompt, generated, prefixHit, preempt *prometheus.Desc
	paced                                 *prometheus.Desc
	steps                                 *prometheus.Desc
	grammarRefused, grammarBudget, masks  *prometheus.Desc
	// recurrent state of hybrid models (0 for the others)
	stateUsed, stateTot, snapshots, snapHits, snapMisses *prometheus.Desc
	// vLLM's names for the same gauges, labelled model_name.
	vWaiting, vRunning, vKVUsage *prometheus.Desc
	vPrompt, vGenerated          *prometheus.Desc
	evictable                    *prometheus.Desc
}

func newStatsCollector(b Backend, model string) *statsCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	v := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, nil, prometheus.Labels{"model_name": model})
	}
	return &statsCollector{
		vWaiting:   v("vllm:num_requests_waiting", "Number of requests waiting to be processed."),
		vRunning:   v("vllm:num_requests_running", "Number of requests in model execution batches."),
		vKVUsage:   v("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage (pages only the prefix cache holds count as free)."),
		vPrompt:    v("vllm:prompt_tokens_total", "Number of prefill tokens processed."),
		vGenerated: v("vllm:generation_tokens_total", "Number of generation tokens processed."),
		evictable:  d("tandem_kv_pages_evictable", "KV cache pages among tandem_kv_pages_used that only the prefix cache holds (free to take; refreshed at most every 100 ms while the engine steps)."),
		b:          b,
		waiting:    d("tandem_num_requests_waiting", "Sequences queued for admission."),
		running:    d("tandem_num_requests_running", "Sequences in the running batch."),
		pagesUsed:  d("tandem_kv_pages_used", "KV cache pages in use (sequences and prefix cache)."),
		pagesTot:   d("tandem_kv_pages", "KV cache pages in the arena (in use or free)."),
		oldest:     d("tandem_oldest_waiting_seconds", "Age of the oldest queued sequence."),
		prompt:     d("tandem_prompt_tokens_total", "Prompt tokens computed or reused."),
		generated:  d("tandem_generation_tokens_total", "Tokens generated."),
		prefixHit:  d("tandem_prefix_cache_hit_tokens_total", "Prompt tokens served from the prefix cache."),
		preempt:    d("tandem_preemptions_total", "Sequences preempted (pages released, recomputed later)."),
		steps:      d("tandem_engine_steps_total", "Engine steps run."),
		paced:      d("tandem_engine_paced_seconds_total", "Time the step loop waited between decode steps to lend its cores (--core-lease-pace)."),
		grammarRefused: d("tandem_grammar_refused_total",
			"Requests refused at admission because their grammar's first token masks cost more work than the engine allows."),
		grammarBudget: d("tandem_grammar_budget_ends_total",
			"Sequences ended (finish reason grammar_budget) because their grammar's token masks ran past the per-mask or per-request budget."),
		masks:     d("tandem_mask_waits_total", "Samples that waited for a late token mask (the sequence sat out steps; no other sequence waited)."),
		stateUsed: d("tandem_state_slots_used", "Recurrent-state slots held by admitted sequences (hybrid models; 0 for the others)."),
		stateTot:  d("tandem_state_slots", "Recurrent-state slots of the engine (a sequence needs one to be admitted; 0 for models without state)."),
		snapshots: d("tandem_state_snapshots", "Recurrent-state snapshots the prefix cache holds (a hybrid's prefix is reused only from one)."),
		snapHits:  d("tandem_state_snapshot_hits_total", "Admissions that resumed from a prefix-cache state snapshot."),
		snapMisses: d("tandem_state_snapshot_misses_total",
			"Admissions whose prompt had cached pages but no state snapshot within them, recomputed from position 0."),
	}
}

// Describe sends the descriptors of every metric Collect sends.
func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.waiting, c.running, c.pagesUsed, c.pagesTot, c.oldest,
		c.prompt, c.generated, c.prefixHit, c.preempt, c.steps, c.paced, c.grammarRefused, c.grammarBudget, c.masks,
		c.stateUsed, c.stateTot, c.snapshots, c.snapHits, c.snapMisses,
		c.vWaiting, c.vRunning, c.vKVUsage, c.vPrompt, c.vGenerated, c.evictable} {
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
	ch <- prometheus.MustNewConstMetric(c.paced, prometheus.CounterValue, s.PacedWait.Seconds())
	n(c.grammarRefused, s.GrammarRefused)
	n(c.grammarBudget, s.GrammarBudgetEnds)
	n(c.masks, s.MaskWaits)
	g(c.stateUsed, float64(s.StateSlotsUsed))
	g(c.stateTot, float64(s.StateSlotsTot))
	g(c.snapshots, float64(s.StateSnapshots))
	n(c.snapHits, s.StateSnapshotHits)
	n(c.snapMisses, s.StateSnapshotMisses)
	g(c.vWaiting, float64(s.Waiting))
	g(c.vRunning, float64(s.Running))
	g(c.vKVUsage, s.KVUsage())
	n(c.vPrompt, s.PromptTokens)
	n(c.vGenerated, s.GeneratedTokens)
	g(c.evictable, float64(s.PagesEvictable))
}
