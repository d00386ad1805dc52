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
// when a worker fails; embeddings.go),
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
// flight by Options.MaxRequests (429, with Retry-After as every 429), a leg's silence by
// Options.LegTimeout (for a non-streamed leg that is the whole leg), a
// request by Options.RequestTimeout; worker answers, events and debug
// documents by the constants in limits.go; finished records by
// Options.FinishedRecords and each record's history by historyMax.
//
// # Tests
//
// Scripted httptest workers check, under -race: answers byte for byte
// (streamed and not) and the splice; each failure path (prefill fails,
// decode fails before and during the stream, client disconnect, silent
// leg) with the other leg seen cancelled by its worker; health out and back
// in; draining workers (a refused leg goes elsewhere and is not a failure,
// every worker draining is a 503, /ready 503 draining takes a worker out)
// and the router's own drain (settle, refusal, EndRequests); the circuit
// breaker (a killed worker gets at most its threshold of
// legs); least-loaded picks and burst spreading; n > 1 merging; retries;
// the API key, CORS, request ids and slow bodies;
// /debug/cluster fan-out; metrics.
// The SSE reader, the JSON member editor and the splices and merges of
// answers are package answer's, with their own tests and fuzzers.
package router
