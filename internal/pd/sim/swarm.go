package sim

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
)

// Units of the virtual clock.
const (
	us room.Duration = 1e3
	ms room.Duration = 1e6
)

// Fixed model constants.
const (
	pageTokens     = 128  // prompt tokens per KV page
	kvLayers       = 2    // layers of the KV cache in the swarm: a page is kvLayers K and V frames
	kvPageBytes    = 16   // bytes of one layer's K (or V) of one page: one KV frame's data
	chunksMax      = 4    // KV frames a prefill job sends at most
	genTokensMax   = 64   // tokens a request generates at most
	promptTokenMax = 2048 // prompt tokens at most
	requestsMin    = 20
	requestsMax    = 60
	prefillGrace   = 20 * ms
)

// Swarm is every parameter of one run, derived from its seed ("swarm
// testing": each seed turns faults on or off and picks their rates, so
// runs differ in kind, not only in schedule).
type Swarm struct {
	Prefills, Decodes int // node counts
	Requests          int
	ArrivalSpan       room.Duration // requests are dispatched in [0, ArrivalSpan)
	Burst             bool          // requests arrive within a few milliseconds
	PhaseOne          room.Duration // faults stop at this instant

	Tight     bool        // timeouts about as long as a few frames take
	Room      room.Config // the timeouts and limits of every Machine (Role set per node)
	Heartbeat room.Duration

	FrameLatencyMax room.Duration // P-D frames take [10us, FrameLatencyMax]
	LegLatencyMax   room.Duration // router legs take [50us, LegLatencyMax] ...
	LegSlowRate     float64       // ... and this share of them LegSlowMax more
	LegSlowMax      room.Duration
	DropRate        float64 // P-D frames lost
	DupRate         float64 // P-D frames delivered twice
	ReorderRate     float64 // P-D frames held back up to ReorderMax
	ReorderMax      room.Duration
	LinkBytesPerUs  float64 // each link writes this many bytes per microsecond (some seeds: slow links)
	Crashes         int
	Partitions      int
	DisconnectRate  float64 // clients that go away at a random moment
	CollisionRate   float64 // requests that reuse an earlier request's room id (a client-supplied id)
	EngineErrorRate float64 // prefill jobs and decode admissions that fail
	ChecksumRate    float64 // KV frames that fail their checksum
	SlowRate        float64 // nodes whose engine is slow during phase one
	SlowMax         int     // slow engines are 2..SlowMax times slower

	ComputePerToken room.Duration // prefill time per prompt token
	DecodePerToken  room.Duration // decode time per generated token
	PromptMax       int
	PoolPages       int // pages per decode engine
	KVLayers        int // layers of the KV cache (a page is KVLayers K and V frames)
	// StateBytes is each sequence's recurrent state (0: none), sent after
	// the pages in stateChunk pieces; StateSlots is how many states a
	// decode engine holds (an admission needs pages and a slot).
	StateBytes     int
	StateSlots     int
	PrefillSlots   int // prompts a prefill engine runs at once
	AdmitDelayMax  room.Duration
	TimerLateMax   room.Duration // timers fire up to this late
	WatchdogPeriod room.Duration

	// Calm seeds have no fault at all (no loss, duplicate, reorder,
	// crash, partition, disconnect, engine or checksum error, slow leg or
	// engine) and loose timeouts: prefill and decode must agree on every
	// room's outcome.
	Calm bool
}

