package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"tandem/internal/api/openai"
	"tandem/internal/jinja"
)

// Fallback chat format, used when a model has no tokenizer.chat_template
// (or its template is refused): ChatML, as llama.cpp defaults to.
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
// Templates render as transformers renders them (package jinja, Tandem's
// own renderer), within jinja's default budgets: a template that breaks
// one fails its request, never the process. Client data (messages, tools,
// chat_template_kwargs) is marked untrusted in the output, so that the
// prompt's tokenization does not turn special-token text typed by a
// client into control tokens.
type Template struct {
	tmpl     *jinja.Template // nil: fallback format
	source   string
	bos, eos string
	now      func() time.Time // strftime_now's clock; nil: time.Now
	limits   jinja.Limits     // zero: jinja's defaults
	// dropsTools: the template renders a conversation the same with tools
	// as without (it has no tools section), found at load.
	dropsTools bool
}

// NewTemplate compiles a tokenizer.chat_template. bosToken and eosToken
// are the texts of the vocabulary's BOS and EOS tokens, handed to the
// template as bos_token and eos_token. An empty source selects the fallback
// format. A source that does not compile is an error, and so is one that
// breaks a budget, or fails, on a representative conversation (see
// checkTemplate): such a template is refused at load.
func NewTemplate(source, bosToken, eosToken string) (*Template, error) {
	c := &Template{bos: bosToken, eos: eosToken, source: source}
	if strings.TrimSpace(source) == "" {
		return c, nil
	}
	t, err := jinja.Parse(source)
	if err != nil {
		return nil, fmt.Errorf("compile chat template: %w", err)
	}
	c.tmpl = t
	if err := c.checkTemplate(); err != nil {
		return nil, err
	}
	c.dropsTools = c.ignoresTools()
	return c, nil
}

// toolsProbe is the conversation and the tool ignoresTools renders.
const (
	toolsProbeMessages = `[{"role":"user","content":"Weather in Paris?"}]`
	toolsProbeTools    = `[{"type":"function","function":{"name":"get_weather","description":"Get the weather.","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`
)

// ignoresTools reports whether the template renders a user's question the
// same with a tool as without: the tools of a request never reach the
// prompt. A template that fails either way is not judged (false).
func (c *Template) ignoresTools() bool {
	in := Input{Messages: json.RawMessage(toolsProbeMessages), AddGenerationPrompt: true}
	without, err := c.render(context.Background(), in, checkSteps)
	if err != nil {
		return false
	}
	in.Tools = json.RawMessage(toolsProbeTools)
	with, err := c.render(context.Background(), in, checkSteps)
	return err == nil && with.Text == without.Text
}

// RendersTools reports whether the template puts a request's tools into
// the prompt. False for the fallback format and for a template without a
// tools section (such as the Llama 3 templates some tokenizer packages
// ship): the model never sees the tools' names, descriptions or
// parameters, however the output is constrained.
func (c *Template) RendersTools() bool { return c.tmpl != nil && !c.dropsTools }

// Representative conversations every template is rendered with at load:
// a plain exchange, then one with tools, a tool call and its result.
// Budget errors in any of them refuse the template; so does any error in
// the first (a template that cannot render a user's "Hello" is of no
// use). Templates may refuse the others (roles they do not support).
var checkConversations = []struct {
	name                string
	messages, tools     string
	addGenerationPrompt bool
}{
	{"a user message", `[{"role":"user","content":"Hello"}]`, "", true},
	{"system, user, assistant and user messages", `[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},` +
		`{"role":"assistant","content":"Hello."},{"role":"user","content":"Bye"}]`, "", true},
	{"a tool call and its result, with tools", `[{"role":"user","content":"Weather in Paris?"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":{"city":"Paris"}}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"sunny"},{"role":"assistant","content":"It is sunny."}]`,
		`[{"type":"function","function":{"name":"get_weather","description":"Get the weather.","parameters":{"type":"object",` +
			`"properties":{"city":{"type":"string","description":"City name"},"days":{"type":"integer","default":1}},"required":["city"]}}}]`, false},
}

