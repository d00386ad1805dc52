package router

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Error kinds, the "kind" label of tandem_router_worker_errors_total.
const (
	kindUnreachable = "unreachable" // the connection failed or broke before an answer
	kindTimeout     = "timeout"     // the leg sent nothing for the leg timeout, or the request deadline passed
	kindStatus      = "status"      // the worker answered with an error status
	kindStream      = "stream"      // the answer broke off or was malformed
	kindErrorEvent  = "error_event" // the worker's stream carried an error event
)

// metrics are the router's Prometheus metrics, in its own registry.
type metrics struct {
	workerRequests *prometheus.CounterVec   // worker, role: legs sent
	workerErrors   *prometheus.CounterVec   // worker, role, kind
	legSeconds     *prometheus.HistogramVec // worker, role: leg start to end
	requests       *prometheus.CounterVec   // endpoint, status
	ttft           *prometheus.HistogramVec // endpoint
	e2e            *prometheus.HistogramVec // endpoint
	retries        prometheus.Counter
	drainRefusals  *prometheus.CounterVec   // worker, role: legs a draining worker refused
	pdDecisions    *prometheus.CounterVec   // path, reason: one per attempt
	ttftPhase      *prometheus.HistogramVec // phase: the workers' parts of a disaggregated request's TTFT
	cluster        *clusterMetrics          // vLLM's names over the router's requests; rooms by outcome
	// The workers' inflight, healthy and breaker metrics are package pool's.
}

var latencyBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320, 640}

// phaseBuckets are finer than latencyBuckets at the low end: a transfer or
// a first decode step takes milliseconds.
var phaseBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	wl := []string{"worker", "role"}
	m := &metrics{
		workerRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_router_worker_requests_total",
			Help: "Legs the router sent to each worker.",
		}, wl),
		workerErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_router_worker_errors_total",
			Help: "Legs that failed, by worker and kind (unreachable, timeout, status, stream, error_event).",
		}, []string{"worker", "role", "kind"}),
		legSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tandem_router_worker_leg_seconds",
			Help:    "Time from sending a leg to the end of its answer, per worker.",
			Buckets: latencyBuckets,
		}, wl),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_router_requests_total",
			Help: "Requests the router answered, by endpoint and status code.",
		}, []string{"endpoint", "status"}),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tandem_router_time_to_first_token_seconds",
			Help:    "Streaming requests: time from arrival to the first event carrying a token.",
			Buckets: latencyBuckets,
		}, []string{"endpoint"}),
		e2e: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tandem_router_e2e_request_latency_seconds",
			Help:    "Generation requests answered in full: time from arrival to the end of the answer.",
			Buckets: latencyBuckets,
		}, []string{"endpoint"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_router_retries_total",
			Help: "Samples sent to another pair because an attempt failed before anything of it reached the client.",
		}),
		drainRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_router_worker_draining_refusals_total",
			Help: "Legs a worker refused with the draining answer (503, code draining): the sample went to another worker; not counted as errors.",
		}, wl),
	}
	m.pdDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tandem_router_pd_decisions_total",
		Help: "Selective disaggregation: attempts sent as one local leg to a decode worker or disaggregated (prefill and decode legs), by reason (short_prompt, long_prompt, prefill_busy: a long prompt sent to a decode worker because the prefill queue was PDSpill times its own, no_prefill_worker, count_failed, threshold_off). A retried sample counts once per attempt.",
	}, []string{"path", "reason"})
	m.ttftPhase = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "tandem_router_ttft_phase_seconds",
		Help: "Disaggregated requests answered in full: the phases of their time to first token as the workers report them " +
			"(queue: arrival at the prefill worker to admission; prefill: admission to first token; transfer: first token to " +
			"decode's acknowledgement of the KV; first_decode: decode resuming to its first token sent).",
		Buckets: phaseBuckets,
	}, []string{"phase"})
	for _, c := range []prometheus.Collector{m.workerRequests, m.workerErrors, m.legSeconds, m.requests, m.ttft, m.e2e,
		m.retries, m.drainRefusals, m.pdDecisions, m.ttftPhase} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register router metrics: %w", err)
		}
	}
	cm, err := newClusterMetrics(reg)
	if err != nil {
		return nil, err
	}
	m.cluster = cm
	return m, nil
}
