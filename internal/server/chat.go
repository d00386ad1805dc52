package server

import (
	"fmt"
	"strings"

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
type ChatTemplate struct {
	tmpl     *jinja.Template // nil: fallback format
	bos, eos string
}

// NewChatTemplate compiles a tokenizer.chat_template. bosToken and eosToken
// are the texts of the vocabulary's BOS and EOS tokens, handed to the
// template as bos_token and eos_token. An empty source selects the fallback
// format; a source that does not compile is an error.
func NewChatTemplate(source, bosToken, eosToken string) (*ChatTemplate, error) {
	c := &ChatTemplate{bos: bosToken, eos: eosToken}
	if strings.TrimSpace(source) == "" {
		return c, nil
	}
	t, err := compileTemplate(source)
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

// Render formats msgs, ending with the assistant's generation prompt when
// addGenerationPrompt is set. Errors come from the template (for example
// raise_exception on roles that do not alternate) and concern the messages.
func (c *ChatTemplate) Render(msgs []openai.Message, addGenerationPrompt bool) (string, error) {
	if c.tmpl == nil {
		var b strings.Builder
		for _, m := range msgs {
			b.WriteString(fallbackStart + m.Role + "\n" + m.Content + fallbackEnd + "\n")
		}
		if addGenerationPrompt {
			b.WriteString(fallbackStart + "assistant\n")
		}
		return b.String(), nil
	}
	list := make([]any, len(msgs))
	for i, m := range msgs {
		list[i] = map[string]any{"role": m.Role, "content": m.Content}
	}
	return c.render(map[string]any{
		"messages":              list,
		"add_generation_prompt": addGenerationPrompt,
		"bos_token":             c.bos,
		"eos_token":             c.eos,
	})
}

func (c *ChatTemplate) render(data map[string]any) (out string, err error) {
	defer func() {
		if v := recover(); v != nil {
			out, err = "", fmt.Errorf("chat template failed: %v", v)
		}
	}()
	out, err = c.tmpl.Render(data)
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

// newChatFormat builds the format for tok's vocabulary. It returns the
// fallback together with the compile error when the model's template does
// not compile.
func newChatFormat(tok *tokenizer.Tokenizer) (*chatFormat, error) {
	v := tok.Vocab()
	text := func(id int32) string {
		if id >= 0 && int(id) < len(v.Tokens) {
			return v.Tokens[id]
		}
		return ""
	}
	bos, eos := text(tok.BOS()), text(tok.EOS())
	t, err := NewChatTemplate(v.ChatTemplate, bos, eos)
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
// BOS is added (when the vocabulary adds one) unless the rendered text
// already starts with the BOS token's text, as llama.cpp does, so that a
// template that writes bos_token does not get a second one.
func (f *chatFormat) prompt(tok *tokenizer.Tokenizer, msgs []openai.Message) ([]int32, error) {
	text, err := f.tmpl.Render(msgs, true)
	if err != nil {
		return nil, err
	}
	addSpecial := f.tmpl.bos == "" || !strings.HasPrefix(text, f.tmpl.bos)
	return tok.Encode(text, addSpecial, true), nil
}