// checkTemplate renders the representative conversations.
func (c *Template) checkTemplate() error {
	for i, conv := range checkConversations {
		in := Input{Messages: json.RawMessage(conv.messages), AddGenerationPrompt: conv.addGenerationPrompt}
		if conv.tools != "" {
			in.Tools = json.RawMessage(conv.tools)
		}
		_, err := c.render(context.Background(), in, checkSteps)
		var be *jinja.BudgetError
		switch {
		case errors.As(err, &be):
			return fmt.Errorf("chat template refused: rendering %s, it exceeded its %s budget (%d)", conv.name, be.Budget, be.Limit)
		case err != nil && i == 0:
			return fmt.Errorf("chat template refused: it cannot render %s: %w", conv.name, err)
		}
	}
	return nil
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
	// template then sees tools as None, as transformers passes it.
	Tools json.RawMessage
	// AddGenerationPrompt ends the prompt with the assistant's header.
	AddGenerationPrompt bool
	// Kwargs are extra template variables (chat_template_kwargs). They
	// cannot replace messages, tools, documents, add_generation_prompt,
	// bos_token or eos_token (the server's values win), nor a template
	// builtin such as namespace or range (an error).
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
	return messagesJSON(msgs, false)
}

// HarmonyMessagesJSON is MessagesJSON for gpt-oss's template, which reads
// an assistant message's reasoning as "thinking" (as llama.cpp passes
// reasoning_content to it): both members are written.
func HarmonyMessagesJSON(msgs []openai.Message) json.RawMessage {
	return messagesJSON(msgs, true)
}

func messagesJSON(msgs []openai.Message, thinking bool) json.RawMessage {
	var b strings.Builder
	b.WriteByte('[')
	for i, m := range msgs {
		if i > 0 {
			b.WriteByte(',')
		}
		writeMessage(&b, m, thinking)
	}
	b.WriteByte(']')
	return json.RawMessage(b.String())
}

// writeMessage writes one chat message as the template sees it: role and
// content, an assistant's tool_calls with arguments as an object when they
// are the JSON text of one (as transformers' templates expect and vLLM
// passes them; other text stays a string), and a tool message's
// tool_call_id (before its content, in OpenAI's order).
func writeMessage(b *strings.Builder, m openai.Message, thinking bool) {
	role, _ := json.Marshal(m.Role)
	content, _ := json.Marshal(m.Content)
	b.WriteString(`{"role":` + string(role))
	if m.Role == "tool" {
		id, _ := json.Marshal(m.ToolCallID)
		b.WriteString(`,"tool_call_id":` + string(id))
	}
	b.WriteString(`,"content":` + string(content))
	if m.Reasoning != "" {
		r, _ := json.Marshal(m.Reasoning)
		b.WriteString(`,"reasoning_content":` + string(r))
		if thinking {
			b.WriteString(`,"thinking":` + string(r))
		}
	}
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
	out, err := c.RenderContext(context.Background(), in)
	return out.Text, err
}

// RenderContext formats in, stopping when ctx ends, and returns the text
// with the ranges that came from the client (messages, tools, kwargs).
// The template sees the variables transformers gives it: messages, tools
// (None without), documents (None), add_generation_prompt, bos_token,
// eos_token and each chat_template_kwargs key; a kwarg may not replace a
// template builtin such as namespace or range (an error), and the
// reserved names above keep the server's values.
func (c *Template) RenderContext(ctx context.Context, in Input) (jinja.Output, error) {
	return c.render(ctx, in, 0)
}

// checkSteps is the step budget of the load check: a tenth of a request's,
// thousands of times what real templates take on the representative
// conversations (at most some 3 000 steps), so that refusing a template
// that loops without end costs a fraction of a second at load.
const checkSteps = jinja.DefaultSteps / 10

