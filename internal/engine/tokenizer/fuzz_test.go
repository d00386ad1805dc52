package tokenizer

import (
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"tandem/internal/testenv"
)

// fuzzTokenizers are synthetic vocabularies (no shared data): byte-complete
// BPE vocabularies under every pre-tokenizer family, and an SPM vocabulary
// with byte fallback, and a Gemma 4 style vocabulary (gemma4_test.go).
// Each BPE and SPM one has a control and a user-defined token.
func fuzzTokenizers(t testing.TB) []*Tokenizer {
	merges := []string{"Ġ t", "h e", "i n", "Ġt he", "e r", "Ġ a", "o n", "Ġ Ġ", "ĠĠ ĠĠ", "ĠĠ Ġ", "Ċ Ċ", "' s", "1 2"}
	extra := map[string]TokenType{"<|c|>": TypeControl, "<u>": TypeUserDefined}
	var toks []*Tokenizer
	for _, pre := range []string{"gpt-2", "llama3", "qwen2", "default", "deepseek-coder", "deepseek-llm", "gpt-4o"} {
		toks = append(toks, mustNew(t, bpeVocab(pre, merges, extra)))
	}
	normal := map[string]float32{"▁": -1, "▁t": -2, "he": -3, "▁the": -2.5, "in": -4, "a": -5, "e": -5, "t": -5, "h": -5}
	toks = append(toks, mustNew(t, spmVocab(normal, map[string]TokenType{"<|c|>": TypeControl})))
	toks = append(toks, mustNew(t, gemma4SmallVocab()))
	return toks
}

// checkTokenizer runs the invariants FuzzEncode relies on for one input.
func checkTokenizer(t *testing.T, tok *Tokenizer, s string) {
	for _, flags := range [][2]bool{{false, false}, {true, true}, {true, false}} {
		ids := tok.Encode(s, flags[0], flags[1])
		for _, id := range ids {
			if id < 0 || int(id) >= tok.VocabSize() {
				t.Fatalf("pre %q: Encode(%q, %v, %v) yields invalid id %d", tok.Vocab().Pre, s, flags[0], flags[1], id)
			}
		}
		// streaming matches Decode, chunk by chunk valid UTF-8
		var sb strings.Builder
		d := tok.NewDecoder()
		for _, id := range ids {
			c := d.Add(id)
			if !utf8.ValidString(c) {
				t.Fatalf("pre %q: Decoder.Add returned invalid UTF-8 %q for input %q", tok.Vocab().Pre, c, s)
			}
			sb.WriteString(c)
		}
		sb.WriteString(d.Flush())
		if want := string(appendValidUTF8(nil, []byte(tok.Decode(ids)))); sb.String() != want {
			t.Fatalf("pre %q: streamed %q, Decode gives %q (input %q)", tok.Vocab().Pre, sb.String(), want, s)
		}
	}
	ids := tok.Encode(s, false, false)
	got := tok.Decode(ids)
	switch {
	case tok.bpe && utf8.ValidString(s) && !(tok.spmStyle && strings.Contains(s, spmSpace)):
		// (gemma4 decodes an input "▁" as a space)
		want := s
		if tok.cleanSpaces {
			want = string(cleanSpaces([]byte(s)))
		}
		if got != want {
			t.Fatalf("pre %q: Decode(Encode(%q)) = %q, want %q", tok.Vocab().Pre, s, got, want)
		}
	case !tok.bpe && utf8.ValidString(s) && !strings.Contains(s, spmSpace):
		// SPM keeps raw bytes (byte fallback). Invalid UTF-8 is excluded: a
		// lead byte swallows the next bytes into one symbol, as in
		// llama.cpp, and an escaped space among them comes back as "▁".
		if got != s {
			t.Fatalf("spm: Decode(Encode(%q)) = %q, want the input", s, got)
		}
	}
}

// FuzzEncode: arbitrary strings never panic or yield invalid ids, the
// streaming decoder agrees with Decode, and for valid UTF-8
// Decode(Encode(s)) == s on byte-complete vocabularies (BPE: after the
// clean-up that the pre-tokenizer implies; SPM: unless s contains "▁").
func FuzzEncode(f *testing.F) {
	for _, s := range []string{
		"", " ", "Hello world", " 's ?", "it 're a ' b", "\xff\xfe", "\xe2\x82", "🦙🦙 ok", "  \n\n\t ",
		"<|c|><u>x<u>", "1234567 3.14", "hello hello\n\n\n<turn|>", "été €", "нещо на Български", "我想在apple工作1314151天～", "\u00a0\u3000x", "▁a",
	} {
		f.Add(s)
	}
	if dir := testenv.SharedDir(); dir != "" {
		if b, err := os.ReadFile(dir + "/testdata/tokenizer/ggml-vocab-llama-spm.gguf.inp"); err == nil {
			for _, s := range strings.Split(string(b), "\n__ggml_vocab_test__\n") {
				f.Add(s)
			}
		}
	}
	toks := fuzzTokenizers(f)
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 1<<12 {
			return
		}
		for _, tok := range toks {
			checkTokenizer(t, tok, s)
		}
	})
}
