// Package sim is Tandem's deterministic simulator of the prefill/decode
// (PD) handoff. It drives the real room state machines (package room) of N
// prefill and M decode workers and a router model through faults, on a
// virtual clock, and checks after every step that no request is ever
// pinned: every room ends within its deadline, every page comes back,
// every client gets exactly one outcome.
//
// # Where it sits
//
// The binaries run room.Machine inside internal/pd/worker's edge (HTTP legs,
// transport, engine, timer goroutine). The simulator replaces everything
// around the Machine with a model that carries out the same effects the
// same way — EffectSend becomes a frame to the peer, EffectStartCompute a
// prefill job whose chunks ship KV and report EventKVSent then
// EventComputeDone, EffectAdmit a reservation from a finite page pool then
// EventAdmitted, EffectResume a generation that frees the pages at its
// end, EffectCancel* and EffectReject answers to the router's legs,
// EffectRelease and EffectFreePages pages back to the pool — and steps the
// follow-up events the edge would. The Machine code is the production
// code, unchanged.
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
// # What is modelled
//
//   - Nodes: each owns a Machine for its role, an engine (prefill: prompts
//     in submission order, PrefillSlots at a time, compute time per prompt
//     token, KV shipped in up to four chunks; decode: FIFO admission from a
//     finite page pool, generation time per token), a timer set to
//     NextDeadline that fires up to TimerLateMax late, and the edge's legs.
//   - Network between prefill and decode: one ordered connection per pair
//     with latency; faults drop a frame, deliver it twice, or hold it back so
//     later frames overtake it. A partition holds frames back (TCP retries)
//     until it heals, or, when it outlasts the heartbeat timeout, the side
//     that stopped hearing declares the peer lost (EventPeerLost), the
//     connection closes and what was held is lost; the peer hears of the
//     close at once if it can. Frames to a node that is down, or that
//     restarted since they were sent, are lost.
//   - Crashes: silent (peers notice after the heartbeat timeout), process
//     exit (connections close at once, sends are refused), and graceful
//     (EventShutdown, a drain while still up, then exit). A crashed node
//     loses its Machine, engine, pages and legs; the router's open legs to
//     it break; it restarts with a fresh Machine (a new epoch).
//   - Router: per request a room id from the seed (sometimes a reused one,
//     as a client-supplied id would be), a prefill and a decode node, both
//     legs sent at once with latency (some slow), the other leg cancelled
//     when one fails or the client disconnects (at any moment), a grace
//     period for prefill after decode answered. It has no timeout of its
//     own, so a room that never ends shows up as a client without outcome.
//   - Engine faults: errors (a refused prompt or admission, a compute that
//     fails midway), KV checksum failures, slow engines during phase one.
//   - A watchdog sweep on every node every WatchdogPeriod, as the worker
//     edge runs one: it must never find a room past its deadline. It also
//     probes a live room not past its deadline (EventWatchdog must be
//     rejected) and runs Machine.CheckInvariants.
//
// Not modelled: the router's retries on another pair and its own request
// deadline, HTTP-level faults between router and workers other than
// latency, refused connections and resets, KV payload bytes and their
// layout (KV is counted per chunk), connection setup, authentication and
// version checks, clock drift between nodes (each Machine gets the one
// virtual clock), and node memory or CPU limits other than the page pool.
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
// back and the router's grace. Then every room has ended on every node,
// every gauge is zero, every page, leg, prompt, admission and sequence is
// gone, every leg is answered and every client has one outcome. check.go
// lists the invariants checked after every step; a violation stops the run
// and names its invariant.
//
// # Tests
//
// go test ./internal/sim runs 2,000 seeds (about 1 ms of CPU per seed)
// and checks that they reach far (successes, every kind of fault, most
// failure reasons); -seeds N runs more, -seed N replays one with its trace
// printed. A test plants room.PlantedDropEarlyAbort (SGLang's #24539:
// prefill drops an ABORT for a room it does not know yet) and requires a
// failure within the 2,000 seeds, caught by abort_before_request; another
// breaks the timers and requires the watchdog to fire. Seeds that once
// found a bug stay in a regression table.
package sim
