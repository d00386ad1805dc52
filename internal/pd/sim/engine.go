package sim

import (
	"tandem/internal/pd/room"
)

// The simulated engines. Prefill runs prompts, PrefillSlots at a time in
// submission order, each in up to chunksMax chunks; after each chunk the
// edge sends a KV frame to the decode node and reports EventKVSent, after
// the last EventComputeDone with the first token. Decode reserves pages
// from a finite pool in FIFO order (EventAdmitted), and after EffectResume
// generates tokens, then frees the pages. Pages are counted and must all
// come back.

// startCompute submits the prompt: the worker's startCompute, which refuses
// a page count that does not fit the prompt and reports the compute
// started.
func (s *sim) startCompute(n *node, l *nodeLeg, e room.Effect) (room.Event, bool) {
	if l == nil {
		s.violate("edge", "%s: start_compute for room=%v with no leg", n.addr, e.Room)
		return room.Event{}, false
	}
	pages := pagesFor(l.req.prompt)
	if len(e.Pages) != pages || s.chance(s.sw.EngineErrorRate/2) {
		return room.Event{Kind: room.EventEngineError, Room: e.Room}, true
	}
	n.jobGen++
	j := &job{gen: n.jobGen, room: e.Room, leg: l, peer: e.Peer, chunks: min(pages, 1+s.rng.IntN(chunksMax)), failAt: -1}
	if s.chance(s.sw.EngineErrorRate / 2) {
		j.failAt = s.rng.IntN(j.chunks)
	}
	n.jobs = append(n.jobs, j)
	s.startJobs(n)
	return room.Event{Kind: room.EventComputeStarted, Room: e.Room}, true
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

// chunkBytes returns the KV bytes of chunk c of j: its pages' bytes.
func chunkBytes(j *job, c int) int64 {
	pages := pagesFor(j.leg.req.prompt)
	lo, hi := c*pages/j.chunks, (c+1)*pages/j.chunks
	return int64(hi-lo) * pageBytes
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

// chunkDone finishes a chunk: ship its KV and report progress, or fail,
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
	c := j.next
	j.next++
	if c == j.failAt {
		s.removeJob(n, j)
		s.step(n, room.Event{Kind: room.EventEngineError, Room: j.room})
		return
	}
	b := chunkBytes(j, c)
	j.sent += b
	s.sendKV(n, j, c, b)
	s.step(n, room.Event{Kind: room.EventKVSent, Room: j.room, Bytes: j.sent})
	if findJob(n, j.gen) == nil {
		return // the step cancelled it
	}
	if j.next < j.chunks {
		s.scheduleChunk(n, j)
		return
	}
	s.removeJob(n, j)
	token := int32(s.rng.IntN(32000))
	s.tokens[roomAt{j.room, n.addr}] = token
	s.step(n, room.Event{Kind: room.EventComputeDone, Room: j.room, Token: token, Logprob: -0.5})
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

// cancelJob is EffectCancelCompute.
func (s *sim) cancelJob(n *node, id room.ID) {
	for _, j := range n.jobs {
		if j.room == id {
			s.removeJob(n, j)
			return
		}
	}
}

// admit is EffectAdmit: queue for the prompt's pages. An engine that
// cannot ever hold the prompt refuses it at once.
func (s *sim) admit(n *node, l *nodeLeg, e room.Effect) (room.Event, bool) {
	if l == nil {
		s.violate("edge", "%s: admit for room=%v with no leg", n.addr, e.Room)
		return room.Event{}, false
	}
	need := pagesFor(l.req.prompt)
	if need > len(n.pages) || s.chance(s.sw.EngineErrorRate/2) {
		return room.Event{Kind: room.EventEngineError, Room: e.Room}, true
	}
	n.admitQ = append(n.admitQ, admission{room: e.Room, need: need})
	s.tryAdmit(n)
	return room.Event{}, false
}

// tryAdmit reserves pages for the queue's head while they fit; each
// reservation reaches the machine as EventAdmitted a little later.
func (s *sim) tryAdmit(n *node) {
	for len(n.admitQ) > 0 && n.admitQ[0].need <= len(n.free) {
		a := n.admitQ[0]
		n.admitQ = n.admitQ[1:]
		pages := make([]int32, a.need)
		for i := range pages {
			p := n.free[len(n.free)-1]
			n.free = n.free[:len(n.free)-1]
			if n.pages[p].state != pageFree {
				s.violate("pages", "%s: page %d on the free list is %v", n.addr, p, n.pages[p].state)
				return
			}
			n.pages[p] = page{state: pageReserved, room: a.room}
			pages[i] = p
		}
		d := s.between(0, s.sw.AdmitDelayMax) * room.Duration(n.slow)
		s.after(d, item{kind: itemAdmitted, node: int32(n.idx), epoch: n.epoch,
			ev: room.Event{Kind: room.EventAdmitted, Room: a.room, Pages: pages}})
	}
}

// admitted steps the engine's reservation into the machine.
func (s *sim) admitted(it *item) {
	n := s.nodes[it.node]
	if !n.up || it.epoch != n.epoch {
		return
	}
	s.step(n, it.ev)
}

// dropAdmission takes a room's queued admission off the engine (a
// reservation already made comes back through EventAdmitted).
func (s *sim) dropAdmission(n *node, id room.ID) {
	for i, a := range n.admitQ {
		if a.room == id {
			n.admitQ = append(n.admitQ[:i], n.admitQ[i+1:]...)
			s.tryAdmit(n)
			return
		}
	}
}

// checkAdmittedPlaced checks that the step of EventAdmitted placed every
// reserved page: in the room's ALLOC or back in the pool.
func (s *sim) checkAdmittedPlaced(n *node, ev room.Event) {
	for _, p := range ev.Pages {
		if pg := n.pages[p]; pg.state == pageReserved && pg.room == ev.Room {
			s.violate("pages", "%s: page %d admitted for room=%v was neither sent in ALLOC nor freed", n.addr, p, ev.Room)
			return
		}
	}
}

// freePages returns pages held in state want by room id to the pool.
func (s *sim) freePages(n *node, id room.ID, pages []int32, want pageState, by string) {
	for _, p := range pages {
		if p < 0 || int(p) >= len(n.pages) {
			s.violate("pages", "%s: %s of room=%v frees page %d outside the pool", n.addr, by, id, p)
			return
		}
		if pg := n.pages[p]; pg.state != want || pg.room != id {
			s.violate("pages", "%s: %s of room=%v frees page %d, which is %v of room=%v (want %v)",
				n.addr, by, id, p, pg.state, pg.room, want)
			return
		}
		n.pages[p] = page{}
		n.free = append(n.free, p)
	}
	if len(pages) > 0 {
		s.tryAdmit(n)
	}
}

// resume is EffectResume: the room verified the KV; its pages pass to
// the running sequence, which generates the rest of the answer. The KV
// must be complete and the token the one prefill computed.
func (s *sim) resume(n *node, l *nodeLeg, e room.Effect) {
	if l == nil {
		s.violate("edge", "%s: resume for room=%v with no leg", n.addr, e.Room)
		return
	}
	r := l.req
	if want := int64(pagesFor(r.prompt)) * pageBytes; l.recvBytes != want {
		s.violate("resume", "%s resumed room=%v with %d KV bytes stored, want %d", n.addr, e.Room, l.recvBytes, want)
		return
	}
	if tok, ok := s.tokens[roomAt{e.Room, r.p.addr}]; !ok || tok != e.Token {
		s.violate("resume", "%s resumed room=%v from token %d; prefill computed %d (known %v)", n.addr, e.Room, e.Token, tok, ok)
		return
	}
	for _, p := range e.Pages {
		if pg := n.pages[p]; pg.state != pageRoom || pg.room != e.Room {
			s.violate("pages", "%s: resume of room=%v hands over page %d, which is %v of room=%v", n.addr, e.Room, p, pg.state, pg.room)
			return
		}
		n.pages[p].state = pageSequence
	}
	n.gens[r] = &generation{leg: l, pages: append([]int32(nil), e.Pages...)}
	d := room.Duration(r.generate) * s.sw.DecodePerToken * room.Duration(n.slow)
	s.after(d, item{kind: itemGenerated, node: int32(n.idx), epoch: n.epoch, req: int32(r.idx)})
	s.after(s.between(50*us, s.sw.LegLatencyMax), item{kind: itemStream, req: int32(r.idx)})
}

// generated ends a sequence that ran to its last token.
func (s *sim) generated(it *item) {
	n := s.nodes[it.node]
	if !n.up || it.epoch != n.epoch {
		return
	}
	r := s.reqs[it.req]
	if g := n.gens[r]; g != nil {
		s.endSequence(n, r, g, true, "")
	}
}

// endSequence frees a sequence's pages and answers its leg.
func (s *sim) endSequence(n *node, r *request, g *generation, ok bool, note string) {
	delete(n.gens, r)
	s.freePages(n, r.id, g.pages, pageSequence, "sequence end")
	s.answerLeg(n, g.leg, ok, note)
	if s.tracing {
		s.tracef("%v %s sequence of %s room=%v ended ok=%v %s", s.now, n.addr, r.name, r.id, ok, note)
	}
}

// String names a page state.
func (p pageState) String() string {
	return [...]string{"free", "reserved", "held by its room", "held by its sequence"}[p]
}
