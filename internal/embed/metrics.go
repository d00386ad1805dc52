package embed

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	requests     *prometheus.CounterVec
	inputs       prometheus.Counter
	tokens       prometheus.Counter
	latency      prometheus.Histogram
	batchInputs  prometheus.Histogram
	batchSeconds prometheus.Histogram
	queued       prometheus.Gauge
}

func newMetrics() *metrics {
	return &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tandem_embedding_requests_total",
			Help: "Embedding requests by outcome: ok, bad_input, queue_full, cancelled, closed, error."}, []string{"outcome"}),
		inputs: prometheus.NewCounter(prometheus.CounterOpts{Name: "tandem_embedding_inputs_total",
			Help: "Inputs embedded (requests that succeeded)."}),
		tokens: prometheus.NewCounter(prometheus.CounterOpts{Name: "tandem_embedding_tokens_total",
			Help: "Tokens of the inputs embedded (requests that succeeded)."}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tandem_embedding_request_duration_seconds",
			Help: "Time from an embedding request's arrival in the queue to its vectors (or its failure).", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		batchInputs: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tandem_embedding_batch_inputs",
			Help: "Inputs per forward pass of the embedding model.", Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128}}),
		batchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tandem_embedding_batch_duration_seconds",
			Help: "Time of one forward pass of the embedding model.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		queued: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tandem_embedding_queue_inputs",
			Help: "Inputs waiting for a batch."}),
	}
}

func (m *metrics) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.requests, m.inputs, m.tokens, m.latency, m.batchInputs, m.batchSeconds, m.queued} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func (m *metrics) observe(start time.Time, inputs [][]int32, err error) {
	m.latency.Observe(time.Since(start).Seconds())
	outcome := "ok"
	switch {
	case err == nil:
		n := 0
		for _, in := range inputs {
			n += len(in)
		}
		m.inputs.Add(float64(len(inputs)))
		m.tokens.Add(float64(n))
	case errors.Is(err, ErrBadInput), errors.Is(err, ErrTooLong):
		outcome = "bad_input"
	case errors.Is(err, ErrQueueFull):
		outcome = "queue_full"
	case errors.Is(err, ErrClosed):
		outcome = "closed"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		outcome = "cancelled"
	default:
		outcome = "error"
	}
	m.requests.WithLabelValues(outcome).Inc()
}

func (m *metrics) batch(inputs, _ int, d time.Duration) {
	m.batchInputs.Observe(float64(inputs))
	m.batchSeconds.Observe(d.Seconds())
}
