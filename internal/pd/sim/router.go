package sim

import (
	"fmt"

	"tandem/internal/pd/room"
)

// The router model. Per client request it mints a room id, picks a prefill
// and a decode node, sends both legs at once (the decode leg names the
// prefill node), follows decode's answer and prefill's reply, and cancels
// the other leg when one fails or the client goes away. Like the real
// router (internal/router), a prefill failure after decode began answering
// does not fail the request, and after decode's answer prefill gets a grace
// period before its leg is cancelled. The router has no timeout of its own:
// every leg must be answered by its node, so a pinned room would show as a
// client that never gets its outcome.

// The legs of a request.
const (
	legPrefill = 0
	legDecode  = 1
)

// outcome is what the client finally saw.
type outcome uint8

const (
	outcomeNone outcome = iota
	outcomeTokens
	outcomeError
	outcomeGone // the client disconnected first
)

var outcomeNames = [...]string{"none", "tokens", "error", "disconnected"}

func (o outcome) String() string { return outcomeNames[o] }

// request is one client request and the router's view of its two legs.
type request struct {
	idx       int
	id        room.ID
	reqID     string
	name      string // "#3", for traces
	p, d      *node
	prompt    int // tokens
	generate  int // tokens to generate
	legs      [2]routerLeg
	delivered bool // decode's answer began (the first token reached the router)
	outcome   outcome
	outcomes  int // how many times an outcome was set (must end at 1)
	note      string
}

// routerLeg is one HTTP leg as the router sees it.
type routerLeg struct {
	arrive    room.Instant // when the request reaches the node
	epoch     uint32       // the node incarnation that took it (taken)
	taken     bool         // a node stepped it and did not reject it
	answered  bool
	cancelled bool
	ok        bool
}

// pagesFor is the KV pages a prompt of tokens needs.
func pagesFor(tokens int) int { return (tokens + pageTokens - 1) / pageTokens }

// scheduleRequests mints the requests and queues their dispatch and, for
// some, the moment their client goes away.
func (s *sim) scheduleRequests() {
	for i := range s.sw.Requests {
		r := &request{idx: i, reqID: fmt.Sprintf("req%d", i), name: fmt.Sprintf("#%d", i)}
		for j := range 2 {
			v := s.rng.Uint64()
			for k := range 8 {
				r.id[8*j+k] = byte(v >> (8 * k))
			}
		}
		if i > 0 && s.rng.Float64() < s.sw.CollisionRate {
			r.id = s.reqs[s.rng.IntN(i)].id // a client-supplied room id used twice
			s.st.Collisions++
		}
		if s.names[r.id] == "" {
			s.names[r.id] = r.name
		}
		r.p = s.nodes[s.rng.IntN(s.sw.Prefills)]
		r.d = s.nodes[s.sw.Prefills+s.rng.IntN(s.sw.Decodes)]
		r.prompt = 1 + s.rng.IntN(s.sw.PromptMax)
		r.generate = 1 + s.rng.IntN(genTokensMax)
		s.reqs = append(s.reqs, r)
		at := room.Instant(s.between(0, s.sw.ArrivalSpan-1))
		s.schedule(at, item{kind: itemDispatch, req: int32(i)})
		if s.rng.Float64() < s.sw.DisconnectRate {
			// A third of the disconnects come within the first
			// milliseconds: the race of an ABORT overtaking a leg.
			gone := s.between(0, 500*ms)
			if s.rng.IntN(3) == 0 {
				gone = s.between(0, 3*ms)
			}
			if at+room.Instant(gone) < room.Instant(s.sw.PhaseOne) {
				s.schedule(at+room.Instant(gone), item{kind: itemDisconnect, req: int32(i)})
			}
		}
	}
	s.st.Requests = len(s.reqs)
}

// legLatency is one router-node hop: fast, and while faults are on now and
// then slow (a busy HTTP server, a slow connect).
func (s *sim) legLatency() room.Duration {
	d := s.between(50*us, s.sw.LegLatencyMax)
	if s.chance(s.sw.LegSlowRate) {
		d += s.between(0, s.sw.LegSlowMax)
	}
	return d
}

