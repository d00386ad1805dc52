package tokenizer

import (
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// o200kOracle splits text with Go's regexp, an independent engine: the
// alternatives of reO200k before the lookahead, with \s spelled as
// Unicode White_Space (Go's \s is ASCII only), anchored at each position;
// where none matches, \s+(?!\S) and \s+ are applied by hand.
var o200kOracleRe = func() *regexp.Regexp {
	const ws = `\t\n\v\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}`
	const up, lo = `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`, `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`
	const pre = `[^\r\n\p{L}\p{N}]?`
	const con = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?`
	return regexp.MustCompile(`^(?:` + pre + up + `*` + lo + `+` + con + `|` + pre + up + `+` + lo + `*` + con +
		`|\p{N}{1,3}| ?[^` + ws + `\p{L}\p{N}]+[\r\n/]*|[` + ws + `]*[\r\n]+)`)
}()

func o200kOracle(text string) []string {
	var out []string
	for len(text) > 0 {
		if m := o200kOracleRe.FindStringIndex(text); m != nil && m[1] > 0 {
			out = append(out, text[:m[1]])
			text = text[m[1]:]
			continue
		}
		n, runes := 0, 0
		for n < len(text) {
			r, size := utf8.DecodeRuneInString(text[n:])
			if !unicode.IsSpace(r) {
				break
			}
			n += size
			runes++
		}
		switch {
		case n == 0: // cannot happen for valid UTF-8: every code point matches some alternative
			_, size := utf8.DecodeRuneInString(text)
			n = size
		case runes > 1 && n < len(text): // \s+(?!\S): leave the last space
			_, size := utf8.DecodeLastRuneInString(text[:n])
			n -= size
		}
		out = append(out, text[:n])
		text = text[n:]
	}
	return out
}

// FuzzO200kSplit: the hand-coded o200k splitter agrees with the regexp
// oracle on valid UTF-8 and covers every input.
func FuzzO200kSplit(f *testing.F) {
	for _, s := range []string{"", "Hello world", "HTTPServer I'M", "ÉCOLE École", "e\u0301\u0301", "  \n\t x  ", "12345 a//b\r\n/",
		"<|start|>assistant<|channel|>analysis<|message|>", "你好 ﬁ ǅungla Ⅻ", "'s 'S 'Ll x'", "\u00a0\u3000\u2028y"} {
		f.Add(s)
	}
	cfg := preConfigs["gpt-4o"]
	p, err := newPreTokenizer(cfg.regexes)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 1<<12 {
			return
		}
		got := p.split(s)
		if !utf8.ValidString(s) {
			return // decoded as llama.cpp does (surrogates kept): only no panic
		}
		if strings.Join(got, "") != s {
			t.Fatalf("split(%q) = %q does not cover the input", s, got)
		}
		if want := o200kOracle(s); strings.Join(got, "\x00") != strings.Join(want, "\x00") {
			t.Fatalf("split(%q) = %q, regexp oracle %q", s, got, want)
		}
	})
}

// TestHarmonySpecials: in a vocabulary with gpt-oss's (o200k_harmony's)
// tokens, as llama.cpp loads one, <|return|> and <|call|> end generation
// and <|end|> does not; the message markers and <|end|> are user-defined,
// so decoding shows them.
func TestHarmonySpecials(t *testing.T) {
	extra := map[string]TokenType{}
	for _, s := range []string{"<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>", "<|call|>", "<|endoftext|>"} {
		extra[s] = TypeControl
	}
	tok := mustNew(t, bpeVocab("gpt-4o", nil, extra))
	id := func(s string) int32 { return tok.toID[s] }
	for s, eog := range map[string]bool{"<|return|>": true, "<|call|>": true, "<|endoftext|>": true, "<|end|>": false, "<|channel|>": false} {
		if tok.IsEOG(id(s)) != eog {
			t.Errorf("IsEOG(%s) = %v, want %v", s, !eog, eog)
		}
	}
	text := "<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|channel|>final<|message|>Hi<|return|>"
	ids := tok.Encode(text, false, true)
	want := "<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|channel|>final<|message|>Hi"
	if got := tok.Decode(ids); got != want {
		t.Errorf("Decode(Encode(%q)) = %q, want %q", text, got, want)
	}
	// Without <|call|> (not a harmony vocabulary) <|end|> still ends generation.
	delete(extra, "<|call|>")
	if tok := mustNew(t, bpeVocab("gpt-4o", nil, extra)); !tok.IsEOG(tok.toID["<|end|>"]) {
		t.Error("<|end|> does not end generation in a vocabulary without <|call|>")
	}
}
