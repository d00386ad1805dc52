package sim

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"tandem/internal/pd/room"
)

// Exhaustive mode. For one prefill/decode pair and one or two rooms it
// enumerates every order in which the pending items can run, depth first:
// the frames each way (each link delivers in order, as its connection
// does, and writes its frames in order), Sent completions, KV copies,
// engine callbacks, the legs reaching the nodes (a leg's cancel after the
// leg), and, when
// ExhaustiveOptions.Abort is set, each client's disconnect at every point;
// with up to K injected faults, each one of: drop a frame in flight,
// duplicate it (the copy arrives later), or let the earliest timer fire
// now, before the pending items ("delay past a deadline"). Without a
// fault, time does not pass: timers fire only when nothing else is
// pending, in deadline order. The router hears the nodes' answers at once
// (its side's latencies are not enumerated: a modelling choice that keeps
// the tree to the edge's orderings, not a reduction).
//
// The world is deterministic given the sequence of choices (the one
// random source is seeded the same on every run), so the search replays
// choice prefixes from a fresh world rather than cloning state: a run
// follows its prefix, then takes the first option at every new choice
// point and records how many there were; the next prefix increments the
// deepest choice that has options left. Every leaf (a run whose queue
// emptied) is checked like a seed's end: every room terminal on both sides,
// every leg answered, every page, frame and driver record released; and
// the checks after every driver call hold on the way. In a leaf without a
// fault and without a disconnect, prefill and decode must agree on every
// room (outcome_agreement); otherwise disagreements are counted.
//
// Orders that differ only in when independent options run are pruned
// with sleep sets (see pick: an option whose footprint is disjoint from
// the choice made is not explored again below it), which loses no leaf
// (TestExhaustiveReductionIsSound checks that against the plain search);
// ExhaustiveOptions.NoReduce runs every order.

// ExhaustiveOptions configures an exhaustive search.
type ExhaustiveOptions struct {
	Rooms int  // rooms on the one prefill/decode pair (1 or 2)
	K     int  // faults injected at most per schedule
	Abort bool // each client may disconnect at any point
	// MaxLeaves stops the search after that many leaves (0: no limit).
	MaxLeaves int
	// Configure, when set, adjusts both nodes' room.Config.
	Configure func(cfg *room.Config)
	// NoReduce turns the sleep sets off: every order is run (tests
	// compare the two).
	NoReduce bool
	// Match turns state matching on: a choice point whose world was
	// reached before (see stateKey), by a schedule whose sleep set was a
	// subset of this one's, is not explored again (its futures were).
	Match bool
	// Parts and Part split the search across processes: the options
	// taken at depth SplitDepth are numbered in the search's order and
	// this search explores below those numbered Part modulo Parts (the
	// leaves above that depth belong to part 0). The parts' leaves are
	// the whole search's, each once (TestExhaustiveSplitIsPartition).
	Parts, Part, SplitDepth int
	// leaf, when set, receives each leaf's signature (tests).
	leaf func(sig string)
	// end, when set, receives each leaf's ending: what the checks saw
	// (every request's outcome and legs, every room's end on each node,
	// the disagreements) and the final world's digest (tests).
	end func(ending string, world stateKey)
	// Progress, when set, is called every ProgressEvery schedules run
	// (leaves and those cut short) with the
	// result so far and an estimate of the share of the tree searched
	// (the depth-first position, weighting every branch alike).
	Progress      func(res ExhaustiveResult, done float64)
	ProgressEvery int
}

// searched estimates the share of the tree a depth-first search at stack
// has finished: the position of its path, each level's options weighted
// alike.
func searched(stack []*frame) float64 {
	done, width := 0.0, 1.0
	for _, f := range stack {
		if len(f.opts) == 0 {
			break
		}
		width /= float64(len(f.opts))
		done += float64(f.chosen) * width
	}
	return done
}

