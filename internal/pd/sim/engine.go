package sim

import (
	"fmt"

	"tandem/internal/pd/driver"
	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
)

// The fake engines, the driver's Engine (and decode's Pages). Prefill runs
// prompts, PrefillSlots at a time in submission order, each in up to
// chunksMax chunks; each chunk hands its pages' KV frames (every layer, K
// and V, bytes derived from the room and coordinates) to Driver.KVReady,
// and after the last chunk Driver.ComputeDone reports the first token.
// Decode reserves pages from a finite pool in FIFO order and reports them
// with Driver.Admitted a little later; Resume runs a generation on them
// that frees them at its end and answers the leg; Cancel frees whatever
// the leg holds. Every page must come back, and none may be freed or
// reused while a KV write into it is in flight (the driver's quarantine).

// job is one prompt on the prefill engine.
type job struct {
	gen     uint64
	leg     *nodeLeg
	chunks  int
	next    int // chunks done
	failAt  int // chunk at which the engine fails (-1: never)
	running bool
}

// pageState says who holds a decode page.
type pageState uint8

const (
	pageFree     pageState = iota
	pageReserved           // the engine reserved it for a leg (Admitted reports it; the room writes KV into it)
	pageSequence           // the leg's room resumed: the running sequence holds it
)

// String names a page state.
func (p pageState) String() string { return [...]string{"free", "reserved", "held by its sequence"}[p] }

type page struct {
	state pageState
	leg   *nodeLeg
}

// pool is a decode engine's KV cache: pages, their bytes and a free list.
// It is the driver's Pages for every room of the node.
type pool struct {
	pages    []page
	layers   int
	data     []byte // layers*2*kvPageBytes bytes per page
	free     []int32
	lastPage int32 // the page of the last KVPage call (KVDest's destination)
	writes   []int // KV writes in flight per page

	// the state slots: who holds each, their bytes (stateB each), the
	// free list and the state writes in flight per slot
	slots       []page
	stateB      int
	stateData   []byte
	stateFree   []int32
	stateWrites []int
}

func newPool(n, layers, slots, stateB int) pool {
	p := pool{pages: make([]page, n), layers: layers, data: make([]byte, n*layers*2*kvPageBytes), writes: make([]int, n)}
	for i := n - 1; i >= 0; i-- {
		p.free = append(p.free, int32(i))
	}
	if stateB > 0 {
		p.slots, p.stateB, p.stateData, p.stateWrites = make([]page, slots), stateB, make([]byte, slots*stateB), make([]int, slots)
		for i := slots - 1; i >= 0; i-- {
			p.stateFree = append(p.stateFree, int32(i))
		}
	}
	return p
}

// stateBuf is slot's state bytes.
func (p *pool) stateBuf(slot int32) []byte {
	off := int(slot) * p.stateB
	return p.stateData[off : off+p.stateB : off+p.stateB]
}

// stateSlotOf returns the slot whose bytes dst starts in (at a multiple of
// chunk), or -1.
func (p *pool) stateSlotOf(dst []byte, chunk int) int32 {
	if len(dst) == 0 || p.stateB == 0 {
		return -1
	}
	for i := range p.slots {
		buf := p.stateBuf(int32(i))
		for off := 0; off < len(buf); off += chunk {
			if &buf[off] == &dst[0] {
				return int32(i)
			}
		}
	}
	return -1
}

// kvSlot is a page's bytes for one layer and kind.
func (p *pool) kvSlot(layer int, kind kvwire.KVKind, pg int32) []byte {
	off := (int(pg)*p.layers*2 + layer*2 + int(kind)) * kvPageBytes
	return p.data[off : off+kvPageBytes : off+kvPageBytes]
}

// KVPage returns the bytes of layer's K or V page number pg.
func (p *pool) KVPage(layer int, kind kvwire.KVKind, pg int32) []byte {
	p.lastPage = pg
	if pg < 0 || int(pg) >= len(p.pages) || layer < 0 || layer >= p.layers || kind > kvwire.KindV {
		p.lastPage = -1
		return nil
	}
	return p.kvSlot(layer, kind, pg)
}