// newSwarm derives a run's parameters from rng.
func newSwarm(rng *rand.Rand) Swarm {
	var sw Swarm
	between := func(lo, hi room.Duration) room.Duration {
		return lo + room.Duration(rng.Int64N(int64(hi-lo)/int64(us)+1))*us
	}
	sometimes := func(p, lo, hi float64) float64 {
		if rng.Float64() >= p {
			return 0
		}
		return lo + rng.Float64()*(hi-lo)
	}
	sw.Prefills, sw.Decodes = 1+rng.IntN(3), 1+rng.IntN(3)
	sw.Requests = requestsMin + rng.IntN(requestsMax-requestsMin+1)
	sw.Burst = rng.IntN(4) == 0
	sw.ArrivalSpan = between(20*ms, 1500*ms)
	if sw.Burst {
		sw.ArrivalSpan = between(1*ms, 10*ms)
	}
	sw.PhaseOne = sw.ArrivalSpan + between(50*ms, 500*ms)

	// Tight seeds make every timeout about as long as a few frames take,
	// so deadlines race frames, engines and each other, and tombstones
	// are forgotten while late frames are still on their way.
	sw.Tight = rng.IntN(8) == 0
	scale := room.Duration(1)
	if sw.Tight {
		scale = 50
	}
	timeout := func(lo, hi room.Duration) room.Duration { return between(lo, hi) / scale / us * us }
	sw.Heartbeat = timeout(30*ms, 200*ms)
	c := room.Config{
		HelloTimeout: timeout(50*ms, 500*ms), RequestTimeout: timeout(50*ms, 500*ms),
		HandshakeTimeout: timeout(50*ms, 500*ms), AdmissionTimeout: timeout(100*ms, 1000*ms),
		PrefillTimeout: timeout(100*ms, 1000*ms), ProgressTimeout: timeout(20*ms, 200*ms),
		RoomsMax: 1024, TombstonesMax: 4096,
	}
	c.AllocTimeout = c.HandshakeTimeout + c.AdmissionTimeout + timeout(10*ms, 200*ms)
	longest := max(c.HelloTimeout, c.RequestTimeout, c.AllocTimeout, c.HandshakeTimeout, c.AdmissionTimeout,
		c.PrefillTimeout, c.ProgressTimeout)
	c.TombstoneTTL = room.Duration(2+rng.IntN(4)) * longest
	if sw.Tight && rng.IntN(2) == 0 {
		c.TombstoneTTL = longest + timeout(50*us, 100*ms) // 1us..2ms
	}
	if rng.IntN(5) == 0 {
		c.RoomsMax = 2 + rng.IntN(11)
	}
	if rng.IntN(10) == 0 {
		c.TombstonesMax = 4 + rng.IntN(29)
	}
	sw.Room = c

	sw.FrameLatencyMax = between(50*us, 2*ms)
	sw.LegLatencyMax = between(100*us, 3*ms)
	sw.LegSlowRate = sometimes(0.5, 0.01, 0.1)
	sw.LegSlowMax = between(5*ms, 60*ms)
	sw.DropRate = sometimes(0.5, 0.001, 0.05)
	sw.DupRate = sometimes(0.4, 0.001, 0.03)
	sw.ReorderRate = sometimes(0.5, 0.01, 0.2)
	sw.ReorderMax = between(500*us, 20*ms)
	if rng.IntN(2) == 0 {
		sw.Crashes = 1 + rng.IntN(2)
	}
	if rng.IntN(2) == 0 {
		sw.Partitions = 1 + rng.IntN(3)
	}
	sw.DisconnectRate = sometimes(0.6, 0.05, 0.4)
	sw.CollisionRate = sometimes(0.2, 0.01, 0.08)
	sw.EngineErrorRate = sometimes(0.3, 0.005, 0.05)
	sw.ChecksumRate = sometimes(0.3, 0.002, 0.02)
	sw.SlowRate = sometimes(0.3, 0.2, 0.6)
	sw.SlowMax = 5 + rng.IntN(46)

	sw.ComputePerToken = between(2*us, 20*us)
	sw.DecodePerToken = between(200*us, 2*ms)
	sw.PromptMax = []int{64, 256, 1024, promptTokenMax}[rng.IntN(4)]
	sw.PoolPages = pagesFor(sw.PromptMax) * []int{1, 2, 4, 16}[rng.IntN(4)]
	if rng.IntN(10) == 0 {
		sw.PoolPages = 1 + rng.IntN(pagesFor(sw.PromptMax)) // some prompts never fit: the engine refuses them
	}
	sw.KVLayers = kvLayers
	sw.PrefillSlots = 1 + rng.IntN(2)
	sw.AdmitDelayMax = between(10*us, 500*us)
	sw.TimerLateMax = between(0, 500*us)
	sw.WatchdogPeriod = between(25*ms, 100*ms)
	sw.LinkBytesPerUs = []float64{0.2, 2, 50, 1000}[rng.IntN(4)]
	// The state: none, a piece of one frame, exactly one frame, or three
	// frames with a short last one.
	sw.StateBytes = []int{0, 1 + rng.IntN(kvPageBytes-1), kvPageBytes, 2*kvPageBytes + 1 + rng.IntN(kvPageBytes-1)}[rng.IntN(4)]
	if sw.StateBytes > 0 {
		sw.StateSlots = []int{1, 2, 8, 64}[rng.IntN(4)]
	}
	if rng.IntN(8) == 0 {
		sw.calm(rng)
	}
	return sw
}

// calm turns every fault of the swarm off and loosens its timeouts.
func (sw *Swarm) calm(rng *rand.Rand) {
	sw.Calm, sw.Tight = true, false
	sw.LegSlowRate, sw.DropRate, sw.DupRate, sw.ReorderRate = 0, 0, 0, 0
	sw.Crashes, sw.Partitions = 0, 0
	sw.DisconnectRate, sw.EngineErrorRate, sw.ChecksumRate, sw.SlowRate, sw.CollisionRate = 0, 0, 0, 0, 0
	sw.LinkBytesPerUs = max(sw.LinkBytesPerUs, 2)
	c := &sw.Room
	c.HelloTimeout, c.RequestTimeout, c.HandshakeTimeout = 2000*ms, 2000*ms, 2000*ms
	c.AdmissionTimeout, c.PrefillTimeout, c.ProgressTimeout = 5000*ms, 5000*ms, 2000*ms
	c.AllocTimeout = c.HandshakeTimeout + c.AdmissionTimeout + 100*ms
	c.TombstoneTTL = 3 * c.AdmissionTimeout
	c.RoomsMax, c.TombstonesMax = 1024, 4096
	sw.Heartbeat = 500 * ms
	_ = rng
}

