// Package sim is Tandem's deterministic simulator of the prefill/decode
// (PD) handoff. It runs the shipped edge of N prefill and M decode workers
// (package driver, around the room state machines of package room) and a
// router model through faults, on a virtual clock, and checks after every
// call into a driver that no request is ever pinned: every room ends
// within its deadline, every page comes back, every client gets exactly
// one outcome, and both sides of a room agree on how it ended.
//
// # Where it sits: shipped code and models
//
// Shipped code, unchanged: each simulated node owns a *driver.Driver (the
// worker's deterministic edge: frame-to-event mapping and payload coding,
// KV accounting and duplicate detection, page quarantine while a KV write
// is in flight, the per-peer control and KV send lanes with their budget,
// progress counted on the wire and the held ComputeDone, the legs'
// bookkeeping) and, inside it, its room.Machine. The simulator calls the
// driver exactly as the worker's adapters do (Request, ClientAbort, Frame,
// KVDest/KVDone, Sent, PeerLost, Admitted, KVReady, ComputeDone,
// EngineError, Tick, Watchdog, Shutdown) and implements the interfaces it
// calls out through, on the virtual clock. The driver is not re-entrant:
// the fakes only record and schedule items on the queue, never call back.
//
// Modelled (the fakes):
//
//   - Engine and Pages: prefill runs prompts PrefillSlots at a time, each
//     in up to four chunks whose KV frames (every page, layer, K and V,
//     bytes derived from the room and coordinates) go to Driver.KVReady,
//     then Driver.ComputeDone; decode reserves pages FIFO from a finite
//     pool of real byte slices (Driver.Admitted a little later), Resume
//     checks every byte prefill computed is in the pages and runs a
//     generation that frees them and answers the leg, Cancel frees what
//     the leg holds. With a recurrent state (Swarm.StateBytes: none, part
//     of a frame, one frame, or three with a short last one, by seed) the
//     last chunk also hands the prompt's state as state frames; decode
//     admits with pages and a slot from a finite pool of state slots
//     (Swarm.StateSlots), Resume checks every state byte too, and freeing
//     a slot with a state write in flight is a violation. Freeing a page with a KV write in flight is a
//     violation (the driver must quarantine it).
//   - Wire: each directed link writes one frame at a time at a bandwidth
//     the seed picks (some links are slow), so a frame handed to
//     Wire.Send is on the wire, and Driver.Sent is called, after the
//     frames ahead of it; a send to a node that closed its connections
//     fails (Sent with an error: the driver fails the peer's rooms). Then
//     the frame travels with latency; faults drop it, deliver it twice or
//     hold it back so later frames overtake it. A partition holds frames
//     back (TCP retries) until it heals, or, when it outlasts the
//     heartbeat timeout, the side that stopped hearing declares the peer
//     lost (Driver.PeerLost), the connection closes and what was held is
//     lost; the peer hears of the close at once if it can. Frames to a
//     node that is down, or that restarted since they were sent, are lost.
//   - Transport receive side: one reader per connection, one frame at a
//     time: a control frame goes to Driver.Frame (header and encoded
//     payload), a KV frame asks Driver.KVDest for its page, the copy into
//     it takes a little while (other calls into the driver happen
//     meanwhile), then Driver.KVDone, with a checksum failure now and then.
//   - Crashes: silent (peers notice after the heartbeat timeout), process
//     exit (connections close at once, sends fail), and graceful
//     (Driver.Shutdown, a drain while still up, then exit). A crashed node
//     loses its driver, engine, pages and legs; the router's open legs to
//     it break; it restarts with a fresh driver (a new epoch).
//   - Router: per request a room id from the seed (sometimes a reused one,
//     as a client-supplied id would be), a prefill and a decode node, both
//     legs sent at once with latency (some slow), the other leg cancelled
//     when one fails or the client disconnects (at any moment), a grace
//     period for prefill after decode answered. It has no timeout of its
//     own, so a room that never ends shows up as a client without outcome.
//   - Engine faults: errors (a refused prompt or admission, a compute that
//     fails midway), KV checksum failures, slow engines during phase one.
//   - A watchdog sweep on every node every WatchdogPeriod, as the worker
//     runs one (Driver.Watchdog, which must never fail a room, and the
//     simulator's own overdue check with a tighter tolerance); it also
//     probes a live room not past its deadline (EventWatchdog through
//     Driver.Step must be rejected).
//
// Not modelled: the worker's goroutines, locks and sockets (its adapters
// around the driver), the kvwire byte stream (frames travel as values;
// headers and payloads are encoded, never corrupted except KV checksums),
// the router's retries on another pair and its own request deadline,
// HTTP-level faults between router and workers other than latency,
// connection setup, authentication and version checks, clock drift
// between nodes, the send budget's limits (the default budget is never
// reached), and node memory or CPU limits other than the page pool.
//
// The swarm is small on purpose: 20-60 requests per seed, 1-3 nodes per
// role, prompts up to 2,048 tokens (16 pages of 2 layers: up to 64 KV
// frames of 16 bytes), 64 generated tokens.
//
// # Determinism
//
// One goroutine, no wall clock, no sockets, no map iteration where order
// matters. Every random choice comes from one PCG source seeded by
// Options.Seed: the swarm parameters (node counts, timeouts, fault rates),
// the schedule of requests and faults, every latency. Scheduled items run
// in (time, sequence) order. A seed and a commit replay a run exactly;
// tracing does not consume randomness, so a failing seed is rerun with the
// trace on to print what happened.
//
// # Phases and invariants
//
// Phase one runs the requests under the seed's faults. At Swarm.PhaseOne
// faults stop: partitions heal (held frames go out), crashed and draining
// nodes restart, engines run at full speed, nothing is lost any more.
// Phase two must drain within Swarm.drainBound, derived from the deadlines:
// a request still in flight, a heartbeat timeout, the longest chain of
// phase timeouts a room can pass through (with the progress deadline
// restarted by each KV frame), the longest generation, the answer's way
// back, the router's grace and the time the slowest link needs for every
// frame. Then every room has ended on every node, every gauge is zero,
// every page, leg, prompt, admission, sequence and in-flight KV write is
// gone, every driver's Stats are all zero (no peer, room, queued byte or
// quarantined room left), every leg is answered and every client has one
// outcome; and for every room both sides ended, prefill and decode agree
// (both succeeded or both failed) when the seed is calm (Swarm.Calm: one
// seed in eight has no fault at all), and the disagreements are counted by
// reason otherwise. check.go lists the invariants checked after every call
// into a driver; a violation stops the run and names its invariant.
//
// # Exhaustive mode
//
// Exhaustive (exhaustive.go) enumerates, for one prefill/decode pair and
// one or two rooms, every order of the pending items (frames each way in
// link order, Sent completions, KV copies, engine callbacks, legs, client
// disconnects at any point) with up to K injected faults (drop, duplicate,
// a timer firing before the pending items), depth first by replaying
// choice prefixes, with sleep sets over per-node and router footprints to
// skip orders that differ only in independent items. Every leaf is
// checked like a seed's end. Its world's rooms carry a one-frame state, so
// state frames are among the items ordered, dropped and duplicated.
//
// With ExhaustiveOptions.Match the search also matches states
// (statehash.go): at each new choice point it digests the whole world by
// reflection (nodes, drivers, room machines, engine fakes, pages, the
// pending items as a set ranked per link, the clock, the random source,
// the faults spent, the checks' records; leaving out only statistics,
// traces and sequence numbers) and does not explore a world again when an
// earlier visit ran under a sleep set contained in this one's (the rule
// that keeps sleep sets sound with state matching). That turns the
// one-room tree with a fault and client disconnects everywhere from hours
// into minutes. TestExhaustiveMatchIsSound requires the matched search to
// reach every ending (each request's outcome and legs, each room's end on
// each node, the disagreements) and every final world the full search
// reaches. ExhaustiveOptions.Parts splits a search across processes by
// dealing the options at one depth round robin.
//
// # State frames
//
// State frames travel like KV frames, so every fault reaches them: Stats
// counts those written, lost, delivered twice, held back, and received
// after their room ended, and TestSim requires each over its seeds. The
// planted bug room.PlantedIgnoreState (decode checks DONE against the pages
// only) is caught by the resume check within a few seeds
// (TestPlantedStateBugIsCaught).
package sim
