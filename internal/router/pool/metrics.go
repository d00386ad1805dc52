package pool

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the pool's Prometheus metrics, in the router's registry.
type metrics struct {
	workerInflight     *prometheus.GaugeVec   // worker, role: the router's open legs
	workerHealthy      *prometheus.GaugeVec   // worker, role: 1 in, 0 out
	workerDraining     *prometheus.GaugeVec   // worker, role: 1 draining (no new legs), else 0
	breakerState       *prometheus.GaugeVec   // worker, role: 0 closed, 1 half open, 2 open
	breakerTransitions *prometheus.CounterVec // worker, role, to
	membership         *prometheus.CounterVec // role, change
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	wl := []string{"worker", "role"}
	m := &metrics{
		workerInflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tandem_router_worker_inflight",
			Help: "Legs the router has open on each worker.",
		}, wl),
		workerHealthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tandem_router_worker_healthy",
			Help: "1 when the worker passes its health checks and may be picked, else 0.",
		}, wl),
		workerDraining: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tandem_router_worker_draining",
			Help: "1 while the worker drains (its /ready or a leg's answer said so): it gets no new legs, its legs in flight finish; else 0.",
		}, wl),
		breakerState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tandem_router_worker_breaker_state",
			Help: "Each worker's circuit breaker: 0 closed (picked), 1 half open (one probe leg out), 2 open (out after failed legs).",
		}, wl),
		breakerTransitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_router_worker_breaker_transitions_total",
			Help: "Circuit breaker state changes per worker, by the state entered (open, half_open, closed).",
		}, []string{"worker", "role", "to"}),
		membership: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_router_membership_changes_total",
			Help: "Changes of the router's worker pool by role: join (listed, or listed again), leave (no longer listed: no new legs), " +
				"drop (left and its last leg ended), ready and unready (its source's readiness flipped).",
		}, []string{"role", "change"}),
	}
	for _, c := range []prometheus.Collector{m.workerInflight, m.workerHealthy, m.workerDraining, m.breakerState, m.breakerTransitions, m.membership} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register worker pool metrics: %w", err)
		}
	}
	return m, nil
}
