package sim

import (
	"testing"

	"tandem/internal/pd/driver"
	"tandem/internal/pd/driver/drivertest"
	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
)

// The conformance suites of the driver's interfaces (package drivertest)
// against the simulator's fakes, as they run in a world of two prefill
// nodes (p1 down: the unreachable peer) and one decode node, on the
// virtual clock, without faults. The node under test reports to the
// suite's recorder instead of its driver; the other nodes run as usual.

// conformanceWorld returns the world and its three nodes, booted.
func conformanceWorld(t *testing.T) (s *sim, p0, p1, d0 *node) {
	t.Helper()
	sw := exhaustiveSwarm(1)
	sw.Prefills, sw.Requests, sw.PoolPages, sw.KVLayers, sw.PromptMax = 2, 0, 64, kvLayers, 4*pageTokens
	sw.StateBytes, sw.StateSlots = 2*kvPageBytes+3, 4 // three state frames, the last one short
	sw.Room.RoomsMax, sw.Room.TombstonesMax = 100, 100
	s = newSimSwarm(Options{Seed: 1}, sw)
	s.faults = false
	for _, n := range s.nodes {
		s.boot(n)
	}
	s.down(s.nodes[1], crashClose)
	t.Cleanup(func() {
		if s.v != nil {
			t.Errorf("the simulator found a violation: %v", s.v)
		}
	})
	return s, s.nodes[0], s.nodes[1], s.nodes[2]
}

// simHost is the suites' Host on a world: calls run directly (one
// goroutine), time passes by running the event queue.
type simHost struct{ s *sim }

func (h simHost) Do(f func()) { f() }

func (h simHost) Wait(cond func() bool) bool {
	for !cond() {
		if len(h.s.q) == 0 || h.s.v != nil {
			return cond()
		}
		h.step()
	}
	return true
}

func (h simHost) Settle() {
	for len(h.s.q) > 0 && h.s.v == nil {
		h.step()
	}
}

func (h simHost) step() {
	it := h.s.q.pop()
	h.s.now = max(h.s.now, it.at)
	h.s.handle(&it)
}

// request adds a request for room id from p to d, with a prompt of
// tokens, and returns n's leg of it, taken (as legArrive takes one).
func (s *sim) conformanceLeg(n *node, id room.ID, p, d *node, tokens int) *nodeLeg {
	r := &request{idx: len(s.reqs), id: id, reqID: "c" + id.String()[:6], name: "c" + id.String()[28:], p: p, d: d, prompt: tokens, generate: 4}
	s.reqs = append(s.reqs, r)
	k := int8(legPrefill)
	if n.role == room.RoleDecode {
		k = legDecode
	}
	r.legs[k].taken, r.legs[k].epoch = true, n.epoch
	l := &nodeLeg{n: n, req: r, leg: k}
	n.legList = append(n.legList, l)
	return l
}

type simWireHost struct {
	simHost
	n, to, gone *node
}

func (h simWireHost) Wire() driver.Wire   { return wire{h.s, h.n} }
func (h simWireHost) Reachable() string   { return h.to.addr }
func (h simWireHost) Unreachable() string { return h.gone.addr }
func (h simWireHost) KVPageBytes() int    { return kvPageBytes }

func TestConformanceWire(t *testing.T) {
	s, p0, p1, d0 := conformanceWorld(t)
	rec := drivertest.NewRecorder[*nodeLeg]()
	d0.rep = rec
	drivertest.TestWire(t, simWireHost{simHost{s}, d0, p0, p1}, rec)
}

type simEngineHost struct {
	simHost
	n, p *node
}

func (h simEngineHost) Engine() driver.Engine[*nodeLeg] { return engine{h.s, h.n} }
func (h simEngineHost) Role() room.Role                 { return h.n.role }
func (h simEngineHost) Layers() int                     { return h.s.sw.KVLayers }
func (h simEngineHost) PageBytes() int                  { return kvPageBytes }
func (h simEngineHost) StateBytes() int                 { return h.s.sw.StateBytes }

func (h simEngineHost) Leg(id room.ID) (*nodeLeg, int) {
	d := h.n
	if h.n.role == room.RolePrefill {
		d = h.s.nodes[2]
	}
	const tokens = 3*pageTokens + 5
	return h.s.conformanceLeg(h.n, id, h.p, d, tokens), pagesFor(tokens)
}

