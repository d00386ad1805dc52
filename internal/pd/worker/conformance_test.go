package worker

import (
	"testing"
	"time"

	"tandem/internal/engine"
	"tandem/internal/pd/driver"
	"tandem/internal/pd/driver/drivertest"
	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
)

// The conformance suites of the driver's interfaces (package drivertest)
// against the worker's adapters, on real engines (the tiny model) and a
// real transport over loopback. The worker under test reports to the
// suite's recorder instead of its driver.

// workerHost is the suites' Host on a worker: calls run under its mutex,
// as the driver's are; waiting polls, bounded.
type workerHost struct {
	w *Worker
	e *engine.Engine
}

// conformancePatience bounds a wait for what the worker's goroutines
// report.
const conformancePatience = 30 * time.Second

func (h workerHost) Do(f func()) {
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	f()
}

func (h workerHost) Wait(cond func() bool) bool {
	deadline := time.Now().Add(conformancePatience)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
	return true
}

// Settle waits until the engine has nothing waiting and no prompt left
// to compute: what a sequence reports after that has been reported.
func (h workerHost) Settle() {
	h.Wait(func() bool { st := h.e.Stats(); return st.Waiting == 0 && st.PrefillQueueTokens == 0 })
}

type workerWireHost struct {
	workerHost
	to string
}

func (h workerWireHost) Wire() driver.Wire   { return wireAdapter{h.w} }
func (h workerWireHost) Reachable() string   { return h.to }
func (h workerWireHost) Unreachable() string { return "127.0.0.1:1" } // nothing listens on port 1
func (h workerWireHost) KVPageBytes() int    { return h.w.kvCfg.PageBytes() }

func TestConformanceWire(t *testing.T) {
	pp := newPair(t, 512)
	rec := drivertest.NewRecorder[*leg]()
	pp.d.mu.Lock()
	pp.d.rep = rec
	pp.d.mu.Unlock()
	drivertest.TestWire(t, workerWireHost{workerHost{pp.d, pp.de}, pp.p.TransferAddr()}, rec)
}

type workerEngineHost struct{ workerHost }

func (h workerEngineHost) Engine() driver.Engine[*leg] { return engineAdapter{h.w} }
func (h workerEngineHost) Role() room.Role             { return h.w.role }
func (h workerEngineHost) Layers() int                 { return h.w.kvCfg.Layers }
func (h workerEngineHost) PageBytes() int              { return h.w.kvCfg.PageBytes() }
func (h workerEngineHost) StateBytes() int             { return h.w.stateBytes }

func (h workerEngineHost) Leg(id room.ID) (*leg, int) {
	req := engine.Request{Prompt: prompt(70), MaxTokens: 4, IgnoreEOS: true}
	return newLeg(h.w, id, req), h.w.kvCfg.PagesFor(len(req.Prompt))
}

// Transfer leaves the pages as they are: the engine resumes on whatever
// they hold, and its output is not checked here.
func (h workerEngineHost) Transfer(*leg, driver.Pages, []int32, []byte) driver.Token {
	return driver.Token{ID: 5, Logprob: -1}
}

func (h workerEngineHost) Held() int { return h.e.Stats().PagesUsed }

func TestConformanceEngine(t *testing.T) {
	m := tinyModel(t)
	for _, role := range []room.Role{room.RolePrefill, room.RoleDecode} {
		t.Run(role.String(), func(t *testing.T) {
			w, e := newWorker(t, m, role, 512)
			rec := drivertest.NewRecorder[*leg]()
			w.mu.Lock()
			w.rep = rec
			w.mu.Unlock()
			drivertest.TestEngine(t, workerEngineHost{workerHost{w, e}}, rec)
		})
	}
}

type workerLegsHost struct{ workerHost }

func (h workerLegsHost) Legs() driver.Legs[*leg] { return legsAdapter{} }

func (h workerLegsHost) Leg(id room.ID, _ room.Role) *leg {
	return newLeg(h.w, id, engine.Request{Prompt: prompt(8), MaxTokens: 2})
}

func (h workerLegsHost) Answer(l *leg) (answered, ok bool, reason room.Reason) {
	select {
	case <-l.finished:
	default:
		return false, false, 0
	}
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	if l.err == nil {
		return true, true, 0
	}
	return true, false, l.err.Reason
}

func TestConformanceLegs(t *testing.T) {
	w, e := newWorker(t, tinyModel(t), room.RoleDecode, 512)
	rec := drivertest.NewRecorder[*leg]()
	drivertest.TestLegs(t, workerLegsHost{workerHost{w, e}}, rec)
}

type workerPagesHost struct {
	workerHost
	pages cachePages
}

// Pages admits a leg on the decode engine through the engine adapter and
// hands out what Admitted gave: the cache's pages by the prompt's page
// ordinals.
func (h *workerPagesHost) Pages(t testing.TB) (driver.Pages, []int32, int, int) {
	rec := drivertest.NewRecorder[*leg]()
	h.w.mu.Lock()
	h.w.rep = rec
	l := newLeg(h.w, room.ID{0: 0xc1}, engine.Request{Prompt: prompt(70), MaxTokens: 2})
	err := engineAdapter{h.w}.Admit(l)
	h.w.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.cancelEngine)
	admitted := func(c drivertest.Call[*leg]) bool { return c.Kind == "admitted" }
	if !h.Wait(func() bool { return len(rec.Calls(admitted)) > 0 }) {
		t.Fatal("no Admitted")
	}
	a := rec.Calls(admitted)[0]
	h.pages = a.Dest.(cachePages)
	return a.Dest, a.Pages, h.w.kvCfg.Layers, h.w.kvCfg.PageBytes()
}

// Read reads the cache page of layer's group for the ordinal through the
// cache's own tables.
func (h *workerPagesHost) Read(layer int, kind kvwire.KVKind, ord int32) []byte {
	kv := h.pages.kv
	pg := h.pages.t.Layer(kv, layer)[ord]
	if kind == kvwire.KindK {
		return kv.KPage(layer, pg)
	}
	return kv.VPage(layer, pg)
}

func TestConformancePages(t *testing.T) {
	w, e := newWorker(t, tinyModel(t), room.RoleDecode, 512)
	drivertest.TestPages(t, &workerPagesHost{workerHost: workerHost{w, e}})
}
