// Package cores lends CPU cores between the worker processes of one host: a
// small shared-memory region in which each worker (a slot) publishes the
// priority of the work it is running, and through which the workers' kernel
// pools take and give back cores, so the host's cores go to the most urgent
// work instead of being split 1+1 for good. A decode worker's step that
// carries prompt tokens (a short prompt prefilled locally: a client waits on
// its first token) takes the prefill worker's core; a prefill worker takes an
// idle decode worker's core; two workers at the same priority share evenly.
//
// It is a cross-process lease used by cmd/tandem and internal/cluster, not
// part of the engine: the engine only calls the hooks it is given
// (engine.Config.StepHook, DecodePace), the kernels' pool the
// kernels.CoreLease methods.
//
// # Use
//
// Create(cores, slots) makes the region (a memfd); Open("fd:N" or a path) maps
// it; Region.Lease(slot, Options) takes a slot and returns a Lease with
// Step(priority) (end func()), the kernels.CoreLease methods (Acquire, Grant,
// TryAcquire, Revoked, Release), Stats (Borrowed: core-time held beyond the
// even share cores/slots; Lent: time a round waited for a core; Parks, Forced,
// Reclaimed, Held, Repairs, Anomalies), Health (degraded and why), Slots and
// Close. A step's priority is Urgent for a decode worker's step with prompt
// tokens, Normal otherwise, Idle between steps. NewCollector exports the
// tandem_core_lease_ metrics; DebugHandler serves the state as JSON (PD
// workers mount it at GET /debug/cores behind the cluster credential), and a
// worker passes Health to its server, so /health answers
// {"status":"degraded","reason":...} (still 200) while it says so.
//
// # Invariants
//
//   - The region is one page of 64-bit words used only with atomics: a header
//     (magic, version, cores, slots), an alloc word holding each slot's cores
//     (8 bits a slot) and one cache line per slot (priority | starving bit,
//     heartbeat in unix nanoseconds, pid). A core is taken only by a compare-
//     and-swap of the alloc word that keeps the total at or below the cores
//     shared, so pools sharing a region never run more threads than cores
//     (except a round forced past MaxWait, counted).
//   - The policy (share, pure): among live slots that want cores, the highest
//     priority splits them evenly (remainder to the lowest slots), after one
//     core is reserved for each starving slot of lower priority; a lower
//     priority gets none unless it is starving. A slot asking outside a step,
//     or holding cores while idle, counts as Normal.
//   - A pool's caller takes a core at every round start (Acquire: waits while
//     the policy gives it none or none is free); helpers join a round only up
//     to Grant() and with a core from TryAcquire, and stop claiming chunks
//     when Revoked (their process holds more than its share while another live
//     process wants one). Rounds are short, so a process that loses priority
//     gives its cores back within one chunk (helpers) or one round (the
//     caller); a pool's caller also gives its core back between chunks when
//     revoked.
//   - Nothing starves and nothing pins: past MaxPark (100 ms) a waiting caller
//     marks itself starving and gets one core back within a chunk; past
//     MaxWait (1 s) it runs without one. A slot whose heartbeat (every TTL/4,
//     from a goroutine of the process) is older than TTL (1 s) is dead: it
//     counts for nothing and its cores are taken back. A new lease of a slot
//     (a restarted worker) drops what the slot held. A process judges others'
//     heartbeats by its own TTL: every process of a region must use the same
//     (the default).
//   - The region is writable by any process of the user that can open it
//     (/proc/PID/fd/3), so a lease trusts its own memory over it. Its slot's
//     count is always written whole from what it holds, never incremented in
//     place; every TTL/4 the heartbeat goroutine rewrites its count, priority
//     word and pid when they differ (Repairs), as does a take or release that
//     finds its own count written over; values no lease writes count for
//     nothing (a count above the cores shared is 0, an unknown priority idle,
//     a heartbeat from the future dead) and are noted (Anomalies). A write to
//     the region therefore stalls nobody for good: rounds go on while it lasts
//     and are unforced again within TTL/4 of its end. Health is degraded for
//     HealthWindow (10 s) after a forced round, a repair or an anomaly, with
//     the reason.
//
// # Decode pacing
//
// With --core-lease-pace D (engine.Config.DecodePace; default 0, off), a
// decode worker's steps that only decode start no sooner than D after the
// previous step while another worker on the lease wants cores
// (Lease.OthersWant: in a step, holding cores or starving), so its core goes
// to the prefill worker between them; tokens then come about D apart (keep D
// well under the inter-token SLO), a new prompt or import is served at once in
// a step of its own, and with the prefill worker idle nothing waits.
//
// # Limits
//
// MaxSlots (8) processes and MaxCores (255) cores per region; host-local only.
// While waiting, Acquire yields 64 times, then naps 20 µs doubling to 1 ms
// between polls of the region (no futex across processes).
//
// # Why lending is off by default
//
// Measured on 2026-12-01 (the issue-12 mixed load on the synthesized 110m
// Q8_0, tandem up --threads 1, the project's 2-core VM, quiet host, rates 2
// and 3 req/s): with the urgent-prompt policy short-prompt TTFT p90 fell
// 10-22% and ITL p99 fell, but long-prompt TTFT p50 rose about 50% and
// attainment at 3 req/s fell from 100% to 88-92%; an even split was within
// run-to-run noise of no lending; neither reached issue 12's ratios. Under
// heavy load from other processes lending held short TTFT p90 at 0.45-1.3 s
// against 1.4-19 s without, in runs too noisy to rank long TTFT. So tandem up
// --lend-cores is off by default.
package cores
