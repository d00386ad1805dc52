// Package chat is a model's chat template: it turns a chat request's
// messages (with its tools, add_generation_prompt and
// chat_template_kwargs) into the prompt text the model was trained on.
//
// # Place in the data flow
//
// internal/server compiles the model's tokenizer.chat_template (or
// --chat-template) once with [NewTemplate], renders each chat request
// with [Template.RenderInput] ([MessagesJSON] writes decoded messages as
// the template sees them) and tokenizes the text itself (the BOS rule and
// the fallback's stop token are the server's). cmd/tandem checks a
// --chat-template file compiles with NewTemplate.
//
// # Contract
//
//   - Templates render byte for byte as transformers' Jinja2 and
//     @huggingface/jinja (transformers.js) render them, and as
//     transformers where the two differ (the formatting of floats in
//     tojson); TestChatTemplateReference checks the renderings of testdata
//     against both. The Jinja engine is
//     github.com/ardanlabs/jinja (pure Go, made for GGUF chat templates);
//     where it differs, this package supplies its own tojson (Python's
//     json.dumps: key order kept, ", " and ": ", indent, ensure_ascii,
//     sort_keys; the filter is renamed in the source, values.go) and
//     strftime_now, and request JSON becomes template values with its key
//     order kept and integers apart from floats.
//   - The template sees messages, add_generation_prompt, bos_token,
//     eos_token, tools (undefined when the request has none) and each key
//     of chat_template_kwargs as a variable (which cannot replace the
//     others). An assistant's tool_calls reach it with arguments as an
//     object when they are the JSON text of one (as transformers'
//     templates expect and vLLM passes them), a tool message with its
//     tool_call_id.
//   - Without a template (an empty source) the fallback format is ChatML,
//     llama.cpp's default: "<|im_start|>{role}\n{content}<|im_end|>\n" per
//     message, then "<|im_start|>assistant\n"; generation should end at
//     [FallbackEnd].
//   - A source that does not compile is an error from NewTemplate; a
//     template that fails while rendering (raise_exception, a panic inside
//     the Jinja library) is an error from Render, never a panic. A
//     [Template] is safe for concurrent use.
package chat
