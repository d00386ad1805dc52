package tokenizer

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// spmVocab builds a small SPM vocabulary: <unk>, <s>, </s>, the 256 byte
// tokens, then the given normal tokens with their scores, then extra tokens
// of other types.
func spmVocab(normal map[string]float32, extra map[string]TokenType) *Vocab {
	v := &Vocab{
		Model: "llama", BOS: 1, EOS: 2, UNK: 0, EOT: -1, EOM: -1, PAD: -1, SEP: -1,
		FIMPre: -1, FIMSuf: -1, FIMMid: -1, FIMPad: -1, FIMRep: -1, FIMSep: -1,
		AddBOS: true, AddSpacePrefix: true,
	}
	add := func(s string, score float32, tt TokenType) {
		v.Tokens = append(v.Tokens, s)
		v.Scores = append(v.Scores, score)
		v.Types = append(v.Types, tt)
	}
	add("<unk>", 0, TypeUnknown)
	add("<s>", 0, TypeControl)
	add("</s>", 0, TypeControl)
	for b := 0; b < 256; b++ {
		add(fmt.Sprintf("<0x%02X>", b), 0, TypeByte)
	}
	for _, s := range sortedKeys(normal) {
		add(s, normal[s], TypeNormal)
	}
	for _, s := range sortedKeys(extra) {
		add(s, 0, extra[s])
	}
	return v
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	// insertion sort keeps this dependency-free and deterministic
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

// bpeVocab builds a byte-complete BPE vocabulary: the 256 mapped bytes,
// then one token per merge result, then extra tokens.
func bpeVocab(pre string, merges []string, extra map[string]TokenType) *Vocab {
	v := &Vocab{
		Model: "gpt2", Pre: pre, BOS: -1, EOS: -1, UNK: -1, EOT: -1, EOM: -1, PAD: -1, SEP: -1,
		FIMPre: -1, FIMSuf: -1, FIMMid: -1, FIMPad: -1, FIMRep: -1, FIMSep: -1,
		Merges: merges,
	}
	seen := map[string]bool{}
	add := func(s string, tt TokenType) {
		if seen[s] {
			return
		}
		seen[s] = true
		v.Tokens = append(v.Tokens, s)
		v.Types = append(v.Types, tt)
	}
	for b := 0; b < 256; b++ {
		add(byteToUnicode[b], TypeNormal)
	}
	for _, m := range merges {
		add(strings.Replace(m, " ", "", 1), TypeNormal)
	}
	for _, s := range sortedKeys(extra) {
		add(s, extra[s])
	}
	return v
}

func mustNew(t testing.TB, v *Vocab) *Tokenizer {
	t.Helper()
	tok, err := New(v)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return tok
}

// texts maps ids back to token texts for readable failures.
func texts(tok *Tokenizer, ids []int32) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		if id >= 0 && int(id) < tok.VocabSize() {
			out[i] = tok.Vocab().Tokens[id]
		} else {
			out[i] = fmt.Sprintf("#%d", id)
		}
	}
	return out
}

func TestSPMMerges(t *testing.T) {
	cases := []struct {
		name   string
		normal map[string]float32
		in     string
		want   []string
	}{
		{"higher score first", map[string]float32{"▁": -5, "a": -5, "b": -5, "c": -5, "ab": -2, "bc": -1}, "abc", []string{"▁", "a", "bc"}},
		{"higher score first, other way", map[string]float32{"▁": -5, "a": -5, "b": -5, "c": -5, "ab": -1, "bc": -2}, "abc", []string{"▁", "ab", "c"}},
		{"leftmost on ties", map[string]float32{"▁": -5, "a": -5, "b": -5, "c": -5, "ab": -1, "bc": -1}, "abc", []string{"▁", "ab", "c"}},
		{"merge of merges", map[string]float32{"▁": -5, "a": -5, "b": -5, "c": -5, "ab": -1, "bc": -2, "abc": -3, "▁abc": -4}, "abc", []string{"▁abc"}},
		{"pair must be a token", map[string]float32{"▁": -5, "a": -5, "b": -5, "c": -5, "ac": -1}, "abc", []string{"▁", "a", "b", "c"}},
		{"spaces become ▁", map[string]float32{"▁": -5, "a": -5, "▁a": -1, "▁▁": -2}, "a  a", []string{"▁a", "▁", "▁a"}},
		{"stale pairs skipped", map[string]float32{"▁": -5, "a": -5, "▁a": -1, "▁▁": -0.5}, "a  a", []string{"▁a", "▁▁", "a"}},
		{"byte fallback", map[string]float32{"▁": -5, "a": -5}, "aé", []string{"▁", "a", "<0xC3>", "<0xA9>"}},
		{"invalid UTF-8 as bytes", map[string]float32{"▁": -5, "a": -5}, "a\xff", []string{"▁", "a", "<0xFF>"}},
		{"empty", map[string]float32{"▁": -5}, "", []string{}},
	}
	for _, c := range cases {
		tok := mustNew(t, spmVocab(c.normal, nil))
		got := texts(tok, tok.Encode(c.in, false, false))
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%s: Encode(%q) = %q, want %q", c.name, c.in, got, c.want)
		}
	}
}

