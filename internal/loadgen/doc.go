// Package loadgen drives an OpenAI-compatible completions endpoint (Tandem's
// own `tandem serve`, vLLM, llama.cpp's server, ...) with a fixed number of
// requests, either from a fixed number of concurrent workers (closed loop)
// or at open-loop arrivals (Options.RequestRate, Poisson or gamma with
// Burstiness, capped by MaxConcurrency), as `vllm bench serve` does, and
// reports latency, throughput and goodput with vLLM's metric names. It is
// what `tandem bench serve` runs.
//
// Data flow: Run resolves the model (GET /v1/models when Options.Model is
// empty), then Concurrency workers pull request indices 0..Requests-1 from a
// shared counter. Each worker builds a prompt of about PromptTokens random
// words (a fixed word list, seeded by Options.Seed and the request index, so
// a run is reproducible and no two requests share a prefix), POSTs
// /v1/completions with temperature 0, max_tokens GenTokens, ignore_eos and,
// when streaming, stream_options.include_usage, then reads the server-sent
// event stream and timestamps every chunk that carries text. Per-request
// samples are merged under a mutex; the Report is built once all workers are
// done.
//
// Measurements (all from the client's clock):
//   - TTFT: from just before the request is sent to the first chunk with
//     non-empty text. Without streaming it equals the end-to-end latency.
//     A response whose tokens render as no text at all (control tokens,
//     stray UTF-8 bytes) still succeeds when usage counts its tokens; its
//     TTFT is then the first chunk carrying a choice. With neither text nor
//     counted tokens it fails as no_output.
//   - ITL: gaps between consecutive text chunks. A server may pack several
//     tokens into one chunk; when it reports usage.completion_tokens = T for
//     a stream of c text chunks with T > c, the first chunk counts as one
//     token and the other T-1 tokens are spread as evenly as possible over
//     the c-1 gaps, a gap covering k tokens contributing k samples of gap/k.
//   - E2E: from send to the end of the response.
//   - Tokens: usage.prompt_tokens and usage.completion_tokens when the server
//     sends usage; otherwise the nominal PromptTokens and the number of text
//     chunks (streaming) or GenTokens (not streaming).
//   - Percentiles are exact over all samples, interpolated linearly between
//     the two closest ranks (numpy's default), so they compare with the
//     numbers vLLM's benchmark prints.
//
// Invariants: every request has its own timeout; a response the client cannot
// make sense of (bad status, malformed event, JSON that does not parse, a
// stream that stops early) counts as a failed request of a named kind and
// never panics; SSE events are capped at MaxEventBytes (read with
// internal/router/answer's reader, the router's own) and non-streaming bodies
// at MaxBodyBytes, so a hostile server cannot make the client allocate without
// bound. Cancelling ctx stops the workers, aborts requests in flight (counted
// as canceled, not failed) and Run still returns the report of what
// completed. The HTTP client has its own Transport sized to the concurrency;
// http.DefaultClient is never used.
//
// Backends (vLLM's names): openai POSTs completions (prompt, max_tokens) to
// Options.Endpoint (default /v1/completions); openai-chat (Options.Chat)
// POSTs chat completions (the prompt as one user message,
// max_completion_tokens) to /v1/chat/completions, reading delta content
// and reasoning as output.
//
// Datasets: random and mixed prompts of random words, a JSONL file of
// prompts, or a ShareGPT file (ReadShareGPT) sampled as vLLM's sharegpt
// dataset: shuffled by seed, turn 0 the prompt, turn 1's token count
// max_tokens, vLLM's length filters; tokens are counted by a TokenCounter
// (the server's /tokenize, ServerTokenCounter, or the caller's tokenizer).
// A malformed file is an error naming its line (JSONL) or entry and line
// (ShareGPT) and the field that is wrong, never a Go type.
//
// Limits: the prompt length of a random dataset is in words, approximate in
// tokens because a foreign server's tokenizer is unknown; a ShareGPT file is
// read whole (at most MaxShareGPTBytes) as vLLM reads it.
//
// # API
//
// Run(ctx, Options, progress io.Writer) (*Report, error). Options: URL (a
// trailing / or /v1 is dropped), Model (empty: first id of GET /v1/models),
// APIKey, Concurrency (default 1), Requests (default 1), PromptTokens (prompt
// words, default 128), GenTokens (max_tokens, default 128), Stream, IgnoreEOS,
// Seed, Timeout (per request, default 5 minutes), ProgressInterval (default 5
// s when the writer is not a terminal; a redrawn bar on a terminal). Each
// request is temperature 0, and when streaming asks for
// stream_options.include_usage. Report (JSON, or text with WriteText): counts
// of completed, failed and canceled requests, duration, request throughput,
// output and total tokens per second, tokens, ttft_ms, itl_ms, e2e_ms
// summaries, and errors by kind with examples.
//
// # vLLM conventions
//
// Arrivals(n, rate, burstiness, seed) is the open-loop schedule as data (gamma
// intervals of shape B and scale 1/(R·B), rescaled so the last send is at n/R,
// as vLLM). Items are the requests (RandomItems: vLLM's [L(1−r), L(1+r)]
// lengths; ParseMixed/MixedItems: classes NAME:share=S,in=N|A-B,out=N|A-B
// joined by ;; ReadItems: JSONL {"prompt","max_tokens","class"}), each
// remembering its class. Goodput objectives (ParseGoodput: METRIC:MS or
// CLASS.METRIC:MS, metrics ttft, tpot, e2el, and itl = the longest gap between
// chunks) make a request good when it meets every one; TPOT is (e2el −
// ttft)/(output − 1), 0 for one token, as vLLM. The report's JSON carries
// vLLM's keys at the top level (duration, completed, total_input_tokens,
// total_output_tokens, request_throughput, request_goodput, good_completed,
// output_throughput, total_token_throughput, max_concurrency,
// max_concurrent_requests, request_rate, burstiness, and
// mean_/median_/std_/p{P}_{ttft,tpot,itl,e2el}_ms for PercentileMetrics ×
// MetricPercentiles, std population as numpy), the same block per class under
// classes, beside the older fields (ttft_ms, output_tok_s, ...). Sweep runs
// one open-loop run per rate and reports DistServe's goodput, the highest rate
// at which >= 90% of the sent requests met the objectives (failures count as
// missed); SweepResult.WriteSVG plots attainment and p90 TTFT against rate.
//
// # Sizes
//
// MaxEventBytes = 1 MiB per SSE event (read with internal/router/answer's
// reader), MaxBodyBytes = 16 MiB per non-streaming body and /v1/models reply.
package loadgen