// admission is a leg waiting in the decode engine for pages.
type admission struct {
	leg  *nodeLeg
	need int
}

// generation is a resumed decode sequence.
type generation struct {
	leg   *nodeLeg
	pages []int32
}

// stateByte is byte i of room id's final prompt state: what prefill
// computes and decode must find in its state slot when it resumes.
func stateByte(id room.ID, i int) byte {
	return id[(i*5+3)%len(id)] ^ byte(i*29) ^ 0x5a
}

// kvByte is byte i of the KV of (room, ordinal, layer, kind): what prefill
// computes and decode must find in its pages when it resumes.
func kvByte(id room.ID, kv kvwire.KV, i int) byte {
	return id[(int(kv.Ordinal)+i)%len(id)] ^ byte(kv.Ordinal*7) ^ byte(kv.Layer*13) ^ byte(int(kv.Kind)*101) ^ byte(i)
}

// engine is the driver's Engine on node n.
type engine struct {
	s *sim
	n *node
}

// StartCompute submits a prompt: it refuses a page count that does not
// fit the prompt (and now and then fails at once, while faults are on).
func (e engine) StartCompute(l *nodeLeg, pages int) error {
	s, n := e.s, e.n
	if s.tracing {
		s.tracef("%v %s engine start_compute %s pages=%d", s.now, n.addr, l.req.name, pages)
	}
	want := pagesFor(l.req.prompt)
	if pages != want {
		return fmt.Errorf("prompt of %d tokens needs %d pages, the room has %d", l.req.prompt, want, pages)
	}
	if s.chance(s.sw.EngineErrorRate / 2) {
		return fmt.Errorf("engine refused the prompt (injected)")
	}
	n.jobGen++
	j := &job{gen: n.jobGen, leg: l, chunks: min(want, 1+s.rng.IntN(chunksMax)), failAt: -1}
	if s.chance(s.sw.EngineErrorRate / 2) {
		j.failAt = s.rng.IntN(j.chunks)
	}
	n.jobs = append(n.jobs, j)
	s.startJobs(n)
	return nil
}

// Admit queues a decode leg for its prompt's pages; an engine that can
// never hold the prompt refuses it at once.
func (e engine) Admit(l *nodeLeg) error {
	s, n := e.s, e.n
	if s.tracing {
		s.tracef("%v %s engine admit %s", s.now, n.addr, l.req.name)
	}
	need := pagesFor(l.req.prompt)
	if need > len(n.pool.pages) {
		return fmt.Errorf("prompt needs %d pages, the pool has %d", need, len(n.pool.pages))
	}
	if s.chance(s.sw.EngineErrorRate / 2) {
		return fmt.Errorf("engine refused the request (injected)")
	}
	n.admitQ = append(n.admitQ, admission{leg: l, need: need})
	s.tryAdmit(n)
	return nil
}