func TestSPMSpecialTokens(t *testing.T) {
	normal := map[string]float32{"▁": -5, "a": -5, "b": -5, "▁a": -1, "▁b": -1}
	extra := map[string]TokenType{"<|u|>": TypeUserDefined, "<|c|>": TypeControl}
	tok := mustNew(t, spmVocab(normal, extra))
	cases := []struct {
		in                       string
		addSpecial, parseSpecial bool
		want                     []string
	}{
		{"a", true, false, []string{"<s>", "▁a"}},
		{"", true, false, []string{"<s>"}},
		{"", false, false, []string{}},
		// user-defined tokens are split out even without parseSpecial, and
		// the text after them gets the space prefix again
		{"a<|u|>b", false, false, []string{"▁a", "<|u|>", "▁b"}},
		// control tokens only with parseSpecial
		{"a<|c|>b", false, true, []string{"▁a", "<|c|>", "▁b"}},
		{"<|c|>", false, false, []string{"▁", "<0x3C>", "<0x7C>", "<0x63>", "<0x7C>", "<0x3E>"}},
		{"<s>a", false, true, []string{"<s>", "▁a"}},
		{"<|u|><|u|>", false, false, []string{"<|u|>", "<|u|>"}},
	}
	for _, c := range cases {
		got := texts(tok, tok.Encode(c.in, c.addSpecial, c.parseSpecial))
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("Encode(%q, %v, %v) = %q, want %q", c.in, c.addSpecial, c.parseSpecial, got, c.want)
		}
	}

	v := spmVocab(normal, extra)
	v.AddEOS = true
	tok = mustNew(t, v)
	if got, want := strings.Join(texts(tok, tok.Encode("a", true, false)), "|"), "<s>|▁a|</s>"; got != want {
		t.Errorf("with AddEOS: Encode(%q, true, false) = %s, want %s", "a", got, want)
	}
	v = spmVocab(normal, extra)
	v.AddSpacePrefix = false
	tok = mustNew(t, v)
	if got, want := strings.Join(texts(tok, tok.Encode("a b", false, false)), "|"), "a|▁b"; got != want {
		t.Errorf("without AddSpacePrefix: Encode(%q) = %s, want %s", "a b", got, want)
	}
	if got, want := tok.Decode(tok.Encode(" a", false, false)), " a"; got != want {
		t.Errorf("without AddSpacePrefix: Decode(Encode(%q)) = %q, want %q", " a", got, want)
	}
}

func TestLongestSpecialFirst(t *testing.T) {
	extra := map[string]TokenType{"<a>": TypeUserDefined, "<a><b>": TypeUserDefined, "<b>": TypeUserDefined}
	tok := mustNew(t, bpeVocab("qwen2", nil, extra))
	got := texts(tok, tok.Encode("<a><b><b>", false, false))
	if want := []string{"<a><b>", "<b>"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("Encode(%q) = %q, want %q", "<a><b><b>", got, want)
	}
}

