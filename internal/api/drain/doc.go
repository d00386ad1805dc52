// Package drain is how a serving process (tandem serve, a prefill or
// decode worker, a router) comes up and goes away without losing work:
// its phase, what GET /health (liveness) and GET /ready (readiness) say
// about it, the answer it gives work it no longer takes, the count of work
// it holds, and the drain that runs from SIGTERM to exit.
//
// # Phases
//
//	Starting ──SetReady──▶ Ready ──Drain──▶ Settling ──settle passed (or hurry)──▶ Draining ──idle or deadline──▶ (exit)
//
// In each phase:
//
//   - Starting: loading. /health 200 ("starting"), /ready 503, work refused
//     with 503 service_unavailable.
//   - Ready: /health 200 ("ok"), /ready 200, work admitted.
//   - Settling: the drain began. /ready 503 ("draining") at once, so routers
//     and load balancers stop sending work; work is still admitted as in
//     Ready (who has not noticed yet is served), and every answer carries
//     Connection: close so clients' kept-alive connections move on.
//   - Draining: the settle window passed. New work is refused with the
//     draining answer (Refusal: 503, code "draining", Retry-After), which
//     Tandem's router retries on another worker before any token reaches
//     its client; work already admitted runs on until it ends or the drain
//     deadline passes.
//
// /health answers 200 in every phase: the process is alive and able to
// finish its work, so a liveness probe never restarts a draining process.
//
// # Contract
//
//   - Admit (or Enter) counts one unit of work and the caller ends it with
//     Leave exactly once; nothing is admitted once the phase is Draining,
//     so from then on the count only falls. Phases only move forward
//     (SetReady(false) from Ready back to Starting is the one step back, for tests).
//   - Drain returns by Settle + Timeout (plus one poll interval) whatever
//     the work does: when everything held has ended (the gate's count and
//     Config.Busy both zero), or at the deadline with what is left
//     (Result.Left). The caller then ends what is left with a clear error
//     and exits; Drain ends nothing itself.
//   - Config.Hurry (a second SIGTERM or SIGINT) ends the settle window at
//     once; it never cuts work short.
//
// # Choices made
//
// The answer to refused work is 503 with code "draining" and Retry-After: 1
// (IsRefusal recognizes it): a status and code no other failure uses, so a
// router can tell "go elsewhere, nothing happened here" from a failing
// worker and keeps it out of its circuit breaker. The settle window comes
// before the refusals (as SGLang's gateway and Dynamo do it) because a
// router or a Kubernetes Service notices a readiness change only at its
// next probe or watch event.
package drain
