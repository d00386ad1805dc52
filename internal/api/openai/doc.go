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
// # Structured outputs, logit bias and tool calling
//
//   - Structured outputs (constraint.go) become Common.Constraint (Kind
//     json_schema, json_object, regex, choice or grammar; Param names the
//     member for errors; Schema, Regex, Choice, Grammar,
//     DisableAnyWhitespace): response_format {"type":"text"} (none),
//     {"type":"json_object"}, {"type":"json_schema","json_schema":{"name",
//     "schema","strict"}} (schema required; strict checked and ignored: the
//     output is always constrained); vLLM's structured_outputs {"json": schema
//     or a string holding one}, {"regex"}, {"choice": [...]}, {"grammar":
//     GBNF}, {"json_object": true}, with disable_any_whitespace, and backend,
//     disable_fallback, disable_additional_properties checked and ignored (any
//     other member, e.g. whitespace_pattern, structural_tag: 400); the legacy
//     guided_json, guided_regex, guided_choice, guided_grammar
//     (guided_whitespace_pattern: 400); llama.cpp's json_schema and grammar
//     ("" is none). Two constraints in one body are a 400 naming both. Bounds:
//     MaxConstraintLen (1 MiB) per schema/regex/grammar/choices, MaxChoices
//     (64).
//   - logit_bias (token id strings → numbers in [-100, 100], at most
//     MaxLogitBiasLen = 1024 entries) becomes Common.LogitBias; min_tokens (>=
//     0) Common.MinTokens; ignore_eos Common.IgnoreEOS.
//   - Tool calling (chat only, tools.go; completions reject tools,
//     tool_choice, parallel_tool_calls): tools ([{"type":"function","function"
//     :{"name","description","parameters","strict"}}]) and tool_choice (none,
//     auto, required, {"type":"function","function":{"name"}}) decoded by
//     ParseTools and ParseChoice (toolspec.go: names ^[a-zA-Z0-9_-]{1,64}$ and
//     unique, parameters an object, at most MaxTools = 128) into
//     ChatRequest.ToolFields (Tools, ToolsJSON as sent, ToolChoice,
//     ParallelToolCalls, Parallel()); assistant messages' tool_calls ([{id,
//     type:"function", function:{name, arguments}}], arguments a JSON string
//     as OpenAI sends, or an object) into Message.ToolCalls, and tool
//     messages' required tool_call_id into Message.ToolCallID; each tool
//     message must answer a call of the assistant message before it (other
//     tool messages may come between), as OpenAI checks. Errors name the
//     member (tools[0].function.name, tool_choice.function.name,
//     messages[3].tool_call_id). Answers: ChatMessage.ToolCalls (content null
//     when there are only calls), ChatDelta.ToolCalls (ToolCallDelta: {index,
//     id, type, function:{name, arguments:""}} first, then {index,
//     function:{arguments}} pieces), FinishReasonToolCalls.
//
// # Types and limits
//
// Response types: CompletionResponse, ChatResponse, ChatChunk, Usage (with
// PromptTokensDetails), the logprob documents, PromptLogprobs, ModelList.
// Error constructors: Invalid, ContextLengthExceeded, ModelNotFound, TooLarge,
// MethodNotAllowed, NotFound, RateLimited, Unavailable, Internal; Error.Body
// and MarshalBody give OpenAI's {"error": ...} document. A completions
// request's prompts are CompletionRequest.Prompts (at least one; Prompt,
// PromptTokens and TokenPrompt repeat the first). Limits (request.go): MaxN
// (8) choices, MaxLogprobs (20), MaxStop (4) stop strings of at most
// MaxStopBytes (512) bytes, MaxPrompts (64) prompts and MaxCompletionChoices
// (64) prompts × n.
//
// Invariant: the decoders never panic and never allocate much more than the
// body's size; every failure is an [*Error] with status 400.
package openai