func TestSPMDecode(t *testing.T) {
	normal := map[string]float32{"▁": -5, "a": -5, "b": -5, "▁a": -1, "▁b": -1}
	tok := mustNew(t, spmVocab(normal, map[string]TokenType{"<|u|>": TypeUserDefined}))
	id := func(s string) int32 { return tok.toID[s] }
	cases := []struct {
		ids  []int32
		want string
	}{
		{[]int32{id("▁a"), id("▁b")}, "a b"},
		{[]int32{1, id("▁a"), id("▁b"), 2}, "a b"}, // BOS/EOS dropped, space after BOS stripped
		{[]int32{id("▁a"), 1, id("▁b")}, "a b"},
		{[]int32{id("▁"), id("▁a")}, " a"},
		{[]int32{id("<|u|>"), id("▁a")}, "<|u|> a"},
		{[]int32{id("<0xC3>"), id("<0xA9>")}, "é"},
		{[]int32{id("▁a"), -1, 99999}, "a"}, // invalid ids contribute nothing
		{nil, ""},
	}
	for _, c := range cases {
		if got := tok.Decode(c.ids); got != c.want {
			t.Errorf("Decode(%q) = %q, want %q", texts(tok, c.ids), got, c.want)
		}
	}
	if got := tok.TokenPiece(id("▁a")); string(got) != " a" {
		t.Errorf("TokenPiece(▁a) = %q, want %q", got, " a")
	}
	if got := tok.TokenPiece(1); len(got) != 0 {
		t.Errorf("TokenPiece(<s>) = %q, want empty", got)
	}
	if got := tok.TokenPiece(id("<0x0A>")); string(got) != "\n" {
		t.Errorf("TokenPiece(<0x0A>) = %q, want %q", got, "\n")
	}
}

func TestBPEMerges(t *testing.T) {
	merges := []string{"l l", "h e", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld"}
	cases := []struct {
		pre, in string
		want    []string
	}{
		{"gpt-2", "hello world", []string{"hello", "Ġworld"}},
		{"gpt-2", "hellllo", []string{"hell", "ll", "o"}},
		{"gpt-2", "héllo", []string{"h", "Ã", "©", "ll", "o"}}, // é is two mapped bytes
		{"gpt-2", "", []string{}},
		{"gpt-2", "\x00", []string{"Ā"}},
	}
	for _, c := range cases {
		tok := mustNew(t, bpeVocab(c.pre, merges, nil))
		got := texts(tok, tok.Encode(c.in, false, false))
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("pre %s: Encode(%q) = %q, want %q", c.pre, c.in, got, c.want)
		}
	}

	// Rank decides, not position: "b c" (rank 0) beats "a b" (rank 1).
	tok := mustNew(t, bpeVocab("gpt-2", []string{"b c", "a b", "a bc"}, nil))
	if got, want := strings.Join(texts(tok, tok.Encode("abc", false, false)), "|"), "abc"; got != want {
		t.Errorf("Encode(abc) with ranks [b c, a b, a bc] = %s, want %s", got, want)
	}
	tok = mustNew(t, bpeVocab("gpt-2", []string{"a b", "b c", "ab c"}, nil))
	if got, want := strings.Join(texts(tok, tok.Encode("abc", false, false)), "|"), "abc"; got != want {
		t.Errorf("Encode(abc) with ranks [a b, b c, ab c] = %s, want %s", got, want)
	}
	tok = mustNew(t, bpeVocab("gpt-2", []string{"a b", "b c"}, nil))
	if got, want := strings.Join(texts(tok, tok.Encode("abc", false, false)), "|"), "ab|c"; got != want {
		t.Errorf("Encode(abc) with ranks [a b, b c] = %s, want %s", got, want)
	}
	// Same rank cannot happen for different pairs, but the same pair twice
	// at one rank merges leftmost first: "aaa" -> "aa a".
	tok = mustNew(t, bpeVocab("gpt-2", []string{"a a"}, nil))
	if got, want := strings.Join(texts(tok, tok.Encode("aaa", false, false)), "|"), "aa|a"; got != want {
		t.Errorf("Encode(aaa) with merges [a a] = %s, want %s", got, want)
	}
}

// TestIgnoreMerges: llama3 takes a word that is a token as it is, even when
// the merges would not build it; other pre-tokenizers merge.
func TestIgnoreMerges(t *testing.T) {
	merges := []string{"a b", "c d"}
	extra := map[string]TokenType{"abcd": TypeNormal}
	for _, c := range []struct{ pre, want string }{
		{"llama3", "abcd"},
		{"llama-bpe", "abcd"},
		{"gpt-2", "ab|cd"},
		{"qwen2", "ab|cd"},
	} {
		tok := mustNew(t, bpeVocab(c.pre, merges, extra))
		if got := strings.Join(texts(tok, tok.Encode("abcd", false, false)), "|"); got != c.want {
			t.Errorf("pre %s: Encode(abcd) = %s, want %s", c.pre, got, c.want)
		}
	}
}