// ExhaustiveResult is what a search found.
type ExhaustiveResult struct {
	Leaves    int // schedules run to their end
	Blocked   int // schedules cut short because every option was asleep (redundant orders)
	Matched   int // schedules cut short at a world reached before (ExhaustiveOptions.Match)
	Skipped   int // schedules left to another part (ExhaustiveOptions.Parts)
	Worlds    int // distinct worlds recorded (ExhaustiveOptions.Match)
	States    int // distinct choice points visited (nodes of the search tree)
	MaxDepth  int // longest schedule, in choices
	Complete  bool
	Elapsed   time.Duration
	Violation *Violation
	Choices   []int    // the violating schedule's choices
	Trace     []string // the violating schedule, traced
	// Stats sums the leaves' counts (disagreements by reason included)
	// and, with state matching, the counts of the schedules cut at a
	// known world.
	Stats Stats
}

// footprint is the part of the world an option touches: one bit per node
// (its driver, engine, pages and wire state), one for the router, one for
// the fault budget and one for the clock.
type footprint uint16

const (
	fpRouter footprint = 1 << 12
	fpBudget footprint = 1 << 13
	fpClock  footprint = 1 << 14
	fpAll    footprint = 1<<15 - 1
)

// optID names an option across runs: the item's sequence number (items
// pending at a choice point were scheduled before it, so their numbers
// are the same on every run that reaches it) and what is done with it.
type optID struct {
	seq  uint64
	what byte
}

// frame is one choice point on the current path of the search.
type frame struct {
	opts   []optID
	chosen int
	// split: the option chosen+1 was numbered at the split depth, and
	// whether it is this part's
	numbered int
	mine     bool
	fps      map[optID]footprint // footprints of the options explored here
	sleep    map[optID]footprint // options asleep here (see Exhaustive)
}

// chooser drives one run of the search along the stack's path.
type chooser struct {
	stack    *[]*frame
	depth    int
	faults   int
	k        int
	blocked  bool // every option at a choice point was asleep: the run is redundant
	noReduce bool

	// state matching (nil visited: off): the worlds seen, each with the
	// sleep set it was explored under (canonical option digests, sorted)
	visited map[stateKey][]stateKey
	matched bool // this run reached a world explored before

	// splitting across processes
	parts, part, splitDepth int
	numbered                *int // options numbered at the split depth so far
	skipped                 bool // this run went below an option of another part
}

// cut reports whether the run stops short of a leaf.
func (c *chooser) cut() bool { return c.blocked || c.matched || c.skipped }

// pick returns the index of the option to take among opts, or -1 when the
// run is blocked.
//
// With state matching, key is the world's digest and canon the canonical
// digest of an option (see stateKey); they are used only at a new choice
// point.
func (c *chooser) pick(opts []optID, key func() (stateKey, func(optID) stateKey)) int {
	st := *c.stack
	if c.depth < len(st) {
		return st[c.depth].chosen
	}
	f := &frame{opts: opts, fps: map[optID]footprint{}, sleep: map[optID]footprint{}}
	if c.depth > 0 && !c.noReduce {
		// The child's sleep set: what slept at the parent or was
		// explored there before its choice, and is independent of
		// the choice (disjoint footprints).
		p := st[c.depth-1]
		ch := p.opts[p.chosen]
		fp := p.fps[ch]
		for z, zf := range p.sleep {
			if zf&fp == 0 {
				f.sleep[z] = zf
			}
		}
		for _, z := range p.opts[:p.chosen] {
			if zf, ok := p.fps[z]; ok && zf&fp == 0 {
				f.sleep[z] = zf
			}
		}
	}
	f.chosen = -1
	for i, o := range opts {
		if _, asleep := f.sleep[o]; !asleep {
			f.chosen = i
			break
		}
	}
	if f.chosen < 0 {
		c.blocked = true
		return -1
	}
	if c.visited != nil {
		k, canon := key()
		sl := make([]stateKey, 0, len(f.sleep))
		for o := range f.sleep {
			sl = append(sl, canon(o))
		}
		slices.SortFunc(sl, cmpKey)
		if old, seen := c.visited[k]; seen {
			if subMultiset(old, sl) {
				// Explored before with no more asleep than now:
				// every future from here was searched.
				c.matched = true
				return -1
			}
			c.visited[k] = interMultiset(old, sl)
		} else {
			c.visited[k] = sl
		}
	}
	*c.stack = append(st, f)
	return f.chosen
}

