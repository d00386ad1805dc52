// Package harmony reads the output of gpt-oss models, which write OpenAI's
// harmony format: a turn is a sequence of messages, each
//
//	<|start|>assistant<|channel|>CHANNEL[ to=RECIPIENT][ <|constrain|>TYPE]<|message|>TEXT<|end|>
//
// (the recipient may also stand after the role, and the turn's last
// message ends with <|return|>, or <|call|> when it calls a tool). The
// analysis channel is the model's reasoning, final its answer, commentary
// its preambles and, addressed to=functions.NAME, its tool calls.
//
// # Place in the data flow
//
// internal/server decides once per model that the chat template writes
// harmony ([Detect]), constrains tool_choice required and named functions
// with [Grammar], and feeds each chat choice's generated text
// (the tokenizer shows gpt-oss's message markers as text, as llama.cpp
// does) through a [Parser] started from the rendered prompt, and writes
// what it returns as reasoning_content, content and tool_calls (whole, or
// streamed as deltas). The package does no I/O and knows nothing of HTTP;
// it builds its grammar with internal/engine/grammar.
//
// # API
//
//   - NewParser(prompt, newID): Feed(text) Delta, Flush() Delta, Calls().
//     The prompt tells where the output starts: gpt-oss's template ends its
//     generation prompt with "<|start|>assistant", inside a header; a
//     prompt ending inside a message ("...<|channel|>final<|message|>")
//     starts the output in that message's text.
//   - Parse(prompt, text, newID) Result (a whole output), Collect(deltas...)
//     Result (what a client joining the stream gets).
//   - Grammar(tools, choice, opts): the output grammar of tool_choice
//     required or a named function, after the generation prompt
//     "<|start|>assistant": an optional analysis message (reasoning without
//     "<|"), then exactly one call,
//     <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>ARGS,
//     ARGS following the tool's schema; every text it accepts parses back
//     as that call (TestGrammar). The grammar engine cannot emit control
//     tokens: the model spells the markers with ordinary tokens where they
//     are control tokens (the text, and so the parse, is the same).
//   - ParseHeader(h) Header{Role, Channel, Recipient, Constrain};
//     CallName(recipient): "functions.f" calls f, a built-in tool's
//     recipient (browser.search, python) is the name as it is.
//
// # Output
//
//   - analysis → Reasoning; final, commentary without a recipient, a message
//     without a channel and text outside any message → Content; a message
//     to a recipient other than assistant or user → a call: its id and name
//     as soon as its header is read, then its text as the arguments, exactly
//     as written, piece by piece.
//   - Marker texts inside a message other than those that end it
//     (<|message|>, <|constrain|>) are part of its text; <|start|> and
//     <|channel|> inside a message end it and begin the next.
//
// # Invariants
//
//   - Never panics; the result does not depend on how the text is split, at
//     any byte (TestParse splits every case at every byte; FuzzParse).
//     Text that could be the start of a marker is held back until decided
//     (at most 12 bytes).
//   - Nothing the model wrote is dropped silently except the markers and
//     the headers themselves: a header longer than MaxHeader bytes is not a
//     header and its text is content; text after the prompt's
//     "<|start|>assistant" that never reaches a <|message|> and names no
//     channel is content.
//
// # Limits
//
//   - A header cut short (the output ended before its <|message|>, as with
//     max_tokens) gives nothing; a call cut short keeps the arguments text
//     it got (not valid JSON). The finish reason tells the client.
//   - The content type (<|constrain|>json) is read but not checked: the
//     arguments are passed on as written.
//   - A call the prompt itself opened (a prompt ending inside a message to a
//     tool) is read as content: it has no id.
package harmony
