// Command tandem serves large language models with prefill and decode split
// across workers. One binary plays every role:
//
//	tandem up        routers and N prefill + M decode workers on this machine
//	tandem route     the OpenAI-compatible router in front of workers
//	tandem prefill   a prefill worker: runs prompts, pushes KV pages to decode
//	tandem decode    a decode worker: receives KV pages, generates in its batch
//	tandem serve     one colocated worker (prefill and decode together)
//	tandem inspect   a cluster's rooms, flagging any past its deadline
//	tandem generate  one prompt on the engine, streamed to stdout
//	tandem model     inspect (info) and synthesize (synth) GGUF models
//	tandem pull      fetch a GGUF from the Hugging Face hub into the cache
//	                 (cuts resumed within the pull)
//	tandem models    list the cache (models rm: remove from it)
//	tandem chat      a streamed multi-turn chat REPL over /v1/chat/completions
//	                 of --url, or of a serve it starts for --model
//	tandem ps        what a running serve or up serves: model, status,
//	                 workers by role
//	tandem bench     engine speed (bench engine), the machine's streaming
//	                 read bandwidth (bench memory), or load on any OpenAI
//	                 endpoint (bench serve: closed loop, or vllm bench
//	                 serve-style open loop with goodput and rate sweeps,
//	                 random, mixed or ShareGPT datasets, the openai or
//	                 openai-chat backend)
//
// main.go only builds the command tree; each command's file parses its
// flags and wires internal packages together. drain.go holds what every
// serving command (serve, prefill, decode, route) shares about stopping:
// the first SIGINT, SIGTERM or SIGHUP cancels the command's context and
// the command drains (internal/api/drain, --drain-settle, --drain-timeout);
// a second one ends the drain's settle window.
//
// # Inputs and outputs
//
// In: flags (--model is a GGUF path or a hub reference, resolved by
// resolveModel in pull.go; TANDEM_HOME, HF_ENDPOINT, HF_TOKEN for those),
// TANDEM_CLUSTER_TOKEN (or --cluster-token-file) for PD workers, the router
// and (optionally) inspect, TANDEM_API_KEY (or --api-key) for the router's and
// serve's /v1/* (and /tokenize, /detokenize), --chat-template FILE (serve,
// prefill, decode: a Jinja chat template replacing the model's; checked to
// compile at start), --reasoning-parser none|auto|think|harmony (default auto) and
// --tool-call-parser auto|hermes|llama3_json|mistral|generic (default auto:
// from the chat template; the syntax chat output is parsed in when a request
// has tools; tandem up starts its workers with auto), --max-model-len N
// (serve, prefill, decode, up: vLLM's context cap below the model's; the
// default KV cache holds 4 sequences of it within --kv-cache-memory-bytes,
// default 4GiB but never under one sequence; /v1/models reports it; longer
// requests get 400 context_length_exceeded), --json-max-whitespace N (serve,
// prefill, decode: 0, the default, keeps structured JSON output's whitespace
// compact, one space or a newline and up to 20 spaces or tabs; N allows any
// run up to N bytes), --log-format text|json, --log-level,
// --otlp-endpoint (or $OTEL_EXPORTER_OTLP_ENDPOINT,
// $OTEL_EXPORTER_OTLP_PROTOCOL) and --trace-sample (serve, prefill, decode,
// route, up: observe.go, internal/telemetry), --stats-interval (workers'
// periodic engine stats line, 10 s, 0 off), --discovery
// k8s|dns:NAME[:PORT]|file:PATH (route: live membership, internal/discovery),
// SIGINT and SIGTERM (turned into context cancellation). Out: HTTP servers (workers also mount
// /pd/ and /debug/ from worker, behind the cluster credential), logs, command
// output (text or --format json where offered). An error prints tandem:
// <error> on stderr and exits 1. The trust model is in docs/security.md.
//
// # Invariants
//
//   - PD workers and the router refuse to start without a cluster token of at
//     least 16 characters; tandem up uses $TANDEM_CLUSTER_TOKEN or makes one,
//     and passes it through the environment to every child. Workers serve only
//     legs the router signed with it; /pd/* and /debug/* need the credential
//     derived from it.
//   - Shutdown (serve, prefill, decode, route; drain.go, internal/api/drain):
//     the first SIGINT, SIGTERM or SIGHUP turns /ready to 503 (/health stays
//     200); requests are served for --drain-settle (5 s; a second signal ends
//     it), then refused with the draining answer while held ones (and a PD
//     worker's live rooms) have --drain-timeout (60 s; --shutdown-grace is its
//     old name); what is left then ends with an error (rooms failed, the
//     engine closed, a router's streams ended), the listener closes last, and
//     the process exits 0. A router given --listen-fd stops accepting on that
//     shared socket when it starts refusing. docs/operations.md is the
//     operator's view.
//   - --inject-faults exists only in a build with -tags tandemfaults
//     (faults_on.go); a normal build (faults_off.go) cannot enable faults.
//
// # Limits
//
// --port 0..65535. Per-package limits apply (engine, server, router, loadgen);
// command defaults include --heartbeat 1 s (a peer silent for two intervals is
// lost), --kv-transport auto (KV bytes through shared memory with a peer on
// the same host, else TCP; tcp, or shm to require it on prefill workers) with
// --kv-shm-mib 64 per connection, bench serve --timeout 5 min, inspect
// --timeout 10 s.
package main
