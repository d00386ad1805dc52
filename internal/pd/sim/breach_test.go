package sim

import (
	"testing"

	"tandem/internal/pd/driver"
	"tandem/internal/pd/driver/drivertest"
	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
)

// The conformance suites must catch a fake that breaches its contract:
// each case wraps one of the simulator's fakes (or where it reports) in a
// test-only decorator that breaches the contract, runs the suite against
// it through drivertest.CheckBreach, and wants a failure naming the breach.
// Each case's control, the same run without the decorator, must report
// nothing, so that what the suite reports is the breach's doing.

// doubleComputeDone delivers every ComputeDone twice.
type doubleComputeDone struct{ driver.Reports[*nodeLeg] }

func (r doubleComputeDone) ComputeDone(now room.Instant, id room.ID, l *nodeLeg, first driver.Token) {
	r.Reports.ComputeDone(now, id, l, first)
	r.Reports.ComputeDone(now, id, l, first)
}

// dropLastState reports every KV frame but the last state frame (released
// at once, as a frame nobody sends).
type dropLastState struct {
	driver.Reports[*nodeLeg]
	last uint32 // the last state frame's ordinal
}

func (r dropLastState) KVReady(now room.Instant, id room.ID, l *nodeLeg, frames []driver.KVFrame) {
	last := -1
	for i, f := range frames {
		if f.KV.Kind == kvwire.KindState {
			last = i
		}
	}
	if last >= 0 && frames[last].KV.Ordinal == r.last {
		if frames[last].Release != nil {
			frames[last].Release()
		}
		frames = append(frames[:last:last], frames[last+1:]...)
	}
	r.Reports.KVReady(now, id, l, frames)
}

// cancelKeepsPages is an engine whose Cancel does nothing: a cancelled
// admission keeps its pages.
type cancelKeepsPages struct{ driver.Engine[*nodeLeg] }

func (cancelKeepsPages) Cancel(*nodeLeg) {}

// breachedEngineHost hands out its engine through wrap.
type breachedEngineHost struct {
	simEngineHost
	wrap func(driver.Engine[*nodeLeg]) driver.Engine[*nodeLeg]
}

func (h breachedEngineHost) Engine() driver.Engine[*nodeLeg] {
	return h.wrap(h.simEngineHost.Engine())
}

// releaseTwice is a wire that calls each KV frame's Release twice.
type releaseTwice struct{ driver.Wire }

func (w releaseTwice) Send(f driver.Frame) {
	if r := f.Release; r != nil {
		f.Release = func() { r(); r() }
	}
	w.Wire.Send(f)
}

type breachedWireHost struct{ simWireHost }

func (h breachedWireHost) Wire() driver.Wire { return releaseTwice{h.simWireHost.Wire()} }

// failWithEngine is a Legs that fails every leg with ReasonEngine,
// whatever the room's reason.
type failWithEngine struct{ driver.Legs[*nodeLeg] }

func (l failWithEngine) Fail(leg *nodeLeg, _ room.Reason) { l.Legs.Fail(leg, room.ReasonEngine) }

type breachedLegsHost struct{ simLegsHost }

func (h breachedLegsHost) Legs() driver.Legs[*nodeLeg] { return failWithEngine{h.simLegsHost.Legs()} }

// vOnK is a Pages that hands out a page's K for its V too: two frames on
// one page of memory.
type vOnK struct{ driver.Pages }

func (p vOnK) KVPage(layer int, _ kvwire.KVKind, page int32) []byte {
	return p.Pages.KVPage(layer, kvwire.KindK, page)
}

type breachedPagesHost struct{ simPagesHost }

func (h breachedPagesHost) Pages(t testing.TB) (driver.Pages, []int32, int, int) {
	p, pages, layers, pageBytes := h.simPagesHost.Pages(t)
	return vOnK{p}, pages, layers, pageBytes
}

func TestConformanceCatchesBreaches(t *testing.T) {
	for _, c := range []struct {
		name, want string
		run        func(t *testing.T, tb testing.TB, breach bool)
	}{{
		name: "Engine/prefill/ComputeDone twice",
		want: "2 ComputeDone reports, want 1",
		run: func(t *testing.T, tb testing.TB, breach bool) {
			s, p0, _, _ := conformanceWorld(t)
			rec := drivertest.NewRecorder[*nodeLeg]()
			p0.rep = rec
			if breach {
				p0.rep = doubleComputeDone{rec}
			}
			drivertest.TestEngine(tb, simEngineHost{simHost{s}, p0, p0}, rec)
		},
	}, {
		name: "Engine/prefill/a state frame left out",
		want: "distinct KV frames reported, want",
		run: func(t *testing.T, tb testing.TB, breach bool) {
			s, p0, _, _ := conformanceWorld(t)
			rec := drivertest.NewRecorder[*nodeLeg]()
			p0.rep = rec
			if breach {
				p0.rep = dropLastState{rec, uint32((s.sw.StateBytes - 1) / kvPageBytes)}
			}
			drivertest.TestEngine(tb, simEngineHost{simHost{s}, p0, p0}, rec)
		},
	}, {
		name: "Engine/decode/Cancel keeps the pages",
		want: "a cancelled admission to give its pages back",
		run: func(t *testing.T, tb testing.TB, breach bool) {
			s, p0, _, d0 := conformanceWorld(t)
			rec := drivertest.NewRecorder[*nodeLeg]()
			d0.rep = rec
			h := breachedEngineHost{simEngineHost{simHost{s}, d0, p0}, func(e driver.Engine[*nodeLeg]) driver.Engine[*nodeLeg] { return e }}
			if breach {
				h.wrap = func(e driver.Engine[*nodeLeg]) driver.Engine[*nodeLeg] { return cancelKeepsPages{e} }
			}
			drivertest.TestEngine(tb, h, rec)
		},
	}, {
		name: "Wire/Release twice",
		want: "released 2 times, want 1",
		run: func(t *testing.T, tb testing.TB, breach bool) {
			s, p0, p1, d0 := conformanceWorld(t)
			rec := drivertest.NewRecorder[*nodeLeg]()
			d0.rep = rec
			h := simWireHost{simHost{s}, d0, p0, p1}
			if breach {
				drivertest.TestWire(tb, breachedWireHost{h}, rec)
				return
			}
			drivertest.TestWire(tb, h, rec)
		},
	}, {
		name: "Legs/the wrong reason",
		want: "want a failure with",
		run: func(t *testing.T, tb testing.TB, breach bool) {
			s, p0, _, d0 := conformanceWorld(t)
			rec := drivertest.NewRecorder[*nodeLeg]()
			p0.rep = rec
			h := simLegsHost{simHost{s}, p0, d0}
			if breach {
				drivertest.TestLegs(tb, breachedLegsHost{h}, rec)
				return
			}
			drivertest.TestLegs(tb, h, rec)
		},
	}, {
		name: "Pages/V on K's page",
		want: "overlaps another frame's page",
		run: func(t *testing.T, tb testing.TB, breach bool) {
			s, _, _, d0 := conformanceWorld(t)
			h := simPagesHost{s, d0}
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
