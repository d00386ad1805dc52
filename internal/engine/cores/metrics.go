package cores

import (
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
)

// collector exports a Lease's Stats.
type collector struct {
	l                                     *Lease
	borrowed, lent, parks, forced, reclmd *prometheus.Desc
	held, repairs, anomalies, degraded    *prometheus.Desc
}

// NewCollector returns the Prometheus collector of l's counters:
// tandem_core_lease_borrowed_seconds_total (core-seconds held beyond the
// even share), tandem_core_lease_lent_seconds_total (seconds the process
// waited for a core while others held them), ..._parks_total,
// ..._forced_total, ..._reclaimed_total, ..._repairs_total,
// ..._anomalies_total and the gauges tandem_core_lease_cores_held and
// tandem_core_lease_degraded (1 while Health says degraded).
func NewCollector(l *Lease) prometheus.Collector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("tandem_core_lease_"+name, help, nil, nil)
	}
	return &collector{l: l,
		borrowed: d("borrowed_seconds_total", "Core-seconds this worker held beyond its even share of the host's cores (cores / workers), borrowed from idle or lower-priority workers."),
		lent:     d("lent_seconds_total", "Seconds this worker's kernel rounds waited for a core while other workers of higher priority held them."),
		parks:    d("parks_total", "Kernel rounds that waited for a core."),
		forced:   d("forced_total", "Kernel rounds that ran without a core after waiting the longest allowed (the host was overcommitted)."),
		reclmd:   d("reclaimed_total", "Cores taken back from workers whose heartbeat stopped (killed while holding them)."),
		held:     d("cores_held", "Cores this worker holds now."),
		repairs:  d("repairs_total", "Times this worker found its own slot of the core lease region (its count, priority or pid) other than it wrote it, and rewrote it."),
		anomalies: d("anomalies_total", "Checks of the core lease region (every quarter of the heartbeat TTL) that found a value no worker writes in another slot "+
			"(a count above the cores shared, counts adding up to more, an unknown priority, a heartbeat in the future)."),
		degraded: d("degraded", "1 while the core lease is degraded (a kernel round ran without a core after the longest wait, or the region held values no worker writes, "+
			"within the health window), else 0; /health gives the reason."),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.borrowed, c.lent, c.parks, c.forced, c.reclmd, c.held, c.repairs, c.anomalies, c.degraded} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.l.Stats()
	ch <- prometheus.MustNewConstMetric(c.borrowed, prometheus.CounterValue, s.Borrowed.Seconds())
	ch <- prometheus.MustNewConstMetric(c.lent, prometheus.CounterValue, s.Lent.Seconds())
	ch <- prometheus.MustNewConstMetric(c.parks, prometheus.CounterValue, float64(s.Parks))
	ch <- prometheus.MustNewConstMetric(c.forced, prometheus.CounterValue, float64(s.Forced))
	ch <- prometheus.MustNewConstMetric(c.reclmd, prometheus.CounterValue, float64(s.Reclaimed))
	ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(s.Held))
	ch <- prometheus.MustNewConstMetric(c.repairs, prometheus.CounterValue, float64(s.Repairs))
	ch <- prometheus.MustNewConstMetric(c.anomalies, prometheus.CounterValue, float64(s.Anomalies))
	deg := 0.0
	if d, _ := c.l.Health(); d {
		deg = 1
	}
	ch <- prometheus.MustNewConstMetric(c.degraded, prometheus.GaugeValue, deg)
}

// DebugHandler serves l's view of the region as JSON: this worker's slot,
// the cores shared, its counters and every slot's state.
func DebugHandler(l *Lease) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s := l.Stats()
		_, health := l.Health()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(struct {
			Slot            int        `json:"slot"`
			Cores           int        `json:"cores"`
			BorrowedSeconds float64    `json:"borrowed_seconds"`
			LentSeconds     float64    `json:"lent_seconds"`
			Parks           uint64     `json:"parks"`
			Forced          uint64     `json:"forced"`
			Reclaimed       uint64     `json:"reclaimed"`
			Repairs         uint64     `json:"repairs"`
			Anomalies       uint64     `json:"anomalies"`
			Degraded        string     `json:"degraded,omitempty"`
			Slots           []SlotInfo `json:"slots"`
		}{l.slot, l.r.cores, s.Borrowed.Seconds(), s.Lent.Seconds(), s.Parks, s.Forced, s.Reclaimed, s.Repairs, s.Anomalies, health, l.Slots()})
	})
}
