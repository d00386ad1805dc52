// Package pool is the router's worker pool: which prefill and decode
// workers are in, how loaded each is, and whether its circuit breaker lets
// a leg through. The router picks a worker for every leg from it and tells
// it how each leg ended.
//
// # Place in the data flow
//
//	router.Run ──every HealthInterval──▶ Check ──GET /ready, /pd/status, /pd/info──▶ workers
//	router attempt ──Pick(role, exclude, avoid, tokens)──▶ *Worker ──the leg──▶ Done(w, outcome) / Release(w)
//	                                                                  (a failure found in the answer: Failed(w);
//	                                                                   the draining answer: Draining(w))
//	router /health, /debug/rooms ◀── Count, Debug;   router /debug/cluster ◀── Workers
//
// A worker is known by its base URL (Worker.URL) and has one role
// (Worker.Role). Pick returns a *Worker handle; exclude and avoid lists
// compare handles, and every call that takes a worker takes the handle.
// The members are the URLs given to New (a static fleet), or those of
// the membership Reconcile was last given (live discovery):
//
//   - Reconcile(source, members): a member not in the pool joins out of
//     service and is returned, for the caller to probe at once (CheckNew);
//     one listed but not Ready takes no new leg; one no longer listed
//     (left) takes no new leg, stays probed and shown until its last leg
//     ends (Done or Release), then is dropped with its metric series
//     (Config.OnDrop lets the router drop its own). A worker listed again
//     under the same URL and role, while it finishes or after it was
//     dropped (the last 1024 are remembered), is the same *Worker: its
//     breaker, health and restart count are kept. A worker is keyed by
//     URL and role: the same URL in the other role is another worker.
//   - Instance ids: a worker reports its process's id in /pd/status and
//     /pd/info; a new id on a known address is a restart, counted (Debug's
//     Restarts) and closing its breaker.
//
// # Contract
//
//   - Every Pick that returns a worker counts a leg on it, and the caller
//     ends that leg exactly once, with Done (an Outcome for the breaker)
//     or Release (it told nothing). Failed feeds a failure found after the
//     leg's request succeeded to the breaker; it does not end the leg.
//   - Pick returns only a worker that is listed Ready, healthy, not draining, whose
//     breaker lets a leg through and that is not in exclude; one in avoid only when no other
//     is left. Among those: the fewest queued prefill tokens (prefill
//     workers, when every candidate reports its queue in /pd/status), then
//     the least load (reported waiting + running plus the legs picked
//     since the report), ties round-robin. A failed pick wraps ErrNoWorker
//     and names every worker's problem; PublicError is its text for a
//     client, without URLs.
//   - Health: a worker starts out; two consecutive failed probes take it
//     out, one success puts it back; a worker whose /pd/status or /pd/info
//     reports the other role stays out. A probe reads GET /ready (package
//     drain): 200 is a success; 503 {"status":"draining"} is a success too
//     (the worker is alive) that makes it draining; anything else fails.
//   - Draining: a worker whose /ready says it drains, or that answered a
//     leg with the draining answer (the router calls Draining), gets no new
//     leg at once, with no hysteresis; its legs in flight finish. The next
//     probe that finds /ready at 200 (the process restarted on the same
//     address) takes it back. Count counts only workers that take legs
//     (healthy, not draining); Debug shows the state; a draining refusal is
//     never a failure for the breaker. A prefill worker's transfer address
//     comes from /pd/info (TransferAddr asks at pick time when the probes
//     have not learned it) and is followed when /pd/status reports a new
//     one.
//   - Circuit breaker per worker (breaker.go): BreakerFailures consecutive
//     failed legs, or a failure rate of half the last 20 (10 at least),
//     open it; after BreakerCooldown one probe leg goes through (half
//     open); its success closes it, its failure opens it again, a Neutral
//     end lets another probe through.
//   - Every probe is bounded by HealthTimeout (TransferAddr's by
//     InfoTimeout) and every probe answer by 64 KiB. Check probes the
//     workers concurrently and waits for every probe: nothing the pool
//     starts outlives a call.
//
// The pool is safe for concurrent use. Its metrics are
// tandem_router_worker_inflight, _healthy, _draining, _breaker_state and
// _breaker_transitions_total, labelled by worker URL and role, and
// tandem_router_membership_changes_total{role,change} (join, leave, drop,
// ready, unready).
package pool