func TestBPESpecialAndDecode(t *testing.T) {
	extra := map[string]TokenType{"<|endoftext|>": TypeControl, "<tool>": TypeUserDefined, "<bos>": TypeControl}
	v := bpeVocab("qwen2", []string{"h i"}, extra)
	v.BOS = int32(len(v.Tokens) - 3) // "<bos>" sorts first among the extras
	if v.Tokens[v.BOS] != "<bos>" {
		t.Fatalf("test vocab: token %d is %q, want <bos>", v.BOS, v.Tokens[v.BOS])
	}
	v.AddBOS = true
	tok := mustNew(t, v)
	eot := tok.toID["<|endoftext|>"]
	tool := tok.toID["<tool>"]
	hi := tok.toID["hi"]

	got := tok.Encode("hi<|endoftext|><tool>", true, true)
	if want := []int32{v.BOS, hi, eot, tool}; !equalIDs(got, want) {
		t.Errorf("Encode(..., true, true) = %q, want %q", texts(tok, got), texts(tok, want))
	}
	got = tok.Encode("hi<|endoftext|>", false, false)
	if got[len(got)-1] == eot {
		t.Errorf("Encode(..., false, false) = %q: control token parsed without parseSpecial", texts(tok, got))
	}
	if d := tok.Decode([]int32{v.BOS, hi, eot, tool}); d != "hi<tool>" {
		t.Errorf("Decode = %q, want %q", d, "hi<tool>")
	}
	if !tok.IsEOG(eot) || tok.IsEOG(hi) {
		t.Errorf("IsEOG(<|endoftext|>) = %v, IsEOG(hi) = %v; want true, false", tok.IsEOG(eot), tok.IsEOG(hi))
	}
	if tok.EOT() != eot {
		t.Errorf("EOT() = %d, want %d (detected by name)", tok.EOT(), eot)
	}
}

