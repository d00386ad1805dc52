package sim

import (
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"strings"

	"tandem/internal/pd/room"
)

// Options configures one run. Everything else comes from Seed.
type Options struct {
	Seed uint64
	// Trace records one line per event, transition and effect (slower);
	// a failing seed is rerun with it to print what happened.
	Trace bool
	// Configure, when set, adjusts every node's room.Config after the
	// swarm chose it. Tests use it to plant a bug (room.Config.Planted).
	Configure func(cfg *room.Config)
	// breakTimers (tests only) never arms a node's timer and skips the
	// per-step deadline check, so only the watchdog can notice.
	breakTimers bool
}

// Violation is a broken invariant: its name, when, and what was seen.
type Violation struct {
	Invariant string
	At        room.Instant
	Detail    string
}

// Error returns "at <time>: invariant <name>: <detail>".
func (v *Violation) Error() string {
	return fmt.Sprintf("at %v: invariant %s: %s", v.At, v.Invariant, v.Detail)
}

// Stats counts what a run did, so that tests can check that runs reach
// far (successes, every kind of fault) and not only that nothing broke.
type Stats struct {
	Steps             uint64 // events the drivers stepped (Observer.Event)
	Requests          int
	Succeeded         int // clients that got their tokens
	Failed            int // clients that got an error
	Disconnected      int // clients that went away first
	RoomSuccesses     int
	RoomFailures      map[room.Reason]int
	FramesSent        int
	FramesLost        int
	FramesDuplicated  int
	Crashes           int
	Partitions        int
	KVDiscarded       int            // received KV frames the driver discarded (KVDest returned nil)
	QuarantinedWrites int            // KV writes that ended after their room did (the driver's page quarantine)
	SendDropped       map[string]int // frames the driver did not send, by why (Observer.SendDropped)
	ControlBehindKV   int            // control frames handed to the wire while another room's KV frame was being written
	// FramesAfterEnd counts frames handed to the wire after their room
	// ended on the sender (queued in a lane before the end), by type.
	FramesAfterEnd map[string]int
	PeersIdle      int // Wire.PeerIdle calls
	// State frames (KV frames of kind state) written to the wire, and of
	// them lost, delivered twice, held back (overtaken), and received
	// after their room ended on decode (or was forgotten there).
	StateFramesSent       int
	StateFramesLost       int
	StateFramesDuplicated int
	StateFramesReordered  int
	StateFramesLate       int
	// Disagreements counts rooms whose prefill and decode ended
	// differently (one succeeded, the other failed), by what each side
	// saw ("prefill=succeeded decode=failed:progress_timeout"); in a calm
	// seed (no faults at all) any is a violation.
	Disagreements  map[string]int
	Agreed         int  // rooms both sides ended the same way
	Calm           bool // the seed's swarm is calm (Swarm.Calm)
	EarlyAborts    int  // ABORT or FAILED stepped on prefill for a room it did not know
	EarlyAnswered  int  // requests and HELLOs for such a room answered at once (the silent pin's race, handled)
	Collisions     int  // requests that reused a room id
	WatchdogSweeps int
	WatchdogProbes int // EventWatchdog for live rooms not past their deadline
	Drained        room.Instant
	End            room.Instant
}