// tolerance is how late past a deadline a room may still be live: the
// timer's lateness plus a millisecond of scheduling slack.
func (sw *Swarm) tolerance() room.Duration { return sw.TimerLateMax + ms }

// chain returns the longest a room of role can live: every phase's timeout
// on its longest path, with the progress deadline restarted by each KV
// frame (twice per chunk when frames are duplicated).
func (sw *Swarm) chain(role room.Role) room.Duration {
	c := &sw.Room
	progress := c.ProgressTimeout * (2*chunksMax + 2)
	if role == room.RolePrefill {
		return max(c.HelloTimeout, c.RequestTimeout) + c.AllocTimeout + c.PrefillTimeout + progress
	}
	return c.HandshakeTimeout + c.AdmissionTimeout + c.PrefillTimeout + progress
}

// drainBound is how long after faults stop every room must have ended,
// every page returned and every client got its outcome: a request still
// on its way, a frame held back and duplicated, a heartbeat timeout, the
// longest room, the longest generation (slow), the answer's way back and
// the router's grace.
func (sw *Swarm) drainBound() room.Duration {
	inFlight := sw.LegLatencyMax + sw.LegSlowMax + sw.FrameLatencyMax + 2*sw.ReorderMax
	longest := max(sw.chain(room.RolePrefill), sw.chain(room.RoleDecode))
	gen := room.Duration(genTokensMax) * sw.DecodePerToken * room.Duration(sw.SlowMax)
	return inFlight + sw.Heartbeat + longest + gen + 2*sw.LegLatencyMax + prefillGrace + sw.tolerance() + 10*ms + sw.linkTime()
}

// linkTime bounds how long one link takes to write every frame of every
// request (all of them through one link, each frame waiting once more for
// a frame of another room).
func (sw *Swarm) linkTime() room.Duration {
	frames := int64(sw.Requests) * (int64(pagesFor(sw.PromptMax))*int64(sw.KVLayers)*2 + int64(sw.stateFrames()) + 8)
	perFrame := float64(kvwire.HeaderBytes+kvPageBytes+64)/sw.LinkBytesPerUs + 1
	return room.Duration(float64(2*frames)*perFrame) * us
}

// stateFrames is the number of KV frames that carry one state.
func (sw *Swarm) stateFrames() int {
	if sw.StateBytes == 0 {
		return 0
	}
	return (sw.StateBytes + sw.stateChunk() - 1) / sw.stateChunk()
}

// stateChunk is a state frame's length (the last one's at most).
func (sw *Swarm) stateChunk() int { return kvwire.StateFrameSize(sw.StateBytes, kvPageBytes) }

// String lists the parameters, one "key=value" each, for the trace header.
func (sw Swarm) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "prefills=%d decodes=%d requests=%d arrival_span=%v burst=%v phase_one=%v\n",
		sw.Prefills, sw.Decodes, sw.Requests, sw.ArrivalSpan, sw.Burst, sw.PhaseOne)
	c := sw.Room
	fmt.Fprintf(&b, "timeouts tight=%v hello=%v request=%v alloc=%v handshake=%v admission=%v prefill=%v progress=%v ttl=%v heartbeat=%v rooms_max=%d tombstones_max=%d\n",
		sw.Tight, c.HelloTimeout, c.RequestTimeout, c.AllocTimeout, c.HandshakeTimeout, c.AdmissionTimeout,
		c.PrefillTimeout, c.ProgressTimeout, c.TombstoneTTL, sw.Heartbeat, c.RoomsMax, c.TombstonesMax)
	fmt.Fprintf(&b, "network frame_latency_max=%v link=%gB/us leg_latency_max=%v leg_slow=%.3f/%v drop=%.3f dup=%.3f reorder=%.3f/%v calm=%v\n",
		sw.FrameLatencyMax, sw.LinkBytesPerUs, sw.LegLatencyMax, sw.LegSlowRate, sw.LegSlowMax, sw.DropRate, sw.DupRate, sw.ReorderRate, sw.ReorderMax, sw.Calm)
	fmt.Fprintf(&b, "faults crashes=%d partitions=%d disconnect=%.3f collision=%.3f engine_error=%.3f checksum=%.3f slow=%.2fx%d\n",
		sw.Crashes, sw.Partitions, sw.DisconnectRate, sw.CollisionRate, sw.EngineErrorRate, sw.ChecksumRate, sw.SlowRate, sw.SlowMax)
	fmt.Fprintf(&b, "engines compute_per_token=%v decode_per_token=%v prompt_max=%d pool_pages=%d state_bytes=%d state_slots=%d prefill_slots=%d admit_delay_max=%v timer_late_max=%v watchdog=%v",
		sw.ComputePerToken, sw.DecodePerToken, sw.PromptMax, sw.PoolPages, sw.StateBytes, sw.StateSlots, sw.PrefillSlots, sw.AdmitDelayMax, sw.TimerLateMax, sw.WatchdogPeriod)
	return b.String()
}
