package server

import (
	"context"
	"slices"
	"strings"
	"sync"

	"tandem/internal/api/openai"
	"tandem/internal/engine/tokenizer"
	"tandem/internal/jinja"
	"tandem/internal/server/chat"
)

// chatFormat is a model's chat template with what tokenizing its output
// needs.
type chatFormat struct {
	tmpl       *chat.Template
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
	t, err := chat.NewTemplate(src, bos, eos)
	if err != nil {
		t, _ = chat.NewTemplate("", bos, eos)
	}
	f := &chatFormat{tmpl: t, specials: parsedSpecials(tok)}
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
	out, err := f.tmpl.RenderContext(context.Background(), chat.Input{Messages: chat.MessagesJSON(msgs), AddGenerationPrompt: true})
	if err != nil {
		return nil, err
	}
	return f.encode(tok, out), nil
}

// promptInput renders in and tokenizes the result (see encode); it stops
// when ctx ends.
func (f *chatFormat) promptInput(ctx context.Context, tok *tokenizer.Tokenizer, in chat.Input) ([]int32, string, error) {
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
	bos := f.tmpl.BOS()
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
