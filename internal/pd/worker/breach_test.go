package worker

import (
	"slices"
	"testing"

	"tandem/internal/pd/driver"
	"tandem/internal/pd/driver/drivertest"
	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
)

// The conformance suites must catch an adapter that breaches its
// contract: each case wraps one of the worker's adapters (or where it
// reports) in a test-only decorator that breaches the contract, runs the
// suite against it through drivertest.CheckBreach, and wants a failure
// naming the breach; the same run without the decorator must report
// nothing.

// reportsInside is an engine whose StartCompute reports an EngineError
// synchronously, from inside the call.
type reportsInside struct {
	driver.Engine[*leg]
	rep driver.Reports[*leg]
}

func (e reportsInside) StartCompute(l *leg, pages int) error {
	err := e.Engine.StartCompute(l, pages)
	if err == nil {
		e.rep.EngineError(0, l.id, l)
	}
	return err
}

type breachedEngineHost struct {
	workerEngineHost
	wrap func(driver.Engine[*leg]) driver.Engine[*leg]
}

func (h breachedEngineHost) Engine() driver.Engine[*leg] { return h.wrap(h.workerEngineHost.Engine()) }

// admittedElsewhere names another room in every Admitted.
type admittedElsewhere struct{ driver.Reports[*leg] }

func (r admittedElsewhere) Admitted(now room.Instant, id room.ID, l *leg, dest driver.Pages, pages []int32, state []byte) {
	id[15] ^= 0xff
	r.Reports.Admitted(now, id, l, dest, pages, state)
}

// sentTwice delivers every Sent twice.
type sentTwice struct{ driver.Reports[*leg] }

func (r sentTwice) Sent(now room.Instant, peer string, lane driver.Lane, err error) {
	r.Reports.Sent(now, peer, lane, err)
	r.Reports.Sent(now, peer, lane, err)
}

// succeedFails is a Legs whose Succeed fails the leg.
type succeedFails struct{ driver.Legs[*leg] }

func (l succeedFails) Succeed(g *leg) { l.Legs.Fail(g, room.ReasonEngine) }

type breachedLegsHost struct{ workerLegsHost }

func (h breachedLegsHost) Legs() driver.Legs[*leg] { return succeedFails{h.workerLegsHost.Legs()} }

// pageCopies is a Pages that hands out a copy of each page: what is
// written there never reaches the cache.
type pageCopies struct{ driver.Pages }

func (p pageCopies) KVPage(layer int, kind kvwire.KVKind, page int32) []byte {
	return slices.Clone(p.Pages.KVPage(layer, kind, page))
}

type breachedPagesHost struct{ *workerPagesHost }

func (h breachedPagesHost) Pages(t testing.TB) (driver.Pages, []int32, int, int) {
	p, pages, layers, pageBytes := h.workerPagesHost.Pages(t)
	return pageCopies{p}, pages, layers, pageBytes
}

func TestConformanceCatchesBreaches(t *testing.T) {
	m := tinyModel(t)
	for _, c := range []struct {
		name, want string
		run        func(t *testing.T, tb testing.TB, breach bool)
	}{{
		name: "Engine/prefill/EngineError from inside StartCompute",
		want: "called back into the driver inside a call to it (engine_error)",
		run: func(t *testing.T, tb testing.TB, breach bool) {
			w, e := newWorker(t, m, room.RolePrefill, 512)
			rec := drivertest.NewRecorder[*leg]()
			w.mu.Lock()
			w.rep = rec
			w.mu.Unlock()
			h := breachedEngineHost{workerEngineHost{workerHost{w, e}}, func(e driver.Engine[*leg]) driver.Engine[*leg] { return e }}
			if breach {
				h.wrap = func(e driver.Engine[*leg]) driver.Engine[*leg] { return reportsInside{e, rec} }
			}
			drivertest.TestEngine(tb, h, rec)
		},
	}, {
		name: "Engine/decode/Admitted for another room",
		want: "pages [0 1 2 3 4]) for room c0650000000000000000000000000003",
		run: func(t *testing.T, tb testing.TB, breach bool) {
			w, e := newWorker(t, m, room.RoleDecode, 512)
			rec := drivertest.NewRecorder[*leg]()
			w.mu.Lock()
			w.rep = rec
			if breach {
				w.rep = admittedElsewhere{rec}
			}
			w.mu.Unlock()
			drivertest.TestEngine(tb, workerEngineHost{workerHost{w, e}}, rec)
		},
	}, {
		name: "Wire/Sent twice",
		want: "want 1, the last without an error",
		run: func(t *testing.T, tb testing.TB, breach bool) {
			pp := newPair(t, 512)
			rec := drivertest.NewRecorder[*leg]()
			pp.d.mu.Lock()
			pp.d.rep = rec
			if breach {
				pp.d.rep = sentTwice{rec}
			}
			pp.d.mu.Unlock()
			drivertest.TestWire(tb, workerWireHost{workerHost{pp.d, pp.de}, pp.p.TransferAddr()}, rec)
		},
	}, {
		name: "Legs/Succeed fails the leg",
		want: "after Succeed: answered true, ok false",
		run: func(t *testing.T, tb testing.TB, breach bool) {
			w, e := newWorker(t, m, room.RoleDecode, 512)
			rec := drivertest.NewRecorder[*leg]()
			h := workerLegsHost{workerHost{w, e}}
			if breach {
				drivertest.TestLegs(tb, breachedLegsHost{h}, rec)
				return
			}
			drivertest.TestLegs(tb, h, rec)
		},
	}, {
		name: "Pages/a copy of the page",
		want: "gave other memory on a second call",
		run: func(t *testing.T, tb testing.TB, breach bool) {
			w, e := newWorker(t, m, room.RoleDecode, 512)
			h := &workerPagesHost{workerHost: workerHost{w, e}}
			if breach {
				drivertest.TestPages(tb, breachedPagesHost{h})
				return
			}
			drivertest.TestPages(tb, h)
		},
	}} {
		drivertest.CheckBreach(t, c.name, c.want, c.run)
	}
}
