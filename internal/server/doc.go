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
// # Tests
//
// Most tests run against a fake Backend that plays scripted updates over a
// small synthetic SentencePiece vocabulary (no model needed): the error
// table (status, type, param, code, message), stop strings over token
// boundaries and false prefixes, UTF-8 hold-back, both logprobs shapes,
// prompt logprobs (shape and place, streamed first chunks, n=2, echo
// offsets, decode and prefill legs, wrong counts), n=2, include_usage,
// mid-stream engine failures, client disconnects cancelling the stream,
// metrics names, /health and /ready, a drain (in-flight stream finishes,
// new requests refused). The chat templates' own tests are package
// chat's; here the tokenized chat prompt (one BOS, the fallback's stop,
// and /tokenize of every reference conversation against Hugging Face's
// tokenizers when Node and the packages are present). The real engine
// on a synthesized tiny model serves greedy requests streamed and not, and
// its prompt logprobs are checked against log-softmax of model.Runner's
// logits over the whole prompt. The request decoders' fuzz tests live in
// internal/api/openai.
package server
