// Package toolcall is the tool-call syntax of each model family: it
// chooses the syntax a model writes tool calls in (from its chat template,
// or a flag), turns the model's output text into content and tool calls
// (whole, or streamed as deltas with incremental arguments), and builds the
// grammar that makes a model write calls in that syntax with arguments
// following each tool's parameter schema.
//
// # Place in the data flow
//
// internal/api/openai decodes a request's tools and tool_choice
// (openai.ParseTools, openai.ParseChoice) into the [openai.Tool] and
// [openai.Choice] values this package reads. internal/server picks the
// [Format] once per model ([Detect] on the chat template, or
// --tool-call-parser through [ParseFormat]), feeds each choice's generated
// text through a [Parser] and writes what it returns as message.tool_calls
// or delta.tool_calls; for tool_choice "required" or a named function it
// constrains generation with [Grammar]. This package does no I/O and knows
// nothing of HTTP; it builds grammars with internal/engine/grammar, which is
// why it lives beside the server and not in the wire package.
//
// # Formats
//
//   - [Hermes] (Hermes 2 Pro, Qwen 2.5, Qwen 3, QwQ):
//     <tool_call>{"name": ..., "arguments": {...}}</tool_call>, one block
//     per call, content around them.
//   - [Llama3JSON] (Llama 3.1, 3.2, 3.3): the whole answer is
//     {"name": ..., "parameters": {...}}, optionally after <|python_tag|>,
//     several separated by ";".
//   - [Mistral]: [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]
//     (Mistral 7B v0.3, Nemo, Small) or [TOOL_CALLS]name[ARGS]{...} per
//     call (the v11 tokenizer's form: Ministral 3, Magistral, Devstral).
//   - [Generic]: the whole answer is one call object
//     {"name": ..., "arguments": {...}} or an array of them.
//
// In every format "arguments" and "parameters" are both read as the
// arguments.
package toolcall
