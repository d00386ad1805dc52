// Package router is Tandem's PD router: the OpenAI front door of a
// disaggregated cluster. It takes POST /v1/completions and
// /v1/chat/completions, streaming or not, sends each sample to a prefill
// worker and a decode worker at once under a fresh room id, and streams the
// decode worker's answer back. Its endpoints and answers are `tandem
// serve`'s but for one thing, a failure in the middle of a stream: serve
// sends the error as a data event and then data: [DONE]; the router sends
// one error event of its own, naming the failed leg, and no [DONE] (see
// Invariants).
//
// # Place in the data flow
//
//	client ──HTTP──▶ router ──prefill leg (HTTP)──▶ prefill worker ──KV (transfer)──▶ decode worker
//	                   ▲    ──decode leg (HTTP)───────────────────────────────────────▶     │
//	                   └──────────────── decode's answer (SSE or JSON) ◀────────────────────┘
//
// Per sample the router mints a room id (128 bits from crypto/rand, 32 hex
// digits) and picks a healthy prefill and decode worker, each the least
// loaded by what it reports on GET /pd/status plus the legs the router sent
// it since that report, ties round-robin. Both legs carry X-Tandem-Room,
// X-Tandem-Request-Id and X-Tandem-Leg; the decode leg also carries
// X-Tandem-Prefill, the prefill worker's transfer address from GET /pd/info.
// A prefill worker whose /pd/info says embeddings_only (its model only
// embeds, so it has no transfer address) makes a generation sample the
// worker's own 400 ("an embedding model"), as `tandem serve` answers.
// With Options.LegKeys (from the cluster token) every leg is signed:
// X-Tandem-Expires and X-Tandem-Signature, an HMAC over the method, path,
// those headers and the body (package leg), which workers check before
// any work.
// The prefill leg's body is the client's with stream false, max_tokens 1
// (and max_completion_tokens 1 for chat, or when given) and no
// stream_options; the decode leg's body is the client's, unchanged. With
// n > 1 each choice is its own sample (n 1, seed+i when a seed was given)
// and the router merges their choices (index i), usage and streams. A
// completions prompt that is a list of several prompts (strings or token-id
// arrays) is split the same way: choice j of prompt p is sample p*n+j, whose
// legs carry that one prompt (its bytes as the client wrote them) and n 1;
// usage counts each prompt's tokens once. The list is first checked as
// `tandem serve` checks it (at most 64 prompts and 64 prompts x n, one kind
// of element), with the same 400s, and each prompt is decided local or
// disaggregated on its own length.
//
// # Invariants
//
//   - Exactly one outcome per client request: decode's whole answer (byte
//     for byte for n = 1, plus prefill's prompt logprobs spliced into the
//     first chunk or into each choice when the client asked for them, and
//     with echo and logprobs the prompt's entries of the legacy
//     token_logprobs, null from decode, filled from them), or one error.
//     Before anything was sent that error is an OpenAI error document: a
//     worker's 4xx answer to the request exactly as the worker wrote it
//     (status, message, type, param, code, Retry-After), so that a client
//     gets what `tandem serve` would have said (a request is first checked
//     with the decoder serve uses, openai.Decode*Request, with the same
//     400s); for a worker failure (502), a timeout (504), a 409 or 499 of
//     the room protocol, a message that names the failed leg and carries
//     the worker's message. Never a worker's URL or address: those go to
//     the log line. After, one `data: {"error":...}` event and no [DONE].
//   - usage.prompt_tokens_details.cached_tokens is the most of decode's
//     count and the prefill worker's (its prefix-cache hit, from its
//     answer): decode's usage waits up to prefillGraceMax for prefill's
//     answer. A decode worker's Warning header reaches the client.
//   - A failed leg cancels the other at once; a client that goes away
//     cancels both. A prefill failure after decode began answering does not
//     fail the sample: decode can only answer once the KV arrived.
//   - A worker's draining answer (503, code "draining": it stops or
//     restarts) is never relayed while another worker can take the sample:
//     the sample goes to another worker under a new room id, the refusal
//     does not count as an attempt (up to drainedRetriesMax more) nor
//     against the worker's breaker, and the worker gets no new leg until
//     its /ready answers 200. With every worker of a role draining the
//     client gets 503 with code "draining".
//   - A room id is used once. A sample whose attempt failed before
//     anything of it reached the client, for a reason that is a worker's
//     (not a 4xx, a cancellation or a timeout), is sent to another pair
//     under a new room id, up to three pairs in all; the failed attempt's
//     other leg is cancelled, so its prefill work is discarded, and
//     nothing the client saw is replayed.
//   - Every goroutine has an owner that waits for it: the handler waits for
//     its samples, each sample for its two legs.
//
// # Health, metrics, debugging
//
// The workers, their health and their circuit breakers are package pool's
// (internal/router/pool). Run has it poll GET /ready (and /pd/status, and
// /pd/info until known) on every worker each HealthInterval; two
// consecutive failures take a worker out, one success puts it back, a
// worker that reports the other role stays out, and one whose /ready says
// it drains gets no new legs at once. Between rounds each
// worker's circuit breaker watches its legs, as the router reports how
// each ended (legOutcome: a worker's 4xx answer is a success, the
// client's fault, except 401 and 403, the worker refusing the router's
// signature, a cluster misconfiguration that counts as a failure and is
// logged at ERROR): BreakerFailures consecutive failed legs (or half
// of the last 20) open it and the worker gets no legs; after
// BreakerCooldown one probe leg goes through, and its success closes the
// breaker.
//
// # Front door
//
// Options.APIKey requires "Authorization: Bearer KEY" on /v1/ (401
// otherwise); Options.AllowedOrigins turns on CORS (preflights answered,
// Access-Control-Allow-Origin on answers). Every request gets an id, the
// client's X-Request-Id when it is valid, else a minted one; it is echoed
// in X-Request-Id, sent to both legs as X-Tandem-Request-Id, and appears in
// the request's log lines and /debug/rooms entries. A request body must
// arrive within BodyTimeout (408, and the connection closes). The 401's log
// line is bounded (refusallog.go): a prefix of the path, at most a few
// lines per interval, the next one counting those held back.
// The router serves GET /ready (readiness: 503 while it drains, or naming
// the missing role when no worker of it takes legs), GET /health
// (liveness: 200 while it serves, with the same document), /metrics
// (its own registry), /v1/models (from a healthy decode worker),
// POST /tokenize and /detokenize (forwarded with the cluster credential to
// a healthy decode worker, else a prefill worker; the API key covers them),
// POST /v1/embeddings (no disaggregation: forwarded whole with the cluster
// credential to the least-loaded worker of either role, retried elsewhere
// when a worker fails; an embedding worker's /pd/status counts its queued
// and computing inputs as waiting and running; embeddings.go),
// /debug/rooms (its live and recently finished request records with
// state, open legs, deadline, bytes and history, and its workers' health
// and breaker states) and /debug/cluster (its records and every worker's
// /debug/rooms as one document; the schema is package debugdoc), which
// package inspect (`tandem inspect`) prints as tables, flagging rooms past their
// deadline. /debug/rooms?room=ID keeps the rooms of that room or request id.
//
// GET /dashboard is a live page (embedded, polling GET /dashboard/data):
// workers, live rooms, the TTFT, ITL and transfer distributions from its
// registry, and recent failures linked to their /debug/rooms history.
// /debug/*, /dashboard/data and the links take the cluster credential or
// the session cookie POST /dashboard/login sets for the cluster token
// (HttpOnly, SameSite=Strict, 12 hours, a MAC keyed by the credential).
//
// Besides its tandem_router_* series, /metrics carries the cluster-level
// series under vLLM's names (model_name from the workers' /pd/info): TTFT,
// ITL and e2e latency of its requests, request_success_total by
// finished_reason per sample, tokens from the usage decode's answers
// carry, and its workers' summed queues and mean KV use; rooms by path,
// outcome and reason (tandem_router_rooms_total); and, per worker, the
// queue, running and KV use of its last /pd/status and the membership
// counts (tandem_router_workers).
//
// # Selective disaggregation
//
// disagg.go, --pd-threshold, Options.PDThreshold. Once per request the router
// decides the path of its samples: a prompt under the threshold goes as one
// local leg (X-Tandem-Leg: local, the client's body, no prefill address) to
// a decode worker, which prefills it in its own batch; a longer one is
// disaggregated. How the prompt is counted, cheapest first: token ids exactly;
// text by its bytes, an upper bound on its tokens (each token of a byte-level
// or byte-fallback vocabulary covers at least one byte; +2 for BOS/EOS; chat
// counts the raw JSON of messages and tools plus 64 tokens for the template's
// own text): under the threshold it is local at no cost; at 8 times the
// threshold or more it is long without counting; in between the router asks a
// decode worker's POST /tokenize (one loopback round trip) for the exact
// count, and disaggregates when that fails (count_failed). The whole prompt
// counts as uncached: the router does not know the decode workers' prefix
// caches. With the threshold on, a request whose prefill worker cannot be
// picked (none healthy, breakers open, all failed this request) runs locally
// whatever its length (no_prefill_worker), and /ready stays 200 with decode
// workers alone. Local legs fail, retry (another decode worker, a new room,
// only before anything reached the client), feed breakers and are cancelled
// with the client like decode legs. 0 disaggregates everything (the Options
// zero value); tandem route and tandem up default to 128.
//
// Spilling long prompts (--pd-spill, Options.PDSpill, default 0 (never) in
// tandem route/up: measured to hurt short prompts on the mixed goodput load,
// see DefaultPDSpill). A long prompt runs as a local leg on a decode worker,
// which prefills it within its --itl-target, when the least-queued prefill
// worker's queued prefill tokens plus the prompt are at least PDSpill times
// the least-queued decode worker's plus the prompt (prefill_busy; both from
// /pd/status, plus the prompts the router sent each since; a byte-bound prompt
// counts as bytes/4 tokens). On one thread a decode worker prefills at ~0.9 of
// a prefill worker's rate beside a few decodes (150 ms steps instead of ~20
// ms, which its short prompts and decode gaps pay), so 2 spills only when the
// local prefill would finish in about half the time; the arithmetic is in
// disagg.go. The decision in /debug/rooms then carries the weighed
// prefill_queue_tokens and local_queue_tokens.
//
// Why 128: Measured on this machine (2 cores shared with other jobs, load
// average 13 during the run; 1P1D of the synthesized 110m Q8_0 with an 8k
// context, --threads 1; tandem up --pd-threshold 0, prompts of random words
// one at a time, phases from /debug/rooms): prompts of 59, 246, 502 and 1005
// tokens had TTFTs of 766, 3968, 10168 and 25607 ms, of which prefill compute
// was 757, 3959, 10165 and 25597 ms; queue, KV transfer and the first decode
// step together took 3-10 ms. The PD round trip costs a few ms; prefill is
// linear in the prompt (13-25 ms a token under that load, about 2 ms on an
// idle core, where 1000 tokens take about 2 s). A local prefill is paid by
// every sequence decoding on that worker: at 2 ms a token, 128 tokens cost
// about 256 ms, about one 250 ms inter-token SLO even if the decode worker ran
// it in a single step (with the engine's ITL budget it is spread over steps).
// The mixed benchmark's short prompts (~30 tokens) then run locally and skip
// the prefill queue; its long ones (~1000) are disaggregated. A burst on the
// same cluster (2 prompts of ~250 random words with 16 tokens out, 8 short
// chat requests with 96 out, arriving over 6 s; load average 6): short TTFT
// 0.12-0.26 s with --pd-threshold 128 against 0.18-8.9 s with 0 (queued behind
// the long prompts on the prefill worker); long TTFT 13.5 and 21.2 s against
// 13.8 and 23.3 s.
//
// # Prefill worker choice
//
// Workers report prefill_queue_tokens in /pd/status (the engine's uncomputed
// prompt tokens). When every candidate reports it, prefill workers are ranked
// by it (plus the prompt tokens the router sent since the report, as the
// router counted them: a byte bound may over-count until the next report),
// then by load; otherwise by load (reported waiting + running plus the
// router's legs since). Decode workers are ranked by load
// (internal/router/pool).
//
// # TTFT and its phases
//
// The router's TTFT is the request's arrival to its first token written to the
// client (a whole answer's write when not streamed). Workers report their
// parts in X-Tandem-Timing (package leg): the prefill worker as a header of
// its answer (queue_ms: leg arrival to admission into its engine; prefill_ms:
// admission to the first token; transfer_ms: first token to decode's
// acknowledgement of the KV), the decode worker in an SSE comment just before
// data: [DONE] (: x-tandem-timing first_decode_ms=…: resuming from the KV to
// the first token out; an HTTP trailer would be lost when the client closes
// right after [DONE], which ends the router's read). Each is a duration on its
// worker's clock. The router never forwards them; it puts them with its TTFT
// in /debug/rooms (phases) and in tandem_router_ttft_phase_seconds{phase}.
// Each decode event goes to the client as its own chunk at once.
//
// # Errors and logs
//
// Status 502 for a worker failure, 504 for a timeout, the worker's own 4xx
// (400, 409, 429...). A worker's 4xx logs at INFO, the router's own 400s at
// DEBUG; client errors never carry a worker's URL or address, the log line
// does. A refused request's log line carries at most 128 bytes of its path
// (and its length), and at most 10 such lines are written per 10 s; the next
// one written counts those held back (suppressed). /tokenize and /detokenize
// go to a healthy decode worker (else prefill) within Options.TokenizeTimeout
// (30 s); a worker that does not answer in time is a 504 upstream_timeout
// saying so (a busy worker, not an unreachable one); its answer is read whole
// up to 32 MiB (workers answer at most twice their context in tokens).
//
// # Metrics and debug documents
//
// Metrics (its own registry): tandem_router_worker_{requests,errors}_total,
// tandem_router_worker_leg_seconds, tandem_router_worker_{inflight,healthy},
// tandem_router_requests_total{endpoint,status},
// tandem_router_time_to_first_token_seconds,
// tandem_router_e2e_request_latency_seconds, tandem_router_retries_total,
// tandem_router_worker_breaker_state{worker,role} (0 closed, 1 half open, 2
// open), tandem_router_worker_breaker_transitions_total{worker,role,to}, tande
// m_router_pd_decisions_total{path="local|disaggregated",reason="short_prompt|
// long_prompt|prefill_busy|no_prefill_worker|count_failed|threshold_off"} (one
// per attempt), tandem_router_ttft_phase_seconds{phase="queue|prefill|transfer
// |first_decode"}. tandem_router_time_to_first_token_seconds is observed once
// the first token is written to the client.
//
// /debug/rooms and /debug/cluster follow internal/pd/debugdoc (the workers'
// schema); the router's entry adds workers (health, breaker state, failures,
// inflight, prefill_queue_tokens); each router room has its decision (path,
// reason, prompt_tokens, counted_by, threshold) and, once known, its phases
// (ttft_ms, queue_ms, prefill_ms, transfer_ms, first_decode_ms). A local room
// has no prefill; its phase is local and its events
// local_ok/local_failed/local_cancelled. Router room states: dispatched,
// streaming, succeeded, failed.
//
// # Drain and replicas
//
// The router's phase is a drain.Gate (Gate): the process drains through it
// on SIGTERM (cmd/tandem: /ready 503, requests served for the settle
// window with Connection: close, then refused with the draining answer
// while its streams finish), and EndRequests ends what is left at the
// drain's deadline (503 before anything was sent, else one error event;
// both legs cancelled, so the workers end the rooms). Several routers may
// front the same workers with nothing shared: room ids are 128 random
// bits, each router reads the workers' own load from /pd/status and keeps
// its own breakers; every answer names the router that gave it
// (X-Tandem-Router, Options.Name). A router that dies costs only the
// streams it carried: its connections to the workers close, and the
// workers end its rooms.
//
// # Limits
//
// Client bodies are bounded by Options.MaxBodyBytes (413), requests in
// flight by Options.MaxRequests (429, with Retry-After as every 429; checked
// before the body is read, so at most MaxRequests bodies are in memory), a leg's silence by
// Options.LegTimeout (for a non-streamed leg that is the whole leg), a
// request by Options.RequestTimeout; worker answers, events and debug
// documents by the constants in limits.go; finished records by
// Options.FinishedRecords and each record's history by historyMax.
//
// The defaults: body 8 MiB (413),
// 4096 requests in flight (429), leg silence 5 min (the whole leg when not
// streamed), request 30 min, worker answers 128 MiB, one SSE event 16 MiB,
// 1024 finished records, 32 history entries per record.
package router
