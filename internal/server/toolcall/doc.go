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
//
// Detect chooses the format by the markers the chat template writes:
// <tool_call> for Hermes; <|python_tag|>, or "parameters" with
// <|start_header_id|>, for Llama3JSON; [TOOL_CALLS] for Mistral (whose v11
// form may carry [CALL_ID]id after the name); Generic otherwise (no template,
// the ChatML fallback). The names are vLLM's --tool-call-parser names.
// Format.Markers lists the marker texts, which a vocabulary may have as
// control tokens (decoded as nothing): the server keeps their text for the
// parser.
//
// # API
//
//   - NewParser(f, newID): Feed(text) Delta, Flush() Delta, Calls(). Parse(f,
//     text) Result (whole output), Collect(deltas...) Result (what a client
//     joining the stream gets). Call{ID, Name, Arguments}; CallDelta: the
//     first piece of call Index has ID and Name, later ones only Arguments
//     text.
//   - Format.NewID(): call_ + 24 random letters/digits (OpenAI's shape);
//     Mistral: 9 letters/digits, the only ids Mistral's templates accept when
//     the call comes back in the conversation.
//   - Grammar(GrammarSpec{Format, Tools, Choice, Parallel, Options, Think,
//     MistralNames}) (*grammar.Grammar, *Error): - required: 1..N calls
//     (exactly one without Parallel) of any tool; named function: exactly one
//     call of it; the output is only the calls, in the format's syntax
//     (<tool_call>\n…\n</tool_call> joined by \n; Llama 3 objects joined by ;
//     ; Mistral's array, or the name form with MistralNames; generic: one
//     object, an array with Parallel). - auto (used when a tool is strict):
//     free content, then optionally calls (Hermes/Mistral: content without the
//     opening marker; Llama 3/generic: content that does not open like a call,
//     or only calls); strict tools' arguments follow their schema, the others'
//     are any object; names are limited to the tools. - none: nil. - Think:
//     ThinkOptional allows <think>…</think> before required calls, ThinkOpen
//     expects the rest of a block the prompt opened. - A schema the grammar
//     cannot honour is an *Error naming tools[i].function.parameters and the
//     keyword.
//
// # Invariants
//
//   - The parser never panics, and its result (content and calls) does not
//     depend on how the text is split, at any byte (checked by TestParseSplits
//     and FuzzParse). Text that could still be part of a call is held back
//     until decided.
//   - A call whose head ({"name": "…", "arguments": {) reads in that order is
//     streamed: id and name as soon as the head is read, then the arguments
//     text exactly as written, piece by piece. Other calls (keys in another
//     order, arguments as a JSON string) are collected and parsed whole; a
//     block that is not a call is content, markers included.
//   - Content whitespace next to calls is dropped (held until non-space
//     content follows; dropped when a call starts, at the end when a call was
//     made, and right after a call).
//   - Every text a grammar accepts parses back (with the same format) to calls
//     only (required/named), of allowed functions, with arguments the schema
//     accepts (TestGrammarCalls samples outputs and checks).
//
// # Limits
//
//   - A call's head may hold a name of at most 256 bytes and runs of at most
//     256 whitespace bytes, else the block is parsed whole. A call cut short
//     (max_tokens) keeps the arguments text it got (not valid JSON).
//   - Llama 3 and generic output is read as calls only when it starts with one
//     (after whitespace); a call later in the text stays content. Llama 3.1's
//     built-in tools (<|python_tag|>brave_search.call(...)) are not parsed
//     (content).
//   - Hermes text between two call objects inside one <tool_call> block is not
//     read as a second call.
//   - Mistral's [TOOL_CALLS] is a control token in Mistral vocabularies: a
//     grammar has the model spell it with ordinary tokens (the grammar package
//     cannot emit control tokens). The text is the same, the token ids are not
//     those the model was trained with.
//   - auto without strict tools is parsed, not constrained; with a strict tool
//     the whole output is constrained (the content part by a regular
//     expression), not only the call after the model starts one.
//   - Arguments are constrained with the grammar package's schema coverage and
//     narrowings (properties in schema order, unlisted properties refused
//     unless additionalProperties allows them).
package toolcall