// Resume hands the leg's reserved pages to a running sequence, which
// generates the rest of the answer. The KV in the pages must be exactly
// what prefill computed, and the token the one it sampled.
func (e engine) Resume(l *nodeLeg, first driver.Token) error {
	s, n := e.s, e.n
	r := l.req
	if s.tracing {
		s.tracef("%v %s engine resume %s token=%d", s.now, n.addr, r.name, first.ID)
	}
	if tok, ok := s.tokens[roomAt{r.id, r.p.addr}]; !ok || tok != first.ID {
		s.violate("resume", "%s resumed room=%v from token %d; prefill computed %d (known %v)", n.addr, r.id, first.ID, tok, ok)
		return nil
	}
	// Ordinal o lives in the o-th page the engine gave Driver.Admitted.
	pages := n.admittedPages[l]
	held := 0
	for _, pg := range n.pool.pages {
		if pg.leg == l {
			held++
		}
	}
	if len(pages) != pagesFor(r.prompt) || held != len(pages) {
		s.violate("resume", "%s resumed room=%v holding %d pages (admitted %d), want %d", n.addr, r.id, held, len(pages), pagesFor(r.prompt))
		return nil
	}
	for o, p := range pages {
		if pg := n.pool.pages[p]; pg.state != pageReserved || pg.leg != l {
			s.violate("pages", "%s: resume of room=%v finds its page %d %v", n.addr, r.id, p, pg.state)
			return nil
		}
		for layer := range s.sw.KVLayers {
			for kind := kvwire.KindK; kind <= kvwire.KindV; kind++ {
				kv := kvwire.KV{Layer: uint16(layer), Kind: kind, Ordinal: uint32(o)}
				got := n.pool.kvSlot(layer, kind, p)
				for i := range got {
					if got[i] != kvByte(r.id, kv, i) {
						s.violate("resume", "%s resumed room=%v but page %d (ordinal %d layer %d %v) byte %d is %#x, prefill computed %#x",
							n.addr, r.id, p, o, layer, kind, i, got[i], kvByte(r.id, kv, i))
						return nil
					}
				}
			}
		}
	}
	if n.pool.stateB > 0 {
		slot, ok := n.admittedState[l]
		if !ok || n.pool.slots[slot].state != pageReserved || n.pool.slots[slot].leg != l {
			s.violate("resume", "%s resumed room=%v without its state slot (admitted %v)", n.addr, r.id, ok)
			return nil
		}
		got := n.pool.stateBuf(slot)
		for i := range got {
			if got[i] != stateByte(r.id, i) {
				s.violate("resume", "%s resumed room=%v but its state byte %d (frame %d) is %#x, prefill computed %#x",
					n.addr, r.id, i, i/s.sw.stateChunk(), got[i], stateByte(r.id, i))
				return nil
			}
		}
		n.pool.slots[slot].state = pageSequence
	}
	for _, p := range pages {
		n.pool.pages[p].state = pageSequence
	}
	n.gens[l] = &generation{leg: l, pages: pages}
	d := room.Duration(r.generate) * s.sw.DecodePerToken * room.Duration(n.slow)
	s.after(d, item{kind: itemGenerated, node: int32(n.idx), epoch: n.epoch, nl: l})
	s.after(s.between(50*us, s.sw.LegLatencyMax), item{kind: itemStream, req: int32(r.idx)})
	return nil
}

// Cancel ends the leg's engine work: a prompt (prefill), a queued
// admission, reserved pages or a running sequence (decode). A running
// sequence's leg is answered (the client went away). Idempotent.
func (e engine) Cancel(l *nodeLeg) {
	s, n := e.s, e.n
	if s.tracing && !l.cancelled {
		s.tracef("%v %s engine cancel %s", s.now, n.addr, l.req.name)
	}
	l.cancelled = true
	if n.role == room.RolePrefill {
		for _, j := range n.jobs {
			if j.leg == l {
				s.removeJob(n, j)
				break
			}
		}
		return
	}
	for i, a := range n.admitQ {
		if a.leg == l {
			n.admitQ = append(n.admitQ[:i], n.admitQ[i+1:]...)
			break
		}
	}
	if g := n.gens[l]; g != nil {
		delete(n.gens, l)
		s.answerLeg(n, l, false, "client_abort")
	}
	s.freeLeg(n, l, "cancel")
}

// startJobs starts queued prompts while a slot is free.
func (s *sim) startJobs(n *node) {
	running := 0
	for _, j := range n.jobs {
		if j.running {
			running++
			continue
		}
		if running >= s.sw.PrefillSlots {
			return
		}
		j.running = true
		running++
		s.scheduleChunk(n, j)
	}
}

// scheduleChunk queues the end of j's next chunk.
func (s *sim) scheduleChunk(n *node, j *job) {
	tokens := (j.leg.req.prompt + j.chunks - 1) / j.chunks
	d := room.Duration(tokens) * s.sw.ComputePerToken * room.Duration(n.slow)
	s.after(d, item{kind: itemCompute, node: int32(n.idx), epoch: n.epoch, gen: j.gen})
}

// findJob returns the live job with gen, or nil.
func findJob(n *node, gen uint64) *job {
	for _, j := range n.jobs {
		if j.gen == gen {
			return j
		}
	}
	return nil
}

