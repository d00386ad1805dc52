package cores_test

import (
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tandem/internal/engine/cores"
)

// rounds runs kernel rounds on l as a worker's pool does (a step, a core
// at round start, a little work, the core given back) until stop closes,
// and records how long each round waited for its core and when it started.
type rounds struct {
	mu    sync.Mutex
	start []time.Time
	wait  []time.Duration
}

func (rs *rounds) run(l *cores.Lease, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		end := l.Step(cores.Normal)
		t0 := time.Now()
		l.Acquire()
		w := time.Since(t0)
		time.Sleep(5 * time.Millisecond)
		l.Release()
		end()
		rs.mu.Lock()
		rs.start, rs.wait = append(rs.start, t0), append(rs.wait, w)
		rs.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
}

// worst returns the longest wait of the rounds that started at or after
// from, and how many there were.
func (rs *rounds) worst(from time.Time) (time.Duration, int) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var w time.Duration
	n := 0
	for i, s := range rs.start {
		if !s.Before(from) {
			w, n = max(w, rs.wait[i]), n+1
		}
	}
	return w, n
}

func gauge(t *testing.T, c prometheus.Collector, name string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestPoisonedRegionRecovers is finding 6 of the 2026-12-03 red-team run:
// a process of the cluster's user maps the region and writes it for 15 s
// (every slot's count at 255, priorities and heartbeats junk). Before
// self-repair every round of every worker then waited MaxWait for good.
// Now rounds keep getting cores while the writes go on (counts above the
// core count are ignored), every lease rewrites its own slot from what it
// holds, the workers are back to unforced rounds within a second of the
// last write, and /health's reason and the metrics show it until the
// window passes.
func TestPoisonedRegionRecovers(t *testing.T) {
	for _, mode := range []string{"alloc", "junk"} {
		t.Run(mode, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRegion(t, 2, 2)
				a := newLease(t, r, 0, cores.Options{})
				b := newLease(t, r, 1, cores.Options{})
				evil, err := cores.Open("/proc/self/fd/" + itoa(int(r.File().Fd())))
				if err != nil {
					t.Fatal(err)
				}
				defer evil.Close()
				stop := make(chan struct{})
				var ra, rb rounds
				var wg sync.WaitGroup
				wg.Go(func() { ra.run(a, stop) })
				wg.Go(func() { rb.run(b, stop) })
				defer func() { close(stop); wg.Wait() }()

				time.Sleep(time.Second)
				if d, why := a.Health(); d {
					t.Fatalf("health degraded before any write: %s", why)
				}
				rng := rand.New(rand.NewPCG(1, 2))
				poisonStart := time.Now()
				for time.Since(poisonStart) < 15*time.Second {
					switch mode {
					case "alloc":
						evil.PoisonAlloc(^uint64(0))
					case "junk":
						evil.PoisonAlloc(rng.Uint64())
						for i := range 2 {
							evil.PoisonSlot(i, cores.SlotPrio, rng.Uint64())
							evil.PoisonSlot(i, cores.SlotBeat, rng.Uint64())
						}
					}
					time.Sleep(10 * time.Millisecond)
					if d, _ := a.Health(); time.Since(poisonStart) > 2*time.Second && !d {
						t.Fatalf("health not degraded %v into the writes", time.Since(poisonStart))
					}
				}
				stopped := time.Now()
				_, why := b.Health()
				t.Logf("health during the writes: %s", why)
				if !strings.Contains(why, "core lease") {
					t.Errorf("the degraded reason %q does not name the core lease", why)
				}
				if n := gauge(t, cores.NewCollector(a), "tandem_core_lease_repairs_total"); n == 0 {
					t.Errorf("tandem_core_lease_repairs_total is 0 after 15 s of writes")
				}
				if g := gauge(t, cores.NewCollector(b), "tandem_core_lease_degraded"); g != 1 {
					t.Errorf("tandem_core_lease_degraded = %v during the writes, want 1", g)
				}
				forced := a.Stats().Forced + b.Stats().Forced
				time.Sleep(5 * time.Second)
				from := stopped.Add(time.Second)
				for name, rs := range map[string]*rounds{"slot 0": &ra, "slot 1": &rb} {
					w, n := rs.worst(from)
					if n < 100 || w > 100*time.Millisecond {
						t.Errorf("%s: %d rounds from 1 s after the writes stopped, the worst waited %v; want >= 100 rounds, none over MaxPark", name, n, w)
					}
				}
				if f := a.Stats().Forced + b.Stats().Forced; f != forced {
					t.Errorf("%d more forced rounds after the writes stopped", f-forced)
				}
				for i := range 2 {
					if h := r.Held(i); h > 2 {
						t.Errorf("slot %d holds %d cores after recovery", i, h)
					}
				}
				time.Sleep(10 * time.Second)
				if d, why := a.Health(); d {
					t.Errorf("health still degraded 15 s after the writes stopped: %s", why)
				}
				if g := gauge(t, cores.NewCollector(a), "tandem_core_lease_degraded"); g != 0 {
					t.Errorf("tandem_core_lease_degraded = %v after recovery, want 0", g)
				}
			})
		})
	}
}
