package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"

	"tandem/internal/api/openai"
	"tandem/internal/engine/tokenizer"
)

// Fallback chat format, used when a model has no tokenizer.chat_template
// (or its template does not compile): ChatML, as llama.cpp defaults to.
//
//	<|im_start|>{role}\n{content}<|im_end|>\n     (once per message)
//	<|im_start|>assistant\n                       (the generation prompt)
//
// Generation ends at "<|im_end|>": on its token id when the vocabulary has
// it as a token, else on the stop string.
const (
	fallbackStart = "<|im_start|>"
	fallbackEnd   = "<|im_end|>"
)

// ChatTemplate turns chat messages into a prompt: a model's Jinja chat
// template, or the fallback format. It is safe for concurrent use.
//
// Templates render as @huggingface/jinja (transformers.js) renders them;
// where github.com/ardanlabs/jinja differs, ChatTemplate supplies its own
// functions (see templateGlobals): tojson with Python's json.dumps
// semantics (key order kept, ", " and ": " separators, indent,
// ensure_ascii, sort_keys) and strftime_now on a clock a test can pin.
type ChatTemplate struct {
	tmpl     *jinja.Template // nil: fallback format
	source   string
	bos, eos string
	now      func() time.Time // strftime_now's clock; nil: time.Now
}

// NewChatTemplate compiles a tokenizer.chat_template. bosToken and eosToken
// are the texts of the vocabulary's BOS and EOS tokens, handed to the
// template as bos_token and eos_token. An empty source selects the fallback
// format; a source that does not compile is an error.
func NewChatTemplate(source, bosToken, eosToken string) (*ChatTemplate, error) {
	c := &ChatTemplate{bos: bosToken, eos: eosToken, source: source}
	if strings.TrimSpace(source) == "" {
		return c, nil
	}
	t, err := compileTemplate(rewriteFilters(source))
	if err != nil {
		return nil, fmt.Errorf("compile chat template: %w", err)
	}
	c.tmpl = t
	return c, nil
}

func compileTemplate(source string) (t *jinja.Template, err error) {
	defer func() {
		if v := recover(); v != nil {
			t, err = nil, fmt.Errorf("template compiler panicked: %v", v)
		}
	}()
	return jinja.Compile(source)
}

// Fallback reports whether c uses the fallback format.
func (c *ChatTemplate) Fallback() bool { return c.tmpl == nil }

// BOS returns the BOS token text the template is rendered with.
func (c *ChatTemplate) BOS() string { return c.bos }

// Source returns the template's Jinja source ("" for the fallback).
func (c *ChatTemplate) Source() string { return c.source }

// ChatInput is what a chat template renders: the request's messages and
// tools as the client sent them (JSON, key order kept, so that tojson
// writes tool schemas as transformers does), the generation prompt switch
// and chat_template_kwargs (each key becomes a template variable, as
// enable_thinking for Qwen3).
type ChatInput struct {
	// Messages is a JSON array of message objects (role, content and, for
	// templates that use them, tool_calls, tool_call_id, reasoning_content).
	Messages json.RawMessage
	// Tools is a JSON array of tool definitions, or empty for none: the
	// template then sees tools undefined.
	Tools json.RawMessage
	// AddGenerationPrompt ends the prompt with the assistant's header.
	AddGenerationPrompt bool
	// Kwargs are extra template variables (chat_template_kwargs). They
	// cannot replace messages, tools, add_generation_prompt, bos_token or
	// eos_token.
	Kwargs map[string]json.RawMessage
}

// Render formats msgs, ending with the assistant's generation prompt when
// addGenerationPrompt is set. Errors come from the template (for example
// raise_exception on roles that do not alternate) and concern the messages.
func (c *ChatTemplate) Render(msgs []openai.Message, addGenerationPrompt bool) (string, error) {
	return c.RenderInput(ChatInput{Messages: messagesJSON(msgs), AddGenerationPrompt: addGenerationPrompt})
}

// messagesJSON writes msgs as the JSON array of message objects a
// template renders ({"role","content"}, and the tool members: see
// writeMessage).
func messagesJSON(msgs []openai.Message) json.RawMessage {
	var b strings.Builder
	b.WriteByte('[')
	for i, m := range msgs {
		if i > 0 {
			b.WriteByte(',')
		}
		writeMessage(&b, m)
	}
	b.WriteByte(']')
	return json.RawMessage(b.String())
}