// dispatch sends both legs at once.
func (s *sim) dispatch(r *request) {
	if s.tracing {
		s.tracef("%v router %s dispatch room=%v p=%s d=%s prompt=%d generate=%d",
			s.now, r.name, r.id, r.p.addr, r.d.addr, r.prompt, r.generate)
	}
	for k, n := range []*node{r.p, r.d} {
		r.legs[k].arrive = s.now + room.Instant(s.legLatency())
		s.schedule(r.legs[k].arrive, item{kind: itemLegArrive, req: int32(r.idx), leg: int8(k), node: int32(n.idx)})
	}
}

// legNode returns the node of leg k.
func (r *request) legNode(k int8) *node {
	if k == legPrefill {
		return r.p
	}
	return r.d
}

// legName is "prefill" or "decode".
func legName(k int8) string {
	if k == legPrefill {
		return "prefill"
	}
	return "decode"
}

// cancelLeg closes leg k: the node sees its HTTP request cancelled, after
// the request itself (one connection keeps their order).
func (s *sim) cancelLeg(r *request, k int8) {
	l := &r.legs[k]
	if l.answered || l.cancelled {
		return
	}
	l.cancelled = true
	at := max(s.now+room.Instant(s.between(50*us, s.sw.LegLatencyMax)), l.arrive)
	s.schedule(at, item{kind: itemLegCancel, req: int32(r.idx), leg: k, node: int32(r.legNode(k).idx)})
	if s.tracing {
		s.tracef("%v router %s cancel the %s leg", s.now, r.name, legName(k))
	}
}

// legAnswered handles a node's answer to a leg (or a broken connection).
func (s *sim) legAnswered(it *item) {
	r, k := s.reqs[it.req], it.leg
	l := &r.legs[k]
	if l.answered {
		s.violate("leg_answered_twice", "request %s: the %s leg got a second answer (ok=%v %s)", r.name, legName(k), it.ok, it.note)
		return
	}
	l.answered, l.ok = true, it.ok
	if s.tracing {
		s.tracef("%v router %s %s leg answered ok=%v %s", s.now, r.name, legName(k), it.ok, it.note)
	}
	if r.outcome != outcomeNone || l.cancelled {
		return // the request is over, or the router stopped listening to this leg
	}
	switch {
	case k == legDecode && it.ok:
		s.finish(r, outcomeTokens, "")
		if !r.legs[legPrefill].answered {
			s.after(prefillGrace, item{kind: itemGrace, req: int32(r.idx)})
		}
	case k == legDecode:
		s.finish(r, outcomeError, "decode: "+it.note)
		s.cancelLeg(r, legPrefill)
	case !it.ok && !r.delivered:
		s.finish(r, outcomeError, "prefill: "+it.note)
		s.cancelLeg(r, legDecode)
	}
}

// streamStarted notes that decode's answer began: a prefill failure no
// longer fails the request.
func (s *sim) streamStarted(r *request) {
	if r.outcome == outcomeNone && !r.legs[legDecode].cancelled {
		r.delivered = true
	}
}

// disconnect is the client going away: its outcome is "gone" unless it
// already had one, and both legs are cancelled.
func (s *sim) disconnect(r *request) {
	if !s.faults || r.outcome != outcomeNone {
		return
	}
	s.finish(r, outcomeGone, "client disconnected")
	s.cancelLeg(r, legPrefill)
	s.cancelLeg(r, legDecode)
}

// graceOver cancels a prefill leg that did not answer within the grace
// period after decode's answer.
func (s *sim) graceOver(r *request) { s.cancelLeg(r, legPrefill) }

// finish sets the client's outcome; a second one is a violation.
func (s *sim) finish(r *request, o outcome, note string) {
	r.outcomes++
	if r.outcomes > 1 {
		s.violate("one_outcome", "request %s: outcome %v (%s) after %v (%s)", r.name, o, note, r.outcome, r.note)
		return
	}
	r.outcome, r.note = o, note
	s.st.Drained = max(s.st.Drained, s.now)
	switch o {
	case outcomeTokens:
		s.st.Succeeded++
	case outcomeError:
		s.st.Failed++
	case outcomeGone:
		s.st.Disconnected++
	}
	if s.tracing {
		s.tracef("%v router %s outcome %v %s", s.now, r.name, o, note)
	}
}
