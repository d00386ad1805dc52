// Package openai is the OpenAI wire format that Tandem's HTTP API speaks:
// request decoding and checking, response and streaming-chunk documents,
// and errors in OpenAI's shape.
//
// # Place in the data flow
//
// internal/server reads a request body (bounded in size), hands it to
// [DecodeCompletionRequest] or [DecodeChatRequest], turns the decoded request
// into engine requests, and writes the engine's tokens back as
// [CompletionResponse] / [ChatResponse] documents or, when streaming, as
// [CompletionResponse] / [ChatChunk] server-sent events. The router and the
// shared HTTP plumbing (internal/api/httpx) use its documents and errors too.
// This package does no I/O, knows nothing of tokenizers or the engine, and
// imports no other Tandem package (cmd/tandem's TestImportRules checks it).
//
// # Decoding rules
//
//   - The body must be one JSON object. Each known member is decoded on its
//     own, so a wrong type is reported with the member's name in
//     error.param ("prompt[3]", "messages[1].content"). null means "not
//     given" for every optional member.
//   - Ranges follow OpenAI: temperature in [0, 2], top_p in (0, 1],
//     presence/frequency penalties in [-2, 2], n in 1..8, logprobs and
//     top_logprobs in 0..20, at most 4 stop strings (non-empty, at most
//     [MaxStopBytes] bytes). Extensions as in vLLM and llama.cpp: top_k
//     (-1 or 0 off), min_p in [0, 1], repetition_penalty > 0, ignore_eos,
//     stop_token_ids, prompt_logprobs (an integer in 0..20, any of which
//     turns prompt logprobs on; see [PromptLogprobs]). max_tokens and
//     max_completion_tokens must be >= 1; the server checks them against
//     the context length.
//   - Structured outputs (response_format json_object/json_schema,
//     structured_outputs, guided_*, llama.cpp's json_schema and grammar),
//     logit_bias and min_tokens are decoded in constraint.go. Members that
//     would change the result but are not implemented (functions, suffix,
//     best_of > 1, ...) are rejected with a 400 naming the member, unless
//     their value is one that changes nothing (null, [], {}, ...). Other
//     unknown members are ignored.
//   - A completions prompt is a string, an array of token ids, or a list of
//     strings or of id arrays (one choice per prompt and n, index
//     prompt·n+j; at most 64 prompts and 64 prompts·n).
//   - Chat messages have role system, user, assistant ("developer" is read
//     as system) or tool; content is a string or an array of
//     {"type":"text"} parts, joined with "\n". Image parts and function
//     messages are rejected. Tool calling (tools, tool_choice,
//     parallel_tool_calls, assistant tool_calls, tool_call_id) is decoded
//     in tools.go; the tools definitions and tool_choice by [ParseTools]
//     and [ParseChoice] (toolspec.go), which internal/server/toolcall
//     builds its grammars from.
//   - Chat requests may carry chat_template_kwargs (an object, or null):
//     extra chat template variables, as vLLM takes them
//     ({"enable_thinking": false} for Qwen3), in ChatRequest.ChatTemplateKwargs.
//
// Invariant: the decoders never panic and never allocate much more than the
// body's size; every failure is an [*Error] with status 400. Fuzz tests
// (FuzzDecodeCompletionRequest, FuzzDecodeChatRequest, seeds in
// testdata/fuzz) check this and the ranges of what decodes; table tests
// check each error's param and message.
package openai
