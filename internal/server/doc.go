// Package server is the serving worker's HTTP API: OpenAI-compatible
// completions and chat completions over a Backend (the local engine), plus
// /v1/models, vLLM's /tokenize and /detokenize, /health (liveness), /ready
// (readiness) and /metrics; with Options.Embeddings (an embedding model,
// package embed) POST /v1/embeddings in OpenAI's shape (embeddings.go:
// strings or token arrays, float or base64, dimensions where the model
// allows truncation, usage), where generation requests get a 400
// (EmbeddingBackend). On a prefill or decode worker the router's
// signed legs go to Options.Legs (package worker) instead of the Backend.
//
// # Data flow
//
//	HTTP body ─► openai.Decode*Request ─► checks (model, context length)
//	  ─► prompt tokens (completions: Encode(prompt, addSpecial, parseSpecial);
//	     chat: the chat template (package chat) renders, then Encode, BOS
//	     added only when the rendered text does not start with it, client
//	     text without special tokens)
//	  ─► n × Backend.Submit (seed, seed+1, ...), or a verified router leg's
//	     one sequence to Legs.SubmitLeg ─► one follow goroutine per
//	     stream: Stream.Next → Decoder → choiceState (stop strings, hold-back)
//	  ─► handler: SSE chunks as pieces arrive, or one JSON answer at the end.
//
// # Invariants
//
//   - Every submitted stream is cancelled on every exit path: the handler's
//     context is cancelled when it returns, each follow goroutine cancels
//     its stream when it returns and the handler waits for them. A client
//     that disconnects cancels its streams at once (the request context);
//     a stop-string match cancels the stream that matched.
//   - Only valid UTF-8 is sent: the tokenizer's Decoder holds back partial
//     characters. Text that could still become a stop string is held back
//     until it either matches (it and everything after it are dropped,
//     finish_reason "stop") or diverges (it is sent intact). At the end of
//     generation the held text is sent.
//   - Streams end with "data: [DONE]"; with stream_options.include_usage
//     the chunk before it has empty choices and the usage. An engine failure
//     mid-stream sends an OpenAI error object as a data event, then [DONE].
//   - Errors have OpenAI's shape {"error":{message,type,param,code}} and
//     status: 400 bad input (param names the field), 404 unknown model or
//     path, 405 wrong method, 413 body over Options.MaxBodyBytes, 429 queue
//     full (every 429 with Retry-After), 503 not ready or shutting down (code "draining", with
//     Retry-After, once a drain refuses new requests), 500 otherwise. A
//     handler panic is logged and answered with a 500; the process keeps
//     running, unless the panic is a broken invariant (package invariant),
//     which stops it.
//   - Writes to clients carry deadlines (Options.WriteTimeout per chunk or
//     answer) and every request body a deadline (Options.BodyTimeout from
//     the headers, also where the handler does not read it), so a slow
//     client cannot pin a sequence or a connection forever.
//   - The server's phase is a drain.Gate (Gate): /health answers 200 in
//     every phase, /ready 200 only while ready; a generation request is
//     admitted and counted until its handler returns, or refused while
//     starting and once a drain's settle window passed (package drain);
//     other endpoints are served in every phase, and from the start of a
//     drain every answer carries Connection: close.
//   - Authorization comes before any work: Options.APIKey is checked
//     before the body is read, and with Options.LegKeys (a PD worker) the
//     router's leg signature over the raw body before it is parsed (401
//     otherwise). Without LegKeys the X-Tandem-* headers are ignored.
//
// # Choices made
//
//   - Generated text is detokenized with the tokenizer's continuation
//     decoder: the first generated token keeps its leading space (" world"
//     after "Hello"), as llama.cpp's server and OpenAI do.
//   - max_tokens defaults to 16 for /v1/completions (as OpenAI) and to the
//     rest of the context for chat. An explicit max_tokens that does not fit
//     with the prompt is a 400 context_length_exceeded; the default is
//     clamped instead. temperature defaults to 1, top_p to 1, as OpenAI.
//   - An empty "model" is taken as the served model.
//   - Chat without tokenizer.chat_template (or with one that is refused at
//     start, which is logged: it does not compile, or breaks a budget on a
//     representative conversation) uses ChatML, llama.cpp's default:
//     "<|im_start|>{role}\n{content}<|im_end|>\n" per message, then
//     "<|im_start|>assistant\n"; generation ends at <|im_end|> (its token id
//     when the vocabulary has it, else the stop string).
//   - Chat templates are package chat's (internal/server/chat, rendered by
//     internal/jinja within its budgets): they render messages,
//     add_generation_prompt, bos_token, eos_token, tools and
//     chat_template_kwargs byte for byte as Hugging Face does; a template
//     that breaks a budget at request time fails that request with a 400.
//     The server tokenizes the text (chatformat.go) and adds the
//     fallback's stop; special-token text in client data is tokenized as
//     text, so a message cannot forge a turn (chatFormat.encode).
//   - A reasoning parser (Options.ReasoningParser; auto for templates that
//     write <think>) splits chat output into reasoning_content and content.
//     For a template that writes harmony (gpt-oss; auto, or harmony) the
//     output is read by package harmony instead (harmony.go): analysis is
//     reasoning_content, final content, messages to functions.NAME tool
//     calls.
//   - Tool calling (tools.go; Options.ToolCallParser, auto from the
//     template): tools go to the template; tool_choice auto parses the
//     content into tool calls in the model's syntax (package toolcall),
//     constrained by a grammar when a tool is strict; required and a named
//     function constrain the output to calls (after an optional reasoning
//     block when the reasoning parser is on); none renders the tools and
//     parses nothing. Answers carry message.tool_calls (content null when
//     only calls), streams delta.tool_calls with incremental arguments;
//     finish_reason is tool_calls when a call was made and generation
//     stopped normally. A template that does not render tools (its prompt
//     is the same with tools as without, chat.Template.RendersTools) is
//     logged at load, and answers to requests with tools carry a Warning
//     header (299) saying the model did not see them.
//   - Logprobs: the chosen token's logprob always, TopLogprobs alternatives
//     when asked. Completions use the legacy shape (tokens, token_logprobs,
//     top_logprobs maps, text_offset in runes of the returned text); chat
//     uses content [{token, logprob, bytes, top_logprobs}]. Tokens whose
//     text lies inside a matched stop string are not reported.
//   - Prompt logprobs (engine.Request.PromptLogprobs; the engine then skips
//     the prefix cache) for prompt_logprobs (vLLM's extension, 0..20, on
//     both endpoints) and for completions' echo with logprobs. Each choice
//     gets a prompt_logprobs member, last in the choice: null for the first
//     prompt token, then {"<token id>": {"logprob", "decoded_token"}} per
//     token — the prompt's own token only: a value above 0 is accepted but
//     adds no alternatives (the engine reports none), unlike vLLM. Chat
//     carries it per choice too (vLLM puts it at the top level), where the
//     PD router reads and splices it. Streamed, it is in each choice's first
//     chunk (the echo chunk, the chat role chunk, or else the first text
//     chunk), which therefore waits for the choice's first token. With echo
//     and logprobs the legacy block starts with the prompt's tokens: the
//     first token_logprobs entry null as OpenAI sends, top_logprobs null,
//     text_offset from 0 in the echoed prompt (the tokens' decoded
//     positions: exact when the prompt is what its tokens decode to, as for
//     a token-id prompt). Each of n choices computes them. A backend that
//     brings a count other than one per prompt token fails the request
//     (500). On a router's decode leg (X-Tandem-Leg: decode) the engine
//     imports the prompt's K/V and cannot compute them: the member is left
//     out for the router to splice in the prefill leg's, and echo's prompt
//     entries have null logprobs.
//   - Metrics (all prefixed tandem_): engine gauges and counters read from
//     Backend.Stats at scrape time; per-request counters and the TTFT,
//     inter-token and end-to-end latency histograms observed by the
//     handlers.
//
// # Options, endpoints and metrics
//
// New(Backend, Options); Options: ModelName, Logger, Registry, MaxBodyBytes,
// BodyTimeout, WriteTimeout, DefaultCompletionTokens, SystemFingerprint,
// LegKeys (a PD worker: only legs the router signed are served, see
// internal/api/leg) with Legs (which serves them), APIKey (bearer key on
// /v1/*), Mounts (more handlers, a PD worker's /pd/ and /debug/), ChatTemplate
// (Jinja source replacing the model's, --chat-template), ReasoningParser
// (none, think, harmony, or auto/"": harmony when the template writes
// harmony, think when it writes <think> and </think>). Handler(), HTTPServer(addr), SetReady (until it, /ready answers
// 503 and generation is refused; /health answers 200 while the process lives,
// {"status":"degraded","reason":...} when Options.Health says so), Gate (the
// internal/api/drain gate a drain runs through: generation refused with 503
// draining once its settle window passed, everything else served to the end).
// Backend, Legs and StatusError (how an implementation chooses its error's
// HTTP status): see go doc. Metrics are prefixed tandem_; beside them the
// server exports vLLM's names with a model_name label and vLLM's buckets, so
// dashboards and endpoint pickers built for vLLM read it:
// vllm:num_requests_running, vllm:num_requests_waiting,
// vllm:kv_cache_usage_perc (pages used / pages, a fraction as in vLLM; prefix-
// cache pages count as used), vllm:time_to_first_token_seconds,
// vllm:inter_token_latency_seconds, vllm:e2e_request_latency_seconds,
// vllm:request_queue_time_seconds (Submit to first admission,
// engine.Update.QueueTime), vllm:request_prefill_time_seconds (arrival to
// first token less the queue time) and vllm:request_decode_time_seconds (first
// to last token of a finished choice); promlint's complaint about their colons
// is expected (TestVLLMMetrics). A Stream that implements LegTimer (a worker's
// leg) has its LegTiming() written as an SSE comment (: x-tandem-timing …)
// just before [DONE] of a stream, or as the X-Tandem-Timing header of a whole
// answer (TestLegTimingCommentAndHeader). Streams send one chunk per engine
// step: engine.Handle merges the steps a slow reader missed, and
// EngineBackend's streams split them again into one token per Next
// (SplitUpdate; TestEngineBackendOneTokenPerNext, TestOneChunkPerStep).
//
// # Structured outputs, list prompts, reasoning, tools and /tokenize
//
//   - Structured outputs (constraint.go): the request's Constraint is compiled
//     once per distinct (kind, options, bytes), kept in an LRU of
//     GrammarCacheEntries (32) grammars (errors cached too; concurrent
//     requests for a new one wait for one compilation), and shared by every
//     choice's engine.Request.Grammar, across requests. Compiles are admitted
//     like work: at most GOMAXPROCS run at once, and a request whose grammar
//     needs one more is answered 429 with Retry-After: 1 at once
//     (tandem_grammar_compile_busy_total); each compile stays within the
//     grammar package's memory budget (grammar.DefaultMaxCompileBytes, 128
//     MiB) and runs under a context that ends when every request waiting for
//     it has left, so a client that leaves stops its compile (which is then
//     not cached). Tool grammars take the same path. A schema keyword the
//     grammar cannot enforce is a 400 unsupported_parameter naming the member
//     and the keyword; a schema, regex or GBNF that does not compile is a 400
//     invalid_value. A grammar whose token masks cost too much (refused by the
//     engine at Submit, or a sequence the engine ends with finish reason
//     grammar_budget) is a 400 saying the output constraint is too costly to
//     enforce, streamed as an error event when the stream has begun, and
//     counted in
//     tandem_request_finished_total{finish_reason="grammar_budget"}; /metrics
//     also exports the engine's tandem_grammar_refused_total,
//     tandem_grammar_budget_ends_total and tandem_mask_waits_total. logit_bias
//     ids outside the vocabulary and min_tokens above the tokens the request
//     may generate are 400s (on a router's prefill leg, whose body asks for
//     one token, min_tokens is clamped to it). LogitBias, MinTokens, IgnoreEOS
//     go to every choice's engine request.
//   - A completions list prompt gives n choices per prompt, choice i*n+j for
//     prompt i (seeds seed+i*n+j), with echo and prompt logprobs per prompt
//     and usage.prompt_tokens summing the prompts. A router leg is one room,
//     so a request that would make several sequences on a leg is a 400 (the
//     router splits n, not prompt lists).
//   - Chat templates render byte for byte as Hugging Face renders them
//     (package internal/server/chat). chat_template_kwargs become template
//     variables (not messages, tools, add_generation_prompt, bos_token,
//     eos_token). BOS is added to a rendered chat prompt only when the text
//     does not start with it (chatformat.go).
//   - With the reasoning parser on, chat output that opens with <think> (or
//     whose prompt left a <think> block open) is split: the reasoning goes to
//     message.reasoning_content / delta.reasoning_content (without the tags
//     and the newlines next to them), the rest to content; text that could be
//     a tag is held back, so the split does not depend on token boundaries,
//     and streamed and non-streamed answers agree.
//   - Harmony (gpt-oss; harmony.go): the template's markers (<|start|>,
//     <|channel|>, <|message|>) decide it, never a model's output. Each
//     choice's text (the tokenizer shows the markers, as llama.cpp does;
//     <|return|> and <|call|> end generation) goes through a
//     harmony.Parser started from the rendered prompt: delta and message
//     reasoning_content, content, and tool_calls (id and name when a call's
//     header is read, then its arguments as written), whatever the request's
//     tools; finish_reason tool_calls when a call was made and generation
//     stopped. An assistant message's reasoning_content in the request is
//     given to the template as reasoning_content and thinking (what gpt-oss's
//     template reads). tool_choice required and a named function submit
//     harmony.Grammar (optional reasoning, then one call; the prompt must
//     end with "<|start|>assistant", else a 400); a strict tool under auto
//     is a 400 (no harmony grammar for free content).
//   - Tool calling (tools.go, Options.ToolCallParser = --tool-call-parser,
//     default auto: toolcall.Detect on the chat template): the request's tools
//     are rendered by the template (also with tool_choice none); assistant
//     tool_calls go back to the template with arguments as objects when they
//     are the JSON text of one (as transformers' templates expect and vLLM
//     passes them), tool messages with tool_call_id. auto parses the content
//     (after the reasoning split) with a toolcall.Parser per choice,
//     constrained by the whole-output grammar when a tool is strict; required
//     and a named function submit toolcall.Grammar on every choice's
//     engine.Request.Grammar (in the server's grammar cache with the
//     structured-output grammars, keyed by request shape; a reasoning block
//     may come first when the reasoning parser is on and the prompt did not
//     close one); combined with another constraint (response_format) they are
//     a 400. Marker tokens that are control tokens ([TOOL_CALLS],
//     <|python_tag|>) keep their text in the parsed output. Answers:
//     message.tool_calls [{id, type, function:{name, arguments}}], content
//     null when only calls, finish_reason tool_calls (a cut-short call keeps
//     length); streamed: delta.tool_calls (id, type, name first, then argument
//     pieces). On a PD cluster both legs get the tools and the grammar, and
//     the decode worker, which writes the answer, parses it with the same
//     parser.
//   - /tokenize tokenizes a prompt as completions do, or messages (with tools,
//     add_generation_prompt, chat_template_kwargs) as chat completions do, and
//     answers {"count","max_model_len","tokens"} plus token_strs (vocabulary
//     texts) with return_token_strs; /detokenize {"tokens"} → {"prompt"}
//     (control tokens written as their text). They need the API key when there
//     is one, and on a PD worker the cluster credential (no leg signature:
//     they generate nothing). Their cost is capped (the tokenizer's working
//     memory is ~70x its input): at most twice the model's context in tokens
//     (or max_count, if less) and 16 bytes a token of that in text, else a 400
//     context_length_exceeded saying which; Options.MaxTokenize (default
//     min(GOMAXPROCS, 4)) are worked on at once, four times as many wait up to
//     10 s each, the rest get 429 with Retry-After: 1 before their body is
//     read (a semaphore of its own; tokenize.go says why not the engine's
//     queue limits).
//
// # Limits
//
// DefaultMaxBodyBytes = 8 MiB, DefaultBodyTimeout = 30 s, DefaultWriteTimeout
// = 30 s per chunk or answer (a slow client cannot pin a sequence),
// DefaultCompletionTokens = 16. HTTPServer: ReadHeaderTimeout 10 s,
// IdleTimeout 2 min, MaxHeaderBytes 64 KiB, no overall write timeout (streams
// are long).
package server
