package server

import (
	"strings"

	"tandem/internal/api/openai"
	"tandem/internal/engine/tokenizer"
	"tandem/internal/server/chat"
)

// chatFormat is a model's chat template with what tokenizing its output
// needs.
type chatFormat struct {
	tmpl       *chat.Template
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
	t, err := chat.NewTemplate(src, bos, eos)
	if err != nil {
		t, _ = chat.NewTemplate("", bos, eos)
	}
	f := &chatFormat{tmpl: t}
	if t.Fallback() {
		f.stops = []string{chat.FallbackEnd}
		for id, s := range v.Tokens {
			if s == chat.FallbackEnd {
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
func (f *chatFormat) promptInput(tok *tokenizer.Tokenizer, in chat.Input) ([]int32, string, error) {
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
	bos := f.tmpl.BOS()
	addSpecial := bos == "" || !strings.HasPrefix(text, bos)
	return tok.Encode(text, addSpecial, true)
}