// chunkDone finishes a chunk: hand its KV frames to the driver, or fail,
// or after the last chunk report the first token.
func (s *sim) chunkDone(it *item) {
	n := s.nodes[it.node]
	if !n.up || it.epoch != n.epoch {
		return
	}
	j := findJob(n, it.gen)
	if j == nil {
		return // cancelled
	}
	l, id := j.leg, j.leg.req.id
	c := j.next
	j.next++
	if c == j.failAt {
		s.removeJob(n, j)
		s.call(n, room.Event{Kind: room.EventEngineError, Room: id}, func() { n.rep.EngineError(s.now, id, l) })
		return
	}
	pages := pagesFor(l.req.prompt)
	var frames []driver.KVFrame
	for o := c * pages / j.chunks; o < (c+1)*pages/j.chunks; o++ {
		for layer := range s.sw.KVLayers {
			for kind := kvwire.KindK; kind <= kvwire.KindV; kind++ {
				kv := kvwire.KV{Layer: uint16(layer), Kind: kind, Ordinal: uint32(o)}
				data := make([]byte, kvPageBytes)
				for i := range data {
					data[i] = kvByte(id, kv, i)
				}
				frames = append(frames, driver.KVFrame{KV: kv, Data: data, Release: s.holdKV(n, id, kv)})
			}
		}
	}
	last := j.next >= j.chunks
	if last {
		s.removeJob(n, j)
		// The prompt's final state, after its last page.
		for o, c := 0, s.sw.stateChunk(); o < s.sw.stateFrames(); o++ {
			kv := kvwire.KV{Kind: kvwire.KindState, Ordinal: uint32(o)}
			data := make([]byte, min(c, s.sw.StateBytes-o*c))
			for i := range data {
				data[i] = stateByte(id, o*c+i)
			}
			frames = append(frames, driver.KVFrame{KV: kv, Data: data, Release: s.holdKV(n, id, kv)})
		}
	}
	s.call(n, room.Event{}, func() { n.rep.KVReady(s.now, id, l, frames) })
	if s.v != nil || !n.up || it.epoch != n.epoch {
		return
	}
	if !last {
		if findJob(n, j.gen) != nil {
			s.scheduleChunk(n, j)
		}
		return
	}
	if l.cancelled {
		return
	}
	var token int32
	if s.chooser != nil {
		token = int32(id[0]) | int32(id[1])<<8 // the search: independent of the order of random draws
	} else {
		token = int32(s.rng.IntN(32000))
	}
	s.tokens[roomAt{id, n.addr}] = token
	s.call(n, room.Event{Kind: room.EventComputeDone, Room: id}, func() {
		n.rep.ComputeDone(s.now, id, l, driver.Token{ID: token, Logprob: -0.5})
	})
}

// removeJob takes j off the engine and starts the next prompt.
func (s *sim) removeJob(n *node, j *job) {
	for i, x := range n.jobs {
		if x == j {
			n.jobs = append(n.jobs[:i], n.jobs[i+1:]...)
			break
		}
	}
	s.startJobs(n)
}