// Add sums b's counters into s (Calm, Drained and End, which describe one
// run, are left as they are).
func (s *Stats) Add(b Stats) {
	s.Steps += b.Steps
	s.Requests += b.Requests
	s.Succeeded += b.Succeeded
	s.Failed += b.Failed
	s.Disconnected += b.Disconnected
	s.RoomSuccesses += b.RoomSuccesses
	s.FramesSent += b.FramesSent
	s.FramesLost += b.FramesLost
	s.FramesDuplicated += b.FramesDuplicated
	s.Crashes += b.Crashes
	s.Partitions += b.Partitions
	s.KVDiscarded += b.KVDiscarded
	s.QuarantinedWrites += b.QuarantinedWrites
	s.ControlBehindKV += b.ControlBehindKV
	s.PeersIdle += b.PeersIdle
	s.StateFramesSent += b.StateFramesSent
	s.StateFramesLost += b.StateFramesLost
	s.StateFramesDuplicated += b.StateFramesDuplicated
	s.StateFramesReordered += b.StateFramesReordered
	s.StateFramesLate += b.StateFramesLate
	s.Agreed += b.Agreed
	s.EarlyAborts += b.EarlyAborts
	s.EarlyAnswered += b.EarlyAnswered
	s.Collisions += b.Collisions
	s.WatchdogSweeps += b.WatchdogSweeps
	s.WatchdogProbes += b.WatchdogProbes
	s.RoomFailures = addCounts(s.RoomFailures, b.RoomFailures)
	s.SendDropped = addCounts(s.SendDropped, b.SendDropped)
	s.FramesAfterEnd = addCounts(s.FramesAfterEnd, b.FramesAfterEnd)
	s.Disagreements = addCounts(s.Disagreements, b.Disagreements)
}

// addCounts adds b's counts to a (made when nil) and returns a.
func addCounts[K comparable](a, b map[K]int) map[K]int {
	if a == nil {
		a = map[K]int{}
	}
	for k, v := range b {
		a[k] += v
	}
	return a
}

// Result is what one run found.
type Result struct {
	Seed      uint64
	Swarm     Swarm
	Stats     Stats
	Violation *Violation // nil when every invariant held
	Trace     []string   // with Options.Trace: the run, one line per event, transition and effect
}