// Transfer writes what prefill computes for the room (kvByte) into its
// pages and records the first token, as the transfer would have.
func (h simEngineHost) Transfer(l *nodeLeg, dest driver.Pages, pages []int32, state []byte) driver.Token {
	for i := range state {
		state[i] = stateByte(l.req.id, i)
	}
	for o, pg := range pages {
		for layer := range h.s.sw.KVLayers {
			for kind := kvwire.KindK; kind <= kvwire.KindV; kind++ {
				kv := kvwire.KV{Layer: uint16(layer), Kind: kind, Ordinal: uint32(o)}
				b := dest.KVPage(layer, kind, pg)
				for i := range b {
					b[i] = kvByte(l.req.id, kv, i)
				}
			}
		}
	}
	h.s.tokens[roomAt{l.req.id, h.p.addr}] = 42
	return driver.Token{ID: 42, Logprob: -1}
}

func (h simEngineHost) Held() int {
	if h.n.role == room.RolePrefill {
		return h.n.kvHeld + len(h.n.jobs)
	}
	return len(h.n.pool.pages) - len(h.n.pool.free)
}

func TestConformanceEngine(t *testing.T) {
	for _, role := range []room.Role{room.RolePrefill, room.RoleDecode} {
		t.Run(role.String(), func(t *testing.T) {
			s, p0, _, d0 := conformanceWorld(t)
			n := p0
			if role == room.RoleDecode {
				n = d0
			}
			rec := drivertest.NewRecorder[*nodeLeg]()
			n.rep = rec
			drivertest.TestEngine(t, simEngineHost{simHost{s}, n, p0}, rec)
		})
	}
}

type simLegsHost struct {
	simHost
	p, d *node
}

func (h simLegsHost) Legs() driver.Legs[*nodeLeg] { return legs{h.s, h.p} }

// Leg takes a leg on p (prefill) or d; the Legs under test is p's, which
// answers whichever leg it is handed.
func (h simLegsHost) Leg(id room.ID, role room.Role) *nodeLeg {
	if role == room.RolePrefill {
		return h.s.conformanceLeg(h.p, id, h.p, h.d, pageTokens)
	}
	return h.s.conformanceLeg(h.d, id, h.p, h.d, pageTokens)
}

func (h simLegsHost) Answer(l *nodeLeg) (answered, ok bool, reason room.Reason) {
	for _, r := range room.Reasons() {
		if r.String() == l.note {
			reason = r
		}
	}
	return l.answered, l.ok, reason
}

func TestConformanceLegs(t *testing.T) {
	s, p0, _, d0 := conformanceWorld(t)
	rec := drivertest.NewRecorder[*nodeLeg]()
	p0.rep = rec
	drivertest.TestLegs(t, simLegsHost{simHost{s}, p0, d0}, rec)
}

type simPagesHost struct {
	s *sim
	n *node
}

// Pages reserves pages for a leg through the fake engine's admission and
// hands out its pool as the driver's Pages, as Admitted does.
func (h simPagesHost) Pages(t testing.TB) (driver.Pages, []int32, int, int) {
	rec := drivertest.NewRecorder[*nodeLeg]()
	h.n.rep = rec
	l := h.s.conformanceLeg(h.n, room.ID{0: 0xc1}, h.s.nodes[0], h.n, 3*pageTokens)
	if err := engine(h).Admit(l); err != nil {
		t.Fatal(err)
	}
	simHost{h.s}.Settle()
	cs := rec.Calls(func(c drivertest.Call[*nodeLeg]) bool { return c.Kind == "admitted" })
	if len(cs) != 1 {
		t.Fatalf("admission: %d Admitted reports", len(cs))
	}
	return cs[0].Dest, cs[0].Pages, h.s.sw.KVLayers, kvPageBytes
}

func (h simPagesHost) Read(layer int, kind kvwire.KVKind, page int32) []byte {
	return h.n.pool.kvSlot(layer, kind, page)
}

func TestConformancePages(t *testing.T) {
	s, _, _, d0 := conformanceWorld(t)
	drivertest.TestPages(t, simPagesHost{s, d0})
}