// tryAdmit reserves pages for the queue's head while they fit; each
// reservation reaches the driver as Admitted a little later.
func (s *sim) tryAdmit(n *node) {
	for len(n.admitQ) > 0 && n.admitQ[0].need <= len(n.pool.free) && (n.pool.stateB == 0 || len(n.pool.stateFree) > 0) {
		a := n.admitQ[0]
		n.admitQ = n.admitQ[1:]
		slot := int32(-1)
		if n.pool.stateB > 0 {
			slot = n.pool.stateFree[len(n.pool.stateFree)-1]
			n.pool.stateFree = n.pool.stateFree[:len(n.pool.stateFree)-1]
			if sl := n.pool.slots[slot]; sl.state != pageFree || n.pool.stateWrites[slot] != 0 {
				s.violate("pages", "%s: state slot %d on the free list is %v with %d writes in flight", n.addr, slot, sl.state, n.pool.stateWrites[slot])
				return
			}
			n.pool.slots[slot] = page{state: pageReserved, leg: a.leg}
			n.admittedState[a.leg] = slot
		}
		pages := make([]int32, a.need)
		for i := range pages {
			p := n.pool.free[len(n.pool.free)-1]
			n.pool.free = n.pool.free[:len(n.pool.free)-1]
			if pg := n.pool.pages[p]; pg.state != pageFree || n.pool.writes[p] != 0 {
				s.violate("pages", "%s: page %d on the free list is %v with %d writes in flight", n.addr, p, pg.state, n.pool.writes[p])
				return
			}
			n.pool.pages[p] = page{state: pageReserved, leg: a.leg}
			pages[i] = p
		}
		n.admittedPages[a.leg] = pages
		d := s.between(0, s.sw.AdmitDelayMax) * room.Duration(n.slow)
		s.after(d, item{kind: itemAdmitted, node: int32(n.idx), epoch: n.epoch, nl: a.leg, pages: pages, slot: slot})
	}
}

// admitted reports a reservation to the driver.
func (s *sim) admitted(it *item) {
	n := s.nodes[it.node]
	if !n.up || it.epoch != n.epoch {
		return
	}
	l, id := it.nl, it.nl.req.id
	s.call(n, room.Event{Kind: room.EventAdmitted, Room: id}, func() {
		var state []byte
		if it.slot >= 0 {
			state = n.pool.stateBuf(it.slot)
		}
		n.rep.Admitted(s.now, id, l, &n.pool, it.pages, state)
	})
}

// freeLeg returns every page the leg holds to the pool. A page with a KV
// write in flight must not be freed: the driver keeps the room's pages in
// quarantine (it calls Cancel only after the last KVDone).
func (s *sim) freeLeg(n *node, l *nodeLeg, by string) {
	freed := false
	for p, pg := range n.pool.pages {
		if pg.leg != l || pg.state == pageFree {
			continue
		}
		if n.pool.writes[p] != 0 {
			s.violate("quarantine", "%s: %s of %s room=%v frees page %d while %d KV writes into it are in flight",
				n.addr, by, l.req.name, l.req.id, p, n.pool.writes[p])
			return
		}
		n.pool.pages[p] = page{}
		n.pool.free = append(n.pool.free, int32(p))
		freed = true
	}
	delete(n.admittedPages, l)
	if slot, ok := n.admittedState[l]; ok {
		if n.pool.stateWrites[slot] != 0 {
			s.violate("quarantine", "%s: %s of %s room=%v frees state slot %d while %d state writes into it are in flight",
				n.addr, by, l.req.name, l.req.id, slot, n.pool.stateWrites[slot])
			return
		}
		if sl := n.pool.slots[slot]; sl.leg == l && sl.state != pageFree {
			n.pool.slots[slot] = page{}
			n.pool.stateFree = append(n.pool.stateFree, slot)
			freed = true
		}
		delete(n.admittedState, l)
	}
	if freed {
		s.tryAdmit(n)
	}
}

// generated ends a sequence that ran to its last token.
func (s *sim) generated(it *item) {
	n := s.nodes[it.node]
	if !n.up || it.epoch != n.epoch {
		return
	}
	l := it.nl
	g := n.gens[l]
	if g == nil {
		return
	}
	delete(n.gens, l)
	s.freeLeg(n, l, "sequence end")
	s.answerLeg(n, l, true, "")
	if s.tracing {
		s.tracef("%v %s sequence of %s room=%v ended", s.now, n.addr, l.req.name, l.req.id)
	}
}

// holdKV counts a KV frame held for n's driver and returns its Release,
// which must be called exactly once by this incarnation (a frame of a
// crashed one is gone with it).
func (s *sim) holdKV(n *node, id room.ID, kv kvwire.KV) func() {
	n.kvHeld++
	epoch, released := n.epoch, false
	return func() {
		if released {
			s.violate("release", "%s: KV frame %+v of room=%v released twice", n.addr, kv, id)
			return
		}
		released = true
		if n.epoch == epoch {
			n.kvHeld--
		}
	}
}
