package worker

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tandem/internal/pd/room"
)

// metrics are the worker's Prometheus figures and the driver's Observer.
// Counters and histograms are updated as events and transitions happen;
// queue gauges are computed at scrape time from a copy of the live rooms'
// states.
type metrics struct {
	w           *Worker
	events      *prometheus.CounterVec
	failures    *prometheus.CounterVec
	successes   prometheus.Counter
	bytes       prometheus.Counter
	transferSec prometheus.Histogram
	kvDrops     *prometheus.CounterVec
	badFrames   *prometheus.CounterVec
	sendDrops   *prometheus.CounterVec
	queueDesc   *prometheus.Desc
	oldestDesc  *prometheus.Desc
	trDesc      *prometheus.Desc

	mu      sync.Mutex
	started map[room.ID]room.Instant // first transfer transition, per live room
}

func newMetrics(w *Worker) *metrics {
	return &metrics{
		w: w,
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tandem_pd_events_total",
			Help: "Room events by kind and how the protocol core handled them (applied, parked, answered, late, rejected)."},
			[]string{"event", "outcome"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tandem_pd_room_failures_total",
			Help: "Rooms that ended Failed, by reason."}, []string{"reason"}),
		successes: prometheus.NewCounter(prometheus.CounterOpts{Name: "tandem_pd_room_successes_total",
			Help: "Rooms whose KV transfer succeeded."}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "tandem_pd_transfer_bytes_total",
			Help: "KV bytes of successful transfers (sent on prefill, received on decode)."}),
		transferSec: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tandem_pd_transfer_seconds",
			Help:    "Time from a room's first KV frame to the end of its transfer.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		kvDrops: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tandem_pd_kv_frames_dropped_total",
			Help: "KV frames whose bytes were discarded, by why."}, []string{"why"}),
		badFrames: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tandem_pd_bad_frames_total",
			Help: "Control frames dropped as malformed or unexpected, by why."}, []string{"why"}),
		sendDrops: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tandem_pd_send_frames_dropped_total",
			Help: "Frames the worker did not send, by why (room_ended: queued KV of a room that ended; over_budget; send_error)."},
			[]string{"why"}),
		queueDesc: prometheus.NewDesc("tandem_pd_queue_rooms", "Live rooms per queue (prefill: bootstrap, waiting, inflight; decode: prealloc, transfer).",
			[]string{"queue"}, nil),
		oldestDesc: prometheus.NewDesc("tandem_pd_queue_oldest_seconds", "Age of the oldest room in each queue (0 when empty).",
			[]string{"queue"}, nil),
		trDesc: prometheus.NewDesc("tandem_transfer_events_total",
			"Transport counters by name: frames and bytes in and out, handshakes, rejected or malformed traffic, peers lost.",
			[]string{"name"}, nil),
		started: map[room.ID]room.Instant{},
	}
}

// Register adds the worker's metrics to reg.
func (w *Worker) Register(reg prometheus.Registerer) error {
	m := w.met
	for _, c := range []prometheus.Collector{m.events, m.failures, m.successes, m.bytes, m.transferSec, m.kvDrops, m.badFrames, m.sendDrops, m} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// The driver.Observer methods run with Worker.mu held.

// Event counts one stepped event by kind and outcome.
func (m *metrics) Event(k room.EventKind, o room.Outcome) {
	m.events.WithLabelValues(k.String(), o.String()).Inc()
}

// KVDropped counts a received KV frame whose bytes were discarded.
func (m *metrics) KVDropped(why string) { m.kvDrops.WithLabelValues(why).Inc() }

// BadFrame counts a dropped control frame.
func (m *metrics) BadFrame(why string) { m.badFrames.WithLabelValues(why).Inc() }

// SendDropped counts frames that were not sent.
func (m *metrics) SendDropped(why string, n int) { m.sendDrops.WithLabelValues(why).Add(float64(n)) }

// Transition records transfer times and outcomes.
func (m *metrics) Transition(t room.Transition, bytes int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch t.To {
	case room.StateTransferring:
		if _, ok := m.started[t.Room]; !ok {
			m.started[t.Room] = t.At
		}
	case room.StateSucceeded, room.StateFailed:
		if t.To == room.StateSucceeded {
			m.successes.Inc()
			m.bytes.Add(float64(bytes))
			if at, ok := m.started[t.Room]; ok {
				m.transferSec.Observe(time.Duration(t.At - at).Seconds())
			}
		} else {
			m.failures.WithLabelValues(t.Reason.String()).Inc()
		}
		delete(m.started, t.Room)
	}
}

// queueOf names the queue a live room sits in.
func queueOf(r room.Role, s room.State) string {
	if r == room.RolePrefill {
		switch s {
		case room.StateBootstrapping:
			return "bootstrap"
		case room.StateWaitingForInput:
			return "waiting"
		default:
			return "inflight"
		}
	}
	if s == room.StateBootstrapping {
		return "prealloc"
	}
	return "transfer"
}

// Describe implements prometheus.Collector for the queue gauges.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.queueDesc
	ch <- m.oldestDesc
	ch <- m.trDesc
}

// Collect implements prometheus.Collector for the queue gauges.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	queues := []string{"prealloc", "transfer"}
	if m.w.role == room.RolePrefill {
		queues = []string{"bootstrap", "waiting", "inflight"}
	}
	// Copy the live rooms' states under the lock (no histories, no
	// tombstones) and count outside it: the engine's layer callbacks need
	// the same lock.
	m.w.mu.Lock()
	now := m.w.now()
	live := m.w.d.LiveRooms()
	m.w.mu.Unlock()
	count := map[string]int{}
	oldest := map[string]room.Duration{}
	for _, r := range live {
		q := queueOf(m.w.role, r.State)
		count[q]++
		oldest[q] = max(oldest[q], room.Duration(now-r.Created))
	}
	for _, q := range queues {
		ch <- prometheus.MustNewConstMetric(m.queueDesc, prometheus.GaugeValue, float64(count[q]), q)
		ch <- prometheus.MustNewConstMetric(m.oldestDesc, prometheus.GaugeValue, time.Duration(oldest[q]).Seconds(), q)
	}
	if m.w.tr != nil {
		for name, v := range m.w.tr.Counters() {
			ch <- prometheus.MustNewConstMetric(m.trDesc, prometheus.CounterValue, float64(v), name)
		}
	}
}
