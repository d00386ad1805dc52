package oldchat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"

	"tandem/internal/api/openai"
)

// Fallback chat format, used when a model has no tokenizer.chat_template
// (or its template does not compile): ChatML, as llama.cpp defaults to.
//
//	<|im_start|>{role}\n{content}<|im_end|>\n     (once per message)
//	<|im_start|>assistant\n                       (the generation prompt)
//
// Generation ends at "<|im_end|>" (FallbackEnd): the server stops on its
// token id when the vocabulary has it as a token, else on the stop string.
const (
	fallbackStart = "<|im_start|>"
	// FallbackEnd ends each message of the fallback format; generation
	// stops at it.
	FallbackEnd = "<|im_end|>"
)

// Template turns chat messages into a prompt: a model's Jinja chat
// template, or the fallback format. It is safe for concurrent use.
//
// Templates render as @huggingface/jinja (transformers.js) renders them;
// where github.com/ardanlabs/jinja differs, Template supplies its own
// functions (see templateGlobals): tojson with Python's json.dumps
// semantics (key order kept, ", " and ": " separators, indent,
// ensure_ascii, sort_keys) and strftime_now on a clock a test can pin.
type Template struct {
	tmpl     *jinja.Template // nil: fallback format
	source   string
	bos, eos string
	now      func() time.Time // strftime_now's clock; nil: time.Now
}

// NewTemplate compiles a tokenizer.chat_template. bosToken and eosToken
// are the texts of the vocabulary's BOS and EOS tokens, handed to the
// template as bos_token and eos_token. An empty source selects the fallback
// format; a source that does not compile is an error.
func NewTemplate(source, bosToken, eosToken string) (*Template, error) {
	c := &Template{bos: bosToken, eos: eosToken, source: source}
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
func (c *Template) Fallback() bool { return c.tmpl == nil }

// BOS returns the BOS token text the template is rendered with.
func (c *Template) BOS() string { return c.bos }

// Source returns the template's Jinja source ("" for the fallback).
func (c *Template) Source() string { return c.source }

// WithClock returns a copy of c whose strftime_now reads now instead of
// the time of day (a test pins it to a reference's instant).
func (c *Template) WithClock(now func() time.Time) *Template {
	d := *c
	d.now = now
	return &d
}

// Input is what a chat template renders: the request's messages and
// tools as the client sent them (JSON, key order kept, so that tojson
// writes tool schemas as transformers does), the generation prompt switch
// and chat_template_kwargs (each key becomes a template variable, as
// enable_thinking for Qwen3).
type Input struct {
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
func (c *Template) Render(msgs []openai.Message, addGenerationPrompt bool) (string, error) {
	return c.RenderInput(Input{Messages: MessagesJSON(msgs), AddGenerationPrompt: addGenerationPrompt})
}

// MessagesJSON writes msgs as the JSON array of message objects a
// template renders ({"role","content"}, and the tool members: see
// writeMessage).
func MessagesJSON(msgs []openai.Message) json.RawMessage {
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

// writeMessage writes one chat message as the template sees it: role and
// content, an assistant's tool_calls with arguments as an object when they
// are the JSON text of one (as transformers' templates expect and vLLM
// passes them; other text stays a string), and a tool message's
// tool_call_id (before its content, in OpenAI's order).
func writeMessage(b *strings.Builder, m openai.Message) {
	role, _ := json.Marshal(m.Role)
	content, _ := json.Marshal(m.Content)
	b.WriteString(`{"role":` + string(role))
	if m.Role == "tool" {
		id, _ := json.Marshal(m.ToolCallID)
		b.WriteString(`,"tool_call_id":` + string(id))
	}
	b.WriteString(`,"content":` + string(content))
	if len(m.ToolCalls) > 0 {
		b.WriteString(`,"tool_calls":[`)
		for i, c := range m.ToolCalls {
			if i > 0 {
				b.WriteByte(',')
			}
			id, _ := json.Marshal(c.ID)
			name, _ := json.Marshal(c.Function.Name)
			b.WriteString(`{"id":` + string(id) + `,"type":"function","function":{"name":` + string(name) + `,"arguments":`)
			args := bytes.TrimSpace([]byte(c.Function.Arguments))
			if len(args) > 0 && args[0] == '{' && json.Valid(args) {
				b.Write(args)
			} else {
				a, _ := json.Marshal(c.Function.Arguments)
				b.Write(a)
			}
			b.WriteString(`}}`)
		}
		b.WriteByte(']')
	}
	b.WriteByte('}')
}

// RenderInput formats in. The fallback format takes each message's role
// and string content and ignores tools and kwargs.
func (c *Template) RenderInput(in Input) (string, error) {
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
			b.WriteString(fallbackStart + valueText(role) + "\n" + valueText(content) + FallbackEnd + "\n")
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

func (c *Template) render(data map[string]jinja.Value) (out string, err error) {
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