func TestCleanSpaces(t *testing.T) {
	cases := []struct{ in, want string }{
		{"Hello , world !", "Hello, world!"},
		{"a  .", "a ."},
		{"a ' b", "a'b"},
		{" ' ' ", "'' "},
		{"a ' ' b", "a'' b"},
		{"it 's he 're we 've I 'm", "it's he're we've I'm"},
		{"do n 't I 'll you 'd", "do n 't I 'll you 'd"},
		{"x 'r", "x 'r"},
		{"x 's", "x's"},
		{"  ' re", "'re"},
		{"", ""},
	}
	for _, c := range cases {
		if got := string(cleanSpaces([]byte(c.in))); got != c.want {
			t.Errorf("cleanSpaces(%q) = %q, want %q", c.in, got, c.want)
		}
		if got := string(cleanSpacesReference([]byte(c.in))); got != c.want {
			t.Errorf("cleanSpacesReference(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// cleanSpacesReference is a literal transcription of llama.cpp's three
// in-place clean-up passes, used to check the stream stages.
func cleanSpacesReference(in []byte) []byte {
	text := append([]byte(nil), in...)
	total := len(text)
	total1 := total
	total = min(total, 1)
	for i := 1; i < total1; i++ {
		x := text[i]
		if text[i-1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',') {
			total--
		}
		text[total] = x
		total++
	}
	total2 := total
	total = min(total, 1)
	for i := 1; i < total2; i++ {
		x := text[i]
		if x == '\'' && i+1 < total2 && text[i-1] == ' ' && text[i+1] == ' ' {
			total--
			i++
			text[i] = 0
		}
		text[total] = x
		total++
	}
	total3 := total
	total = min(total, 1)
	for i := 1; i < total3; i++ {
		x := text[i]
		if text[i-1] == ' ' && x == '\'' && i+1 < total3 {
			x1 := text[i+1]
			if x1 == 's' || x1 == 'm' {
				total--
			} else if i+2 < total3 {
				x2 := text[i+2]
				if (x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e') {
					total--
				}
			}
		}
		text[total] = x
		total++
	}
	return text[:total]
}

// TestCleanSpacesExhaustive compares the stage implementation with the
// transcription on every string up to length 6 over the relevant bytes,
// whole and streamed in every split into two chunks (m and v behave like s
// and r, other bytes like e).
func TestCleanSpacesExhaustive(t *testing.T) {
	alphabet := []byte(" '?sre")
	var rec func(prefix []byte)
	fails := 0
	rec = func(s []byte) {
		if fails > 10 {
			return
		}
		want := string(cleanSpacesReference(s))
		if got := string(cleanSpaces(s)); got != want {
			t.Errorf("cleanSpaces(%q) = %q, want %q", s, got, want)
			fails++
		}
		for cut := 0; cut <= len(s); cut++ {
			stages := []cleanStage{&cleanPunct{}, &cleanQuote{}, &cleanContraction{}}
			var out []byte
			for _, part := range [][]byte{s[:cut], s[cut:], nil} {
				b := part
				for _, st := range stages {
					b = st.feed(nil, b, part == nil)
				}
				out = append(out, b...)
			}
			if string(out) != want {
				t.Errorf("streamed cleanSpaces(%q | %q) = %q, want %q", s[:cut], s[cut:], out, want)
				fails++
			}
		}
		if len(s) == 6 {
			return
		}
		for _, c := range alphabet {
			rec(append(s[:len(s):len(s)], c))
		}
	}
	rec(nil)
}

func TestDecoderCleanSpacesStream(t *testing.T) {
	tok := mustNew(t, bpeVocab("gpt-2", nil, nil)) // gpt-2 cleans spaces
	for _, s := range []string{"Hello , world !", "it 's a ' b ' c", "x 're y 'v", "é ' ?"} {
		ids := tok.Encode(s, false, false)
		got, _ := decodeStream(t, tok.NewDecoder(), tok, ids)
		if want := string(cleanSpacesReference([]byte(s))); got != want {
			t.Errorf("streamed Decode(Encode(%q)) = %q, want %q", s, got, want)
		}
		if got := tok.Decode(ids); got != string(cleanSpacesReference([]byte(s))) {
			t.Errorf("Decode(Encode(%q)) = %q, want cleaned text", s, got)
		}
		got, _ = decodeStream(t, tok.NewContinuationDecoder(), tok, ids)
		if got != s {
			t.Errorf("continuation stream of Encode(%q) = %q, want the raw text", s, got)
		}
	}
}

func TestDecoderLeadingSpace(t *testing.T) {
	normal := map[string]float32{"▁": -5, "a": -5, "b": -5, "▁a": -1, "▁b": -1}
	tok := mustNew(t, spmVocab(normal, nil))
	a, b := tok.toID["▁a"], tok.toID["▁b"]
	cases := []struct {
		ids        []int32
		fresh      string
		continuing string
	}{
		{[]int32{a, b}, "a b", " a b"},
		{[]int32{1, a, b}, "a b", " a b"},
		{[]int32{1, 1, a}, " a", " a"},
	}
	for _, c := range cases {
		got, _ := decodeStream(t, tok.NewDecoder(), tok, c.ids)
		if got != c.fresh || tok.Decode(c.ids) != c.fresh {
			t.Errorf("ids %q: NewDecoder gives %q, Decode %q, want %q", texts(tok, c.ids), got, tok.Decode(c.ids), c.fresh)
		}
		got, _ = decodeStream(t, tok.NewContinuationDecoder(), tok, c.ids)
		if got != c.continuing {
			t.Errorf("ids %q: NewContinuationDecoder gives %q, want %q", texts(tok, c.ids), got, c.continuing)
		}
	}
}

func TestDecoderInvalidBytes(t *testing.T) {
	tok := mustNew(t, spmVocab(map[string]float32{"▁": -5, "a": -5}, nil))
	id := func(s string) int32 { return tok.toID[s] }
	cases := []struct {
		ids  []int32
		want string
	}{
		{[]int32{id("<0xE2>"), id("<0x82>"), id("a")}, "\uFFFD\uFFFDa"},           // truncated € then a
		{[]int32{id("<0xFF>"), id("a")}, "\uFFFDa"},                               // never valid
		{[]int32{id("<0xE2>"), id("<0x82>"), id("<0xAC>")}, "€"},                  // joined
		{[]int32{id("<0xF0>"), id("<0x9F>"), id("<0xA6>")}, "\uFFFD\uFFFD\uFFFD"}, // cut at the end
	}
	for _, c := range cases {
		got, _ := decodeStream(t, tok.NewContinuationDecoder(), tok, c.ids)
		if got != c.want {
			t.Errorf("stream %q = %q, want %q", texts(tok, c.ids), got, c.want)
		}
	}
}

func TestNewErrors(t *testing.T) {
	good := func() *Vocab { return spmVocab(map[string]float32{"a": 0}, nil) }
	cases := []struct {
		name   string
		mutate func(v *Vocab)
		want   string
	}{
		{"unknown model", func(v *Vocab) { v.Model = "t5" }, `unsupported tokenizer model "t5"`},
		{"unknown pre", func(v *Vocab) { v.Model = "gpt2"; v.Pre = "tekken" }, `unsupported BPE pre-tokenizer "tekken"`},
		{"no tokens", func(v *Vocab) { v.Tokens, v.Scores, v.Types = nil, nil, nil }, "no tokens"},
		{"short scores", func(v *Vocab) { v.Scores = v.Scores[:3] }, "3 scores"},
		{"short types", func(v *Vocab) { v.Types = v.Types[:3] }, "3 token types"},
		{"bos out of range", func(v *Vocab) { v.BOS = 100000 }, "bos token id 100000 out of range"},
		{"duplicate", func(v *Vocab) { v.Tokens[5] = v.Tokens[4] }, "appears at ids 4 and 5"},
	}
	for _, c := range cases {
		v := good()
		c.mutate(v)
		_, err := New(v)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New error = %v, want one containing %q", c.name, err, c.want)
		}
	}
	if _, err := New(nil); err == nil {
		t.Errorf("New(nil) error = nil, want an error")
	}
	if _, err := New(good()); err != nil {
		t.Errorf("New(valid vocab) error = %v", err)
	}
	// SPM ignores the pre-tokenizer name, as llama.cpp does.
	v := good()
	v.Pre = "anything"
	if _, err := New(v); err != nil {
		t.Errorf("New(SPM vocab with pre %q) error = %v, want nil", v.Pre, err)
	}
}

// mapMetadata is a Metadata backed by a map, for VocabFromMetadata tests.
type mapMetadata map[string]any

func (m mapMetadata) String(k string) (string, bool)      { v, ok := m[k].(string); return v, ok }
func (m mapMetadata) Strings(k string) ([]string, bool)   { v, ok := m[k].([]string); return v, ok }
func (m mapMetadata) Float32s(k string) ([]float32, bool) { v, ok := m[k].([]float32); return v, ok }
func (m mapMetadata) Int32s(k string) ([]int32, bool)     { v, ok := m[k].([]int32); return v, ok }
func (m mapMetadata) Uint32(k string) (uint32, bool)      { v, ok := m[k].(uint32); return v, ok }
func (m mapMetadata) Bool(k string) (bool, bool)          { v, ok := m[k].(bool); return v, ok }

func TestVocabFromMetadata(t *testing.T) {
	base := func() mapMetadata {
		return mapMetadata{
			"tokenizer.ggml.model":      "gpt2",
			"tokenizer.ggml.pre":        "llama-bpe",
			"tokenizer.ggml.tokens":     []string{"a", "b", "ab", "<|eot_id|>"},
			"tokenizer.ggml.token_type": []int32{1, 1, 1, 3},
			"tokenizer.ggml.merges":     []string{"a b"},
			"tokenizer.chat_template":   "{{x}}",
		}
	}
	v, err := VocabFromMetadata(base())
	if err != nil {
		t.Fatalf("VocabFromMetadata: %v", err)
	}
	got := fmt.Sprintf("bos=%d eos=%d eot=%d unk=%d addBOS=%v addSpace=%v tmpl=%q", v.BOS, v.EOS, v.EOT, v.UNK, v.AddBOS, v.AddSpacePrefix, v.ChatTemplate)
	if want := `bos=-1 eos=-1 eot=-1 unk=-1 addBOS=true addSpace=false tmpl="{{x}}"`; got != want {
		t.Errorf("VocabFromMetadata(llama-bpe vocab) = %s, want %s", got, want)
	}

	md := base()
	md["tokenizer.ggml.pre"] = "gpt-2"
	md["tokenizer.ggml.bos_token_id"] = uint32(3)
	md["tokenizer.ggml.eos_token_id"] = uint32(99) // out of range: keeps default
	md["tokenizer.ggml.add_space_prefix"] = true
	v, err = VocabFromMetadata(md)
	if err != nil {
		t.Fatalf("VocabFromMetadata: %v", err)
	}
	got = fmt.Sprintf("bos=%d eos=%d addBOS=%v addSpace=%v", v.BOS, v.EOS, v.AddBOS, v.AddSpacePrefix)
	if want := "bos=3 eos=-1 addBOS=false addSpace=true"; got != want {
		t.Errorf("VocabFromMetadata(gpt-2 vocab with keys) = %s, want %s", got, want)
	}

	spm := mapMetadata{"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": []string{"<unk>", "<s>", "</s>", "a"}}
	v, err = VocabFromMetadata(spm)
	if err != nil {
		t.Fatalf("VocabFromMetadata(spm): %v", err)
	}
	got = fmt.Sprintf("bos=%d eos=%d unk=%d addBOS=%v addSpace=%v", v.BOS, v.EOS, v.UNK, v.AddBOS, v.AddSpacePrefix)
	if want := "bos=1 eos=2 unk=0 addBOS=true addSpace=true"; got != want {
		t.Errorf("VocabFromMetadata(bare SPM vocab) = %s, want llama.cpp defaults %s", got, want)
	}

	errCases := []struct {
		name   string
		mutate func(m mapMetadata)
		want   string
	}{
		{"no model", func(m mapMetadata) { delete(m, "tokenizer.ggml.model") }, "tokenizer.ggml.model missing"},
		{"no tokens", func(m mapMetadata) { delete(m, "tokenizer.ggml.tokens") }, "tokenizer.ggml.tokens missing"},
		{"empty tokens", func(m mapMetadata) { m["tokenizer.ggml.tokens"] = []string{} }, "is empty"},
		{"short types", func(m mapMetadata) { m["tokenizer.ggml.token_type"] = []int32{1} }, "token_type has 1 entries"},
		{"short scores", func(m mapMetadata) { m["tokenizer.ggml.scores"] = []float32{0, 0} }, "scores has 2 entries"},
		{"no merges", func(m mapMetadata) { delete(m, "tokenizer.ggml.merges") }, "without tokenizer.ggml.merges"},
	}
	for _, c := range errCases {
		md := base()
		c.mutate(md)
		_, err := VocabFromMetadata(md)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: VocabFromMetadata error = %v, want one containing %q", c.name, err, c.want)
		}
	}
	md = base()
	delete(md, "tokenizer.ggml.model")
	if _, err := VocabFromMetadata(md); !errors.Is(err, ErrNoVocab) {
		t.Errorf("VocabFromMetadata without model: error %v does not wrap ErrNoVocab", err)
	}
}

func TestTokenTypeString(t *testing.T) {
	for tt, want := range map[TokenType]string{
		TypeUndefined: "undefined", TypeNormal: "normal", TypeUnknown: "unknown", TypeControl: "control",
		TypeUserDefined: "user-defined", TypeUnused: "unused", TypeByte: "byte", 9: "type(9)",
	} {
		if got := tt.String(); got != want {
			t.Errorf("TokenType(%d).String() = %q, want %q", int32(tt), got, want)
		}
	}
}

// TestConcurrentUse shares one Tokenizer between goroutines (run with
// -race to check that Encode and Decode do not write shared state).
func TestConcurrentUse(t *testing.T) {
	tok := mustNew(t, bpeVocab("llama3", []string{"Ġ t", "h e", "Ġt he"}, map[string]TokenType{"<|c|>": TypeControl}))
	want := tok.Encode("the <|c|>the 123", true, true)
	errs := make(chan string, 8)
	for g := 0; g < 8; g++ {
		go func() {
			for i := 0; i < 50; i++ {
				got := tok.Encode("the <|c|>the 123", true, true)
				if !equalIDs(got, want) {
					errs <- fmt.Sprintf("concurrent Encode = %v, want %v", got, want)
					return
				}
				tok.Decode(got)
			}
			errs <- ""
		}()
	}
	for g := 0; g < 8; g++ {
		if e := <-errs; e != "" {
			t.Error(e)
		}
	}
}