// RenderInput formats in. The fallback format takes each message's role
// and string content and ignores tools and kwargs.
func (c *ChatTemplate) RenderInput(in ChatInput) (string, error) {
	msgs, err := jsonToValue(in.Messages)
	if err != nil {
		return "", fmt.Errorf("messages: %w", err)
	}
	if !msgs.IsList() {
		return "", fmt.Errorf("messages must be an array")
	}
	if c.tmpl == nil {
		var b strings.Builder
		for _, m := range msgs.AsList().Items {
			if !m.IsDict() {
				return "", fmt.Errorf("each message must be an object")
			}
			role, _ := m.AsDict().Get("role")
			content, _ := m.AsDict().Get("content")
			b.WriteString(fallbackStart + valueText(role) + "\n" + valueText(content) + fallbackEnd + "\n")
		}
		if in.AddGenerationPrompt {
			b.WriteString(fallbackStart + "assistant\n")
		}
		return b.String(), nil
	}
	data := make(map[string]jinja.Value, len(in.Kwargs)+8)
	for k, raw := range in.Kwargs {
		v, err := jsonToValue(raw)
		if err != nil {
			return "", fmt.Errorf("chat_template_kwargs.%s: %w", k, err)
		}
		data[k] = v
	}
	for name, fn := range c.templateGlobals() {
		data[name] = fn
	}
	data["messages"] = msgs
	data["add_generation_prompt"] = jinja.NewBool(in.AddGenerationPrompt)
	data["bos_token"] = jinja.NewString(c.bos)
	data["eos_token"] = jinja.NewString(c.eos)
	if len(in.Tools) > 0 && strings.TrimSpace(string(in.Tools)) != "null" {
		tools, err := jsonToValue(in.Tools)
		if err != nil {
			return "", fmt.Errorf("tools: %w", err)
		}
		data["tools"] = tools
	}
	return c.render(data)
}

// valueText is the text of a string value, "" for anything else.
func valueText(v jinja.Value) string {
	if v.IsString() {
		return v.AsString()
	}
	return ""
}

func (c *ChatTemplate) render(data map[string]jinja.Value) (out string, err error) {
	defer func() {
		if v := recover(); v != nil {
			out, err = "", fmt.Errorf("chat template failed: %v", v)
		}
	}()
	out, err = c.tmpl.RenderValues(data)
	if err != nil {
		return "", fmt.Errorf("chat template: %w", err)
	}
	return out, nil
}

// chatFormat is a model's chat template with what tokenizing its output
// needs.
type chatFormat struct {
	tmpl       *ChatTemplate
	stopTokens []int32  // fallback: the <|im_end|> token
	stops      []string // fallback without that token: the stop string
}

// newChatFormat builds the format for tok's vocabulary, from override when
// it is not empty (--chat-template), else from the vocabulary's
// tokenizer.chat_template. It returns the fallback together with the
// compile error when the template does not compile.
func newChatFormat(tok *tokenizer.Tokenizer, override string) (*chatFormat, error) {
	v := tok.Vocab()
	text := func(id int32) string {
		if id >= 0 && int(id) < len(v.Tokens) {
			return v.Tokens[id]
		}
		return ""
	}
	bos, eos := text(tok.BOS()), text(tok.EOS())
	src := v.ChatTemplate
	if override != "" {
		src = override
	}
	t, err := NewChatTemplate(src, bos, eos)
	if err != nil {
		t, _ = NewChatTemplate("", bos, eos)
	}
	f := &chatFormat{tmpl: t}
	if t.Fallback() {
		f.stops = []string{fallbackEnd}
		for id, s := range v.Tokens {
			if s == fallbackEnd {
				f.stopTokens, f.stops = []int32{int32(id)}, nil
				break
			}
		}
	}
	return f, err
}

// prompt renders msgs and tokenizes the result with special tokens parsed.
func (f *chatFormat) prompt(tok *tokenizer.Tokenizer, msgs []openai.Message) ([]int32, error) {
	text, err := f.tmpl.Render(msgs, true)
	if err != nil {
		return nil, err
	}
	return f.encode(tok, text), nil
}

// promptInput renders in and tokenizes the result with special tokens
// parsed.
func (f *chatFormat) promptInput(tok *tokenizer.Tokenizer, in ChatInput) ([]int32, string, error) {
	text, err := f.tmpl.RenderInput(in)
	if err != nil {
		return nil, "", err
	}
	return f.encode(tok, text), text, nil
}

// encode tokenizes a rendered prompt. BOS is added (when the vocabulary
// adds one) unless the text already starts with the BOS token's text, as
// llama.cpp does, so that a template that writes bos_token does not get a
// second one.
func (f *chatFormat) encode(tok *tokenizer.Tokenizer, text string) []int32 {
	addSpecial := f.tmpl.bos == "" || !strings.HasPrefix(text, f.tmpl.bos)
	return tok.Encode(text, addSpecial, true)
}
