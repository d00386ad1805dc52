package discovery

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Error kinds, the "kind" label of tandem_discovery_errors_total.
const (
	errWatch    = "watch"     // k8s: a list or watch of pods failed (client-go retries it)
	errSync     = "sync"      // k8s: the first list did not complete in time
	errResolve  = "resolve"   // dns: a lookup failed or timed out
	errProbe    = "probe"     // dns: a new address's role probe failed
	errRead     = "read"      // file: the file could not be read (gone, unreadable)
	errTooLarge = "too_large" // file: the file is over MaxFileBytes
	errParse    = "parse"     // file: the file is not a valid endpoint list
)

// Reasons something seen is not a worker, the "reason" label of
// tandem_discovery_ignored_total.
const (
	ignoredRole    = "role"    // no llm-d.ai/role label, or not prefill or decode
	ignoredPort    = "port"    // no usable HTTP port
	ignoredAddress = "address" // k8s: another pod has the same IP and port
)

// metrics are one source's Prometheus metrics. Every series carries the
// source's kind, so sources of several kinds can share a registry.
type metrics struct {
	changes *prometheus.CounterVec // source, role, kind
	errors  *prometheus.CounterVec // source, kind
	ignored *prometheus.CounterVec // source, reason
	members *prometheus.GaugeVec   // source, role, ready
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_discovery_changes_total",
			Help: "Membership changes a discovery source saw, by source, role and kind (add, remove, ready, unready, update).",
		}, []string{"source", "role", "kind"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_discovery_errors_total",
			Help: "Errors of a discovery source, by kind (watch, sync, resolve, probe, read, too_large, parse); the last good membership stays meanwhile.",
		}, []string{"source", "kind"}),
		ignored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_discovery_ignored_total",
			Help: "Pods or file endpoints seen that are not workers (reason role: no llm-d.ai/role prefill or decode; port: no usable HTTP port; address: another pod's IP and port), each counted once per reason.",
		}, []string{"source", "reason"}),
		members: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tandem_discovery_members",
			Help: "Workers a discovery source sees now, by role and readiness.",
		}, []string{"source", "role", "ready"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.changes, m.errors, m.ignored, m.members} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, fmt.Errorf("discovery: register metrics: %w (one source per registry)", err)
			}
			return nil, fmt.Errorf("discovery: register metrics: %w", err)
		}
	}
	return m, nil
}