// Report returns the seed, the violation, the parameters and the trace.
func (r Result) Report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d\n", r.Seed)
	if r.Violation != nil {
		fmt.Fprintf(&b, "VIOLATION %v\n", r.Violation)
	}
	fmt.Fprintf(&b, "%v\n", r.Swarm)
	for _, line := range r.Trace {
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// Run simulates one seed: the whole cluster in one goroutine on a virtual
// clock, phase one with faults and phase two without, checking every
// invariant after every step. It never reads the wall clock.
func Run(o Options) (res Result) {
	s := newSim(o)
	defer func() {
		if p := recover(); p != nil {
			detail := fmt.Sprint(p)
			if s.tracing {
				detail += "\n" + string(debug.Stack())
			}
			s.violate("panic", "%s", detail)
		}
		res = Result{Seed: o.Seed, Swarm: s.sw, Stats: s.st, Violation: s.v, Trace: s.trace}
		res.Stats.End = s.now
	}()
	s.run()
	return res
}

// sim is one run's world.
type sim struct {
	opts    Options
	rng     *rand.Rand
	sw      Swarm
	now     room.Instant
	seq     uint64
	q       queue
	nodes   []*node
	byAddr  map[string]*node
	reqs    []*request
	faults  bool // phase one
	end     room.Instant
	tracing bool
	trace   []string
	names   map[room.ID]string
	v       *Violation
	st      Stats
	// blocked[a][b]: frames from node a to node b are lost; blockGen
	// counts partitions of the direction, so a stale heartbeat timeout
	// is recognised.
	blocked  [][]bool
	blockGen [][]uint64
	// linkLast[a][b] is when the last in-order frame from a reaches b;
	// held[a][b] are frames a partition holds back; broken[a][b] says the
	// connection was given up during the partition.
	linkLast [][]room.Instant
	// linkBusy[a][b] is when the link from a to b has written every
	// frame handed to it so far (frames are written one at a time).
	linkBusy [][]room.Instant
	held     [][][]item
	broken   [][]bool
	// verified holds the rooms a decode node verified (DONE matched),
	// by room and decode node; tokens the first token each room's prefill
	// computed, by room and prefill node (room ids may collide); ends the
	// last terminal transition of each room on each node.
	verified map[roomAt]bool
	tokens   map[roomAt]int32
	ends     map[roomAt]room.Transition
	// chooser, in exhaustive mode, picks the next item (exhaustive.go);
	// fp gathers the footprint of the item being handled.
	chooser *chooser
	fp      footprint
	local   map[int][]string // exhaustive mode with a leaf hook: what each part of the world did, in order
}

// roomAt is a room on one node.
type roomAt struct {
	id   room.ID
	addr string
}

func newSim(o Options) *sim {
	rng := rand.New(rand.NewPCG(o.Seed, 0x73696d756c61746f))
	return newWorld(o, rng, newSwarm(rng))
}

// newSimSwarm returns a world with the swarm sw (exhaustive mode).
func newSimSwarm(o Options, sw Swarm) *sim {
	return newWorld(o, rand.New(rand.NewPCG(o.Seed, 0x73696d756c61746f)), sw)
}

func newWorld(o Options, rng *rand.Rand, sw Swarm) *sim {
	s := &sim{opts: o, rng: rng, sw: sw, faults: true, tracing: o.Trace,
		byAddr: map[string]*node{}, names: map[room.ID]string{}, verified: map[roomAt]bool{}, tokens: map[roomAt]int32{},
		ends: map[roomAt]room.Transition{}}
	s.st.RoomFailures = map[room.Reason]int{}
	s.st.SendDropped = map[string]int{}
	s.st.FramesAfterEnd = map[string]int{}
	s.st.FramesAfterEnd = map[string]int{}
	s.st.Disagreements = map[string]int{}
	s.st.Calm = s.sw.Calm
	s.end = room.Instant(s.sw.PhaseOne + s.sw.drainBound())
	for i := range s.sw.Prefills + s.sw.Decodes {
		role, addr := room.RolePrefill, fmt.Sprintf("p%d", i)
		if i >= s.sw.Prefills {
			role, addr = room.RoleDecode, fmt.Sprintf("d%d", i-s.sw.Prefills)
		}
		n := &node{idx: i, role: role, addr: addr}
		s.nodes = append(s.nodes, n)
		s.byAddr[addr] = n
	}
	for range s.nodes {
		s.blocked = append(s.blocked, make([]bool, len(s.nodes)))
		s.blockGen = append(s.blockGen, make([]uint64, len(s.nodes)))
		s.linkLast = append(s.linkLast, make([]room.Instant, len(s.nodes)))
		s.linkBusy = append(s.linkBusy, make([]room.Instant, len(s.nodes)))
		s.held = append(s.held, make([][]item, len(s.nodes)))
		s.broken = append(s.broken, make([]bool, len(s.nodes)))
	}
	return s
}

// run schedules the world, then handles items in (time, sequence) order
// until a violation, the queue empties, or the drain bound passes.
func (s *sim) run() {
	if s.tracing {
		s.tracef("seed %d: %d prefill and %d decode nodes, %d requests, faults stop at %v, drained by %v",
			s.opts.Seed, s.sw.Prefills, s.sw.Decodes, s.sw.Requests, room.Instant(s.sw.PhaseOne), s.end)
	}
	for _, n := range s.nodes {
		s.boot(n)
		if s.rng.Float64() < s.sw.SlowRate {
			n.slow = int64(2 + s.rng.IntN(s.sw.SlowMax-1))
		}
	}
	s.scheduleRequests()
	s.scheduleFaults()
	s.schedule(room.Instant(s.sw.PhaseOne), item{kind: itemPhaseTwo})
	s.schedule(room.Instant(s.sw.WatchdogPeriod), item{kind: itemWatchdog})
	for len(s.q) > 0 && s.v == nil {
		it := s.q.pop()
		if it.at > s.end {
			break
		}
		s.now = it.at
		s.handle(&it)
	}
	if s.v == nil {
		s.finalCheck()
	}
}

// schedule queues it at instant at (never in the past). In exhaustive
// mode every item but a timer is due at once, and the queue keeps the
// order items were scheduled in (the chooser picks among them).
func (s *sim) schedule(at room.Instant, it item) {
	s.seq++
	if s.chooser != nil {
		if routerItem(it.kind) {
			// the router hears at once (a modelling choice of the
			// search: its own latencies are not enumerated)
			it.at = s.now
			s.handle(&it)
			return
		}
		if !timedItem(it.kind) {
			at = s.now
		}
		it.at, it.seq = max(at, s.now), s.seq
		s.q = append(s.q, it)
		return
	}
	it.at, it.seq = max(at, s.now), s.seq
	s.q.push(it)
}

// after queues it d from now.
func (s *sim) after(d room.Duration, it item) { s.schedule(s.now+room.Instant(d), it) }

// between returns a duration in [lo, hi].
func (s *sim) between(lo, hi room.Duration) room.Duration {
	if hi <= lo {
		return lo
	}
	return lo + room.Duration(s.rng.Int64N(int64(hi-lo)/int64(us)+1))*us
}

// chance reports true with probability p while faults are on.
func (s *sim) chance(p float64) bool { return s.faults && p > 0 && s.rng.Float64() < p }

func (s *sim) handle(it *item) {
	if s.chooser != nil {
		s.fp |= s.footprintOf(it)
	}
	switch it.kind {
	case itemDispatch:
		s.dispatch(s.reqs[it.req])
	case itemLegArrive:
		s.legArrive(it)
	case itemLegCancel:
		s.legCancel(it)
	case itemLegAnswer:
		s.legAnswered(it)
	case itemStream:
		s.streamStarted(s.reqs[it.req])
	case itemDisconnect:
		s.disconnect(s.reqs[it.req])
	case itemGrace:
		s.graceOver(s.reqs[it.req])
	case itemFrame:
		s.deliver(it)
	case itemSent:
		s.sent(it)
	case itemKVDone:
		s.kvDone(it)
	case itemTimer:
		s.timerFired(it)
	case itemWatchdog:
		s.watchdogSweep()
	case itemCompute:
		s.chunkDone(it)
	case itemAdmitted:
		s.admitted(it)
	case itemGenerated:
		s.generated(it)
	case itemPeerLost:
		s.peerLost(it)
	case itemCrash:
		s.crash(s.nodes[it.node], crashMode(it.gen))
	case itemRestart:
		s.restart(s.nodes[it.node])
	case itemPartition:
		s.partition(it)
	case itemHeal:
		s.heal(it)
	case itemPhaseTwo:
		s.phaseTwo()
	default:
		s.violate("sim", "unknown item kind %d", it.kind)
	}
}

// phaseTwo stops every fault: partitions heal, crashed nodes restart,
// engines run at full speed, no frame is lost, held back or duplicated,
// and no client goes away any more.
func (s *sim) phaseTwo() {
	s.faults = false
	if s.tracing {
		s.tracef("%v phase two: faults stop; every room must end and every page return by %v", s.now, s.end)
	}
	for a := range s.nodes {
		for b := range s.nodes {
			if s.blocked[a][b] {
				s.heal(&item{node: int32(a), peer: int32(b)})
			}
		}
	}
	for _, n := range s.nodes {
		n.slow = 1
		if n.up && n.stopping {
			s.down(n, crashClose) // a graceful shutdown still draining
		}
		if !n.up {
			s.restart(n)
		}
	}
}

// violate records the first broken invariant; the run stops after the
// current item.
func (s *sim) violate(invariant, format string, args ...any) {
	if s.v != nil {
		return
	}
	s.v = &Violation{Invariant: invariant, At: s.now, Detail: s.shorten(fmt.Sprintf(format, args...))}
	if s.tracing {
		s.tracef("%v VIOLATION %s: %s", s.now, invariant, s.v.Detail)
	}
}

// tracef appends a line to the trace (callers check s.tracing first, so
// untraced runs format nothing).
func (s *sim) tracef(format string, args ...any) {
	s.trace = append(s.trace, s.shorten(fmt.Sprintf(format, args...)))
}

// shorten replaces each "room=<32 hex digits>" of a known room with its
// request's name ("room=#3"), so traces can be read.
func (s *sim) shorten(line string) string {
	const key = "room="
	if !strings.Contains(line, key) {
		return line
	}
	var b strings.Builder
	for {
		i := strings.Index(line, key)
		if i < 0 || len(line) < i+len(key)+32 {
			b.WriteString(line)
			return b.String()
		}
		b.WriteString(line[:i+len(key)])
		line = line[i+len(key):]
		if id, err := room.ParseID(line[:32]); err == nil && s.names[id] != "" {
			b.WriteString(s.names[id])
			line = line[32:]
		}
	}
}
