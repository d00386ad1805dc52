// Package chat is a model's chat template: it turns a chat request's
// messages (with its tools, add_generation_prompt and
// chat_template_kwargs) into the prompt text the model was trained on.
//
// # Place in the data flow
//
// internal/server compiles the model's tokenizer.chat_template (or
// --chat-template) once with [NewTemplate], renders each chat request
// with [Template.RenderContext] ([MessagesJSON] writes decoded messages as
// the template sees them, an assistant's reasoning_content included;
// [HarmonyMessagesJSON] also as "thinking", which gpt-oss's template reads) and tokenizes the text itself (the BOS rule and
// the fallback's stop token are the server's). cmd/tandem checks a
// --chat-template file compiles with NewTemplate.
//
// # Contract
//
//   - Templates render byte for byte as transformers' Jinja2 renders them
//     (and as @huggingface/jinja, transformers.js, wherever the two agree);
//     TestChatTemplateReference checks the renderings of testdata against
//     both. The Jinja engine is internal/jinja, Tandem's own, which renders
//     every template within budgets (steps, output, call depth, sizes) and
//     stops when the request's context ends; request JSON becomes template
//     values with its key order kept and integers apart from floats.
//   - The template sees the variables transformers gives it: messages,
//     tools (None when the request has none), documents (None),
//     add_generation_prompt, bos_token, eos_token and each key of
//     chat_template_kwargs (which cannot replace the others, and cannot
//     replace a template builtin such as namespace or range: an error). An
//     assistant's tool_calls reach it with arguments as an object when they
//     are the JSON text of one (as transformers' templates expect and vLLM
//     passes them), a tool message with its tool_call_id.
//   - [Template.RenderContext] returns the text with the ranges that came
//     from the client (messages, tools, kwargs), so that the server can
//     tokenize client text without turning special-token text into
//     control tokens.
//   - Without a template (an empty source) the fallback format is ChatML,
//     llama.cpp's default: "<|im_start|>{role}\n{content}<|im_end|>\n" per
//     message, then "<|im_start|>assistant\n"; generation should end at
//     [FallbackEnd].
//   - A render's output, and any string the template builds, is at most
//     1 MiB plus 8 times the request's messages, tools and kwargs (and at
//     most jinja's string budget, 32 MiB); the other budgets are jinja's
//     defaults.
//   - NewTemplate refuses a source that does not compile, and one that
//     breaks a budget on a representative conversation (a user message;
//     system, user and assistant; a tool call and its result with tools;
//     with a tenth of the step budget, 5M steps) or cannot render a user
//     message: the error names the budget. At
//     request time a template that breaks a budget, or fails
//     (raise_exception), is an error from RenderContext, never a panic. A
//     [Template] is safe for concurrent use.
package chat