// render is RenderContext with steps as the step budget (0: the
// template's limits).
func (c *Template) render(ctx context.Context, in Input, steps int64) (jinja.Output, error) {
	msgs, err := jinja.FromJSON(in.Messages, true)
	if err != nil {
		return jinja.Output{}, fmt.Errorf("messages: %w", err)
	}
	if msgs.Kind() != jinja.KindList {
		return jinja.Output{}, fmt.Errorf("messages must be an array")
	}
	if c.tmpl == nil {
		return fallbackPrompt(in.Messages, in.AddGenerationPrompt)
	}
	data := make(map[string]jinja.Value, len(in.Kwargs)+8)
	for k, raw := range in.Kwargs {
		if jinja.IsBuiltin(k) {
			return jinja.Output{}, fmt.Errorf("chat_template_kwargs.%s: %q is a function of the template and cannot be replaced", k, k)
		}
		v, err := jinja.FromJSON(raw, true)
		if err != nil {
			return jinja.Output{}, fmt.Errorf("chat_template_kwargs.%s: %w", k, err)
		}
		data[k] = v
	}
	data["messages"] = msgs
	data["add_generation_prompt"] = jinja.Bool(in.AddGenerationPrompt)
	data["bos_token"] = jinja.Str(c.bos)
	data["eos_token"] = jinja.Str(c.eos)
	data["tools"] = jinja.None()
	data["documents"] = jinja.None()
	if len(in.Tools) > 0 && strings.TrimSpace(string(in.Tools)) != "null" {
		tools, err := jinja.FromJSON(in.Tools, true)
		if err != nil {
			return jinja.Output{}, fmt.Errorf("tools: %w", err)
		}
		data["tools"] = tools
	}
	lim := c.limitsFor(in)
	if steps > 0 && lim.Steps == 0 {
		lim.Steps = steps
	}
	out, err := c.tmpl.Render(ctx, data, jinja.Options{Limits: lim, Now: c.now})
	if err != nil {
		return jinja.Output{}, fmt.Errorf("chat template: %w", err)
	}
	return out, nil
}

// A prompt is about as long as what the client sent plus the template's
// own text: the output and string budgets of a render are
// outputBytesBase + outputBytesPerInput times the request's messages,
// tools and kwargs (within jinja's defaults), so that a small request
// cannot make a template build a large prompt.
const (
	outputBytesBase     = 1 << 20
	outputBytesPerInput = 8
)

// limitsFor returns the budgets of rendering in.
func (c *Template) limitsFor(in Input) jinja.Limits {
	lim := c.limits
	if lim.OutputBytes == 0 && lim.StringBytes == 0 {
		n := int64(len(in.Messages) + len(in.Tools))
		for k, raw := range in.Kwargs {
			n += int64(len(k) + len(raw))
		}
		size := min(outputBytesBase+outputBytesPerInput*n, jinja.DefaultStringBytes)
		lim.OutputBytes, lim.StringBytes = size, size
	}
	return lim
}

// fallbackPrompt formats messages in the fallback format, each role and
// string content as the client's.
func fallbackPrompt(raw json.RawMessage, addGenerationPrompt bool) (jinja.Output, error) {
	var msgs []json.RawMessage
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return jinja.Output{}, fmt.Errorf("messages must be an array")
	}
	var b strings.Builder
	var spans []jinja.Span
	client := func(s string) {
		if s != "" {
			spans = append(spans, jinja.Span{Start: b.Len(), End: b.Len() + len(s)})
			b.WriteString(s)
		}
	}
	for _, m := range msgs {
		var msg struct {
			Role, Content any
		}
		if err := json.Unmarshal(m, &msg); err != nil {
			return jinja.Output{}, fmt.Errorf("each message must be an object")
		}
		role, _ := msg.Role.(string)
		content, _ := msg.Content.(string)
		b.WriteString(fallbackStart)
		client(role)
		b.WriteString("\n")
		client(content)
		b.WriteString(FallbackEnd + "\n")
	}
	if addGenerationPrompt {
		b.WriteString(fallbackStart + "assistant\n")
	}
	return jinja.Output{Text: b.String(), Untrusted: spans}, nil
}
