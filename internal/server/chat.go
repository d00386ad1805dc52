package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"tandem/internal/api/openai"
	"tandem/internal/engine/tokenizer"
	"tandem/internal/jinja"
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
// Templates render as transformers renders them (package jinja, Tandem's
// own renderer), within jinja's default budgets: a template that breaks
// one fails its request, never the process. Client data (messages, tools,
// chat_template_kwargs) is marked untrusted, so that the prompt's
// tokenization does not turn special-token text typed by a client into
// control tokens (chatFormat.encode).
type ChatTemplate struct {
	tmpl     *jinja.Template // nil: fallback format
	source   string
	bos, eos string
	now      func() time.Time // strftime_now's clock; nil: time.Now
	limits   jinja.Limits     // zero: jinja's defaults
}

// NewChatTemplate compiles a tokenizer.chat_template. bosToken and eosToken
// are the texts of the vocabulary's BOS and EOS tokens, handed to the
// template as bos_token and eos_token. An empty source selects the fallback
// format. A source that does not compile is an error, and so is one that
// breaks a budget, or fails, on a representative conversation (see
// checkTemplate): such a template is refused at load.
func NewChatTemplate(source, bosToken, eosToken string) (*ChatTemplate, error) {
	c := &ChatTemplate{bos: bosToken, eos: eosToken, source: source}
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
	return c, nil
}

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
func (c *ChatTemplate) checkTemplate() error {
	for i, conv := range checkConversations {
		in := ChatInput{Messages: json.RawMessage(conv.messages), AddGenerationPrompt: conv.addGenerationPrompt}
		if conv.tools != "" {
			in.Tools = json.RawMessage(conv.tools)
		}
		_, err := c.RenderContext(context.Background(), in)
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
func (c *ChatTemplate) RenderContext(ctx context.Context, in ChatInput) (jinja.Output, error) {
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
	out, err := c.tmpl.Render(ctx, data, jinja.Options{Limits: c.limits, Now: c.now})
	if err != nil {
		return jinja.Output{}, fmt.Errorf("chat template: %w", err)
	}
	return out, nil
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
		b.WriteString(fallbackEnd + "\n")
	}
	if addGenerationPrompt {
		b.WriteString(fallbackStart + "assistant\n")
	}
	return jinja.Output{Text: b.String(), Untrusted: spans}, nil
}

// chatFormat is a model's chat template with what tokenizing its output
// needs.
type chatFormat struct {
	tmpl       *ChatTemplate
	stopTokens []int32  // fallback: the <|im_end|> token
	stops      []string // fallback without that token: the stop string
	// specials are the texts that Encode turns into control tokens only
	// when it parses special tokens, longest first.
	specials []string
	contOnce sync.Once
	cont     *tokenizer.Tokenizer // see continuation
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
	f := &chatFormat{tmpl: t, specials: parsedSpecials(tok)}
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
	out, err := f.tmpl.RenderContext(context.Background(), ChatInput{Messages: messagesJSON(msgs), AddGenerationPrompt: true})
	if err != nil {
		return nil, err
	}
	return f.encode(tok, out), nil
}

// promptInput renders in and tokenizes the result (see encode); it stops
// when ctx ends.
func (f *chatFormat) promptInput(ctx context.Context, tok *tokenizer.Tokenizer, in ChatInput) ([]int32, string, error) {
	out, err := f.tmpl.RenderContext(ctx, in)
	if err != nil {
		return nil, "", err
	}
	return f.encode(tok, out), out.Text, nil
}

// encode tokenizes a rendered prompt. BOS is added (when the vocabulary
// adds one) unless the template itself starts with the BOS token's text,
// as llama.cpp does, so that a template that writes bos_token does not get
// a second one.
func (f *chatFormat) encode(tok *tokenizer.Tokenizer, out jinja.Output) []int32 {
	bos := f.tmpl.bos
	byTemplate := len(out.Untrusted) == 0 || out.Untrusted[0].Start >= len(bos)
	addSpecial := bos == "" || !strings.HasPrefix(out.Text, bos) || !byTemplate
	return f.encodeSpecial(tok, out, addSpecial)
}

// encodeSpecial tokenizes a rendered prompt, with BOS and EOS as the
// vocabulary adds them when addSpecial is set. Special tokens the template
// writes become control tokens; special-token text that overlaps client
// text (a message's content, a tool description, a kwarg) is tokenized as
// text, so that a client cannot forge a turn with "<|im_end|>". Where no
// client text holds such text the result is Encode(text, addSpecial,
// true), as Hugging Face tokenizes a chat prompt.
func (f *chatFormat) encodeSpecial(tok *tokenizer.Tokenizer, out jinja.Output, addSpecial bool) []int32 {
	plain := forgedSpecials(out, f.specials)
	if len(plain) == 0 {
		return tok.Encode(out.Text, addSpecial, true)
	}
	v := tok.Vocab()
	var ids []int32
	if addSpecial && v.AddBOS && v.BOS >= 0 {
		ids = append(ids, v.BOS)
	}
	// The text is cut around each forged special. Encode gives an SPM
	// vocabulary's first fragment a space prefix; a piece that continues
	// the text must not get one, so its head (up to the template's first
	// special) goes through a tokenizer without it.
	cont := f.continuation(tok)
	piece := func(start, end int, parseSpecial bool) {
		text := out.Text[start:end]
		if cont == tok || start == 0 || text == "" {
			ids = append(ids, tok.Encode(text, false, parseSpecial)...)
			return
		}
		head := len(text)
		if parseSpecial {
			for _, s := range f.specials {
				if i := strings.Index(text[:head], s); i >= 0 {
					head = i
				}
			}
		}
		ids = append(ids, cont.Encode(text[:head], false, parseSpecial)...)
		ids = append(ids, tok.Encode(text[head:], false, parseSpecial)...)
	}
	at := 0
	for _, sp := range plain {
		piece(at, sp.Start, true)
		piece(sp.Start, sp.End, false)
		at = sp.End
	}
	piece(at, len(out.Text), true)
	if addSpecial && v.AddEOS && v.EOS >= 0 {
		ids = append(ids, v.EOS)
	}
	return ids
}

// continuation returns the tokenizer for text that continues a prompt: tok
// itself, or for an SPM vocabulary that adds a space prefix, the same
// vocabulary without it (built once).
func (f *chatFormat) continuation(tok *tokenizer.Tokenizer) *tokenizer.Tokenizer {
	v := tok.Vocab()
	if v.Model != "llama" || !v.AddSpacePrefix {
		return tok
	}
	f.contOnce.Do(func() {
		c := *v
		c.AddSpacePrefix = false
		f.cont, _ = tokenizer.New(&c)
	})
	if f.cont == nil {
		return tok
	}
	return f.cont
}

// forgedSpecials returns the ranges of out.Text where a special token's
// text overlaps client text, merged, in order.
func forgedSpecials(out jinja.Output, specials []string) []jinja.Span {
	if len(out.Untrusted) == 0 || len(specials) == 0 {
		return nil
	}
	var first [256]bool
	longest := 0
	for _, s := range specials {
		first[s[0]] = true
		longest = max(longest, len(s))
	}
	var found []jinja.Span
	text := out.Text
	for _, u := range out.Untrusted {
		for p := max(0, u.Start-longest+1); p < u.End; p++ {
			if !first[text[p]] {
				continue
			}
			for _, s := range specials {
				if p+len(s) > u.Start && strings.HasPrefix(text[p:], s) {
					if n := len(found); n > 0 && found[n-1].End >= p {
						found[n-1].End = max(found[n-1].End, p+len(s))
					} else {
						found = append(found, jinja.Span{Start: p, End: p + len(s)})
					}
					break
				}
			}
		}
	}
	return found
}

// parsedSpecials returns the texts of the tokens that Encode splits out
// only when it parses special tokens (control and unknown tokens, and
// those the tokenizer makes control by name), longest first.
func parsedSpecials(tok *tokenizer.Tokenizer) []string {
	v := tok.Vocab()
	var out []string
	for id, text := range v.Tokens {
		typ := tokenizer.TypeNormal
		if id < len(v.Types) {
			typ = v.Types[id]
		}
		if text == "" || typ != tokenizer.TypeControl && typ != tokenizer.TypeUnknown && !tok.IsEOG(int32(id)) {
			continue
		}
		if special := tok.Encode(text, false, true); len(special) == 1 && special[0] == int32(id) &&
			!slices.Equal(tok.Encode(text, false, false), special) {
			out = append(out, text)
		}
	}
	slices.SortStableFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}