// done records the footprint of the option taken at the current depth.
func (c *chooser) done(fp footprint) {
	f := (*c.stack)[c.depth]
	f.fps[f.opts[f.chosen]] = fp
	if c.parts > 1 && c.depth == c.splitDepth {
		if f.numbered != f.chosen+1 {
			f.numbered = f.chosen + 1
			f.mine = *c.numbered%c.parts == c.part
			*c.numbered++
		}
		c.skipped = !f.mine
	}
	c.depth++
}

func cmpKey(a, b stateKey) int {
	if a[0] != b[0] {
		return cmpU(a[0], b[0])
	}
	return cmpU(a[1], b[1])
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// subMultiset reports whether sorted a is contained in sorted b.
func subMultiset(a, b []stateKey) bool {
	j := 0
	for _, x := range a {
		for j < len(b) && cmpKey(b[j], x) < 0 {
			j++
		}
		if j == len(b) || b[j] != x {
			return false
		}
		j++
	}
	return true
}

// interMultiset is the intersection of sorted a and b.
func interMultiset(a, b []stateKey) []stateKey {
	var out []stateKey
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch c := cmpKey(a[i], b[j]); {
		case c < 0:
			i++
		case c > 0:
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

// backtrack moves the stack to the next unexplored, awake option of the
// deepest choice point that has one; false when the search is over.
func backtrack(stack *[]*frame) bool {
	st := *stack
	for len(st) > 0 {
		f := st[len(st)-1]
		for j := f.chosen + 1; j < len(f.opts); j++ {
			o := f.opts[j]
			if _, asleep := f.sleep[o]; asleep {
				continue
			}
			f.chosen = j
			*stack = st
			return true
		}
		st = st[:len(st)-1]
	}
	*stack = st
	return false
}

// footprintOf is the static part of an item's footprint: the node it runs
// on, or the router. (Handling a node's item can also reach the router,
// when a leg is answered; handle adds that as it happens.)
func (s *sim) footprintOf(it *item) footprint {
	switch it.kind {
	case itemLegAnswer, itemStream, itemDisconnect, itemGrace, itemDispatch:
		return fpRouter
	case itemLegArrive, itemLegCancel:
		return 1 << uint(s.reqs[it.req].legNode(it.leg).idx)
	case itemFrame, itemSent, itemKVDone, itemTimer, itemCompute, itemAdmitted, itemGenerated:
		return 1 << uint(it.node)
	}
	return fpAll
}

// routerItem reports whether an item of kind k is the router hearing from
// a node (or dispatching): in exhaustive mode it is handled at once.
func routerItem(k itemKind) bool {
	return k == itemLegAnswer || k == itemStream || k == itemDispatch
}

// timedItem reports whether an item of kind k waits for its time (timers)
// rather than being deliverable at once.
func timedItem(k itemKind) bool {
	return k == itemTimer || k == itemGrace || k == itemWatchdog || k == itemPhaseTwo
}

// exhaustiveSwarm is the world of the search: one prefill and one decode
// node, rooms requests of one page and a one-frame recurrent state, loose
// timeouts, no random fault.
func exhaustiveSwarm(rooms int) Swarm {
	sw := Swarm{Prefills: 1, Decodes: 1, Requests: rooms, ArrivalSpan: us, PhaseOne: 1 << 50,
		FrameLatencyMax: 10 * us, LegLatencyMax: 100 * us, LegSlowMax: 0, ReorderMax: 0, LinkBytesPerUs: 1000,
		ComputePerToken: 2 * us, DecodePerToken: 200 * us, PromptMax: pageTokens, PoolPages: rooms, KVLayers: 1,
		StateBytes: kvPageBytes / 2, StateSlots: rooms,
		PrefillSlots: 1, AdmitDelayMax: 10 * us, TimerLateMax: 0, WatchdogPeriod: 1 << 50, SlowMax: 1}
	sw.calm(nil)
	sw.Calm = false // set per leaf: no fault and no disconnect
	return sw
}

// Exhaustive runs the search.
func Exhaustive(o ExhaustiveOptions) ExhaustiveResult {
	start := time.Now()
	res := ExhaustiveResult{Stats: Stats{RoomFailures: map[room.Reason]int{}, SendDropped: map[string]int{},
		Disagreements: map[string]int{}, FramesAfterEnd: map[string]int{}}}
	var stack []*frame
	var visited map[stateKey][]stateKey
	if o.Match {
		visited = map[stateKey][]stateKey{}
	}
	numbered := 0
	for {
		before := len(stack)
		c := &chooser{stack: &stack, k: o.K, noReduce: o.NoReduce, visited: visited,
			parts: o.Parts, part: o.Part, splitDepth: o.SplitDepth, numbered: &numbered}
		r := runChoices(o, c, false)
		res.States += len(stack) - before
		res.MaxDepth = max(res.MaxDepth, len(stack))
		switch {
		case c.blocked:
			res.Blocked++
		case c.matched:
			res.Matched++
			res.Stats.Add(r.Stats) // what the run did before it met the known world
		case c.skipped:
			res.Skipped++
		case c.parts > 1 && c.part != 0 && len(stack) <= c.splitDepth:
			// a leaf above the split depth: part 0's
			res.Skipped++
		default:
			res.Leaves++
			res.Stats.Add(r.Stats)
		}
		res.Worlds = len(visited)
		if r.Violation != nil {
			res.Violation = r.Violation
			for _, f := range stack {
				res.Choices = append(res.Choices, f.chosen)
			}
			replay := slices.Clone(stack)
			res.Trace = runChoices(o, &chooser{stack: &replay, k: o.K}, true).Trace
			break
		}
		if !backtrack(&stack) {
			res.Complete = true
			break
		}
		if o.MaxLeaves > 0 && res.Leaves >= o.MaxLeaves {
			break
		}
		if runs := res.Leaves + res.Blocked + res.Matched + res.Skipped; o.Progress != nil && o.ProgressEvery > 0 && runs%o.ProgressEvery == 0 {
			res.Elapsed = time.Since(start)
			o.Progress(res, searched(stack))
		}
	}
	res.Elapsed = time.Since(start)
	return res
}

// runChoices runs one schedule of the search.
func runChoices(o ExhaustiveOptions, c *chooser, trace bool) (res Result) {
	sw := exhaustiveSwarm(o.Rooms)
	s := newSimSwarm(Options{Trace: trace, Configure: o.Configure}, sw)
	s.chooser = c
	s.end = 1 << 62
	if o.leaf != nil {
		s.local = map[int][]string{}
	}
	defer func() {
		if p := recover(); p != nil {
			s.violate("panic", "%v", p)
		}
		res = Result{Swarm: s.sw, Stats: s.st, Violation: s.v, Trace: s.trace}
	}()
	for _, n := range s.nodes {
		s.boot(n)
	}
	s.scheduleRequests()
	if o.Abort {
		for i := range s.reqs {
			s.schedule(0, item{kind: itemDisconnect, req: int32(i)})
		}
	}
	for s.v == nil && !c.cut() && s.step() {
	}
	if s.v == nil && !c.cut() {
		disconnected := false
		for _, r := range s.reqs {
			disconnected = disconnected || r.outcome == outcomeGone
		}
		s.sw.Calm = c.faults == 0 && !disconnected
		s.finalCheck()
		if o.leaf != nil {
			o.leaf(s.signature())
		}
		if o.end != nil {
			o.end(s.ending(), s.stateKey(s.itemKeys(), c.faults))
		}
	}
	return res
}

// ending describes how a leaf ended, from the records the checks read.
func (s *sim) ending() string {
	var b strings.Builder
	for _, r := range s.reqs {
		fmt.Fprintf(&b, "%s outcome=%d(%d) %q legs=%+v delivered=%v\n", r.name, r.outcome, r.outcomes, r.note, r.legs, r.delivered)
		for _, n := range s.nodes {
			if t, ok := s.ends[roomAt{r.id, n.addr}]; ok {
				fmt.Fprintf(&b, "  %s: %s\n", n.addr, endName(t))
			}
		}
	}
	fmt.Fprintf(&b, "disagreements %v", s.st.Disagreements)
	return b.String()
}

// signature describes a leaf by what happened on each part of the world,
// in order per part: two schedules that differ only in the order of
// options with disjoint footprints have the same signature.
func (s *sim) signature() string {
	var b strings.Builder
	for _, part := range slices.Sorted(maps.Keys(s.local)) {
		fmt.Fprintf(&b, "%d: %s\n", part, strings.Join(s.local[part], " "))
	}
	return b.String()
}

// logLocal appends what handling it did to the parts its footprint names
// (exhaustive mode, with a leaf hook).
func (s *sim) logLocal(it *item, what byte) {
	d := fmt.Sprintf("%c%d/%d/%d/%d", what, it.kind, it.req, it.leg, it.node)
	if it.frame != nil {
		d += fmt.Sprintf("/%d/%v/%d.%d.%d", it.frame.Lane, it.frame.Type, it.frame.KV.Ordinal, it.frame.KV.Layer, it.frame.KV.Kind)
	}
	fp := s.fp
	for bit := range 16 {
		if fp&(1<<bit) != 0 {
			s.local[bit] = append(s.local[bit], d)
		}
	}
}

// option is one choice at a choice point.
type option struct {
	what byte // 'r' run, 'd' drop, 'u' duplicate, 't' fire the earliest timer now
	i    int  // index into the pending items
}

// step makes one choice and carries it out; it returns false when nothing
// is left to do.
func (s *sim) step() bool {
	c := s.chooser
	var opts []option
	timer := -1
	linkHead := map[[3]int32]bool{}
	arriving := map[[2]int32]bool{}
	for i := range s.q {
		if it := &s.q[i]; it.kind == itemLegArrive {
			arriving[[2]int32{it.req, int32(it.leg)}] = true
		}
	}
	for i := range s.q {
		it := &s.q[i]
		if it.kind == itemLegCancel && arriving[[2]int32{it.req, int32(it.leg)}] {
			continue // the cancel follows its leg on one connection
		}
		if timedItem(it.kind) && it.at > s.now {
			if timer < 0 || timerBefore(it, &s.q[timer]) {
				timer = i
			}
			continue
		}
		if it.kind == itemFrame || it.kind == itemSent {
			// each link writes and delivers its frames in order
			key := [3]int32{int32(it.kind), it.from, it.node}
			if it.kind == itemSent {
				key = [3]int32{int32(it.kind), it.node, it.peer}
			}
			if linkHead[key] {
				continue
			}
			linkHead[key] = true
		}
		opts = append(opts, option{'r', i})
		if it.kind == itemFrame && c.faults < c.k {
			opts = append(opts, option{'d', i}, option{'u', i})
		}
	}
	if len(opts) == 0 {
		if timer < 0 {
			return false
		}
		opts = append(opts, option{'r', timer})
	} else if timer >= 0 && c.faults < c.k {
		opts = append(opts, option{'t', timer})
	}
	ids := make([]optID, len(opts))
	for i, op := range opts {
		ids[i] = optID{s.q[op.i].seq, op.what}
	}
	pick := c.pick(ids, s.matchKey)
	if pick < 0 {
		return false
	}
	op := opts[pick]
	it := s.q[op.i]
	s.q = append(s.q[:op.i], s.q[op.i+1:]...)
	s.fp = 0
	switch op.what {
	case 'd':
		c.faults++
		s.st.FramesLost++
		if isStateFrame(it.frame) {
			s.st.StateFramesLost++
		}
		if s.tracing {
			s.tracef("%v net %s room=%v lost (fault %d: drop)", s.now, frameName(*it.frame), it.frame.Room, c.faults)
		}
		s.fp = s.footprintOf(&it) | fpBudget
		s.logged(&it, 'd')
		c.done(s.fp)
		return true
	case 'u':
		c.faults++
		s.st.FramesDuplicated++
		if isStateFrame(it.frame) {
			s.st.StateFramesDuplicated++
		}
		s.q = append(s.q[:op.i], append([]item{it}, s.q[op.i:]...)...)
		s.seq++
		dup := it
		dup.seq = s.seq
		s.q = append(s.q, dup)
		if s.tracing {
			s.tracef("%v net %s room=%v duplicated (fault %d)", s.now, frameName(*it.frame), it.frame.Room, c.faults)
		}
		s.fp = s.footprintOf(&it) | fpBudget
		s.logged(&it, 'u')
		c.done(s.fp)
		return true
	case 't':
		c.faults++
		s.fp = fpAll
		if s.tracing {
			s.tracef("%v fault %d: the items pending are delayed past %v", s.now, c.faults, it.at)
		}
	}
	if it.at > s.now {
		s.fp |= fpClock | fpAll // time passes for everyone
	}
	s.now = max(s.now, it.at)
	s.handle(&it)
	s.logged(&it, op.what)
	c.done(s.fp)
	return true
}

// matchKey digests the world and returns how to digest its options
// canonically (by the item's digest and what is done with it).
func (s *sim) matchKey() (stateKey, func(optID) stateKey) {
	items := s.itemKeys()
	key := s.stateKey(items, s.chooser.faults)
	return key, func(o optID) stateKey {
		for i := range s.q {
			if s.q[i].seq == o.seq {
				k := items[i]
				k[1] ^= uint64(o.what) * 0x9e3779b97f4a7c15
				return k
			}
		}
		panic("exhaustive: an asleep option is not pending")
	}
}

func (s *sim) logged(it *item, what byte) {
	if s.local != nil {
		s.logLocal(it, what)
	}
}

// timerBefore orders due items by time, then by what and where they are,
// not by when they were scheduled: the sequence number depends on the
// order of independent options, and a tie broken by it would make two
// orders the reduction treats as one lead to different futures.
func timerBefore(a, b *item) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	if a.node != b.node {
		return a.node < b.node
	}
	if a.req != b.req {
		return a.req < b.req
	}
	return a.gen < b.gen
}

// String summarises a search.
func (r ExhaustiveResult) String() string {
	return fmt.Sprintf("%d leaves (%d redundant schedules cut, %d cut at a known world of %d, %d left to other parts), %d states, depth %d, complete=%v in %v; rooms %d succeeded, failures %v; %d agreed, disagreements %v; frames sent after their room ended %v; "+
		"state frames %d sent, %d lost, %d duplicated, %d after their room ended",
		r.Leaves, r.Blocked, r.Matched, r.Worlds, r.Skipped, r.States, r.MaxDepth, r.Complete, r.Elapsed.Round(time.Millisecond), r.Stats.RoomSuccesses,
		r.Stats.RoomFailures, r.Stats.Agreed, r.Stats.Disagreements, r.Stats.FramesAfterEnd,
		r.Stats.StateFramesSent, r.Stats.StateFramesLost, r.Stats.StateFramesDuplicated, r.Stats.StateFramesLate)
}
