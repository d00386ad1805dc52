package tokenizer

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"tandem/internal/testenv"
)

// gemma4VocabPath finds llama.cpp's Gemma 4 test vocabulary
// (models/ggml-vocab-gemma-4.gguf with its .inp/.out vectors): in the
// shared folder's testdata/tokenizer, else in the llama.cpp checkout named
// by TANDEM_LLAMA_SRC (its models/ folder). The test skips without it.
func gemma4VocabPath(t *testing.T) string {
	t.Helper()
	const name = "ggml-vocab-gemma-4.gguf"
	var dirs []string
	if d := os.Getenv("TANDEM_LLAMA_SRC"); d != "" {
		dirs = append(dirs, filepath.Join(d, "models"))
	}
	if d := testenv.SharedDir(); d != "" {
		dirs = append(dirs, filepath.Join(d, "testdata", "tokenizer"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if _, err := os.Stat(p + ".out"); err == nil {
			return p
		}
	}
	t.Skipf("%s not found (set TANDEM_LLAMA_SRC to a llama.cpp checkout at 80fb11a or later)", name)
	return ""
}

// TestGemma4Vectors checks the gemma4 tokenizer model (SentencePiece-style
// BPE) against llama.cpp's test vectors for the real Gemma 4 vocabulary
// (262144 tokens): add_special=false, parse_special=false.
func TestGemma4Vectors(t *testing.T) {
	p := gemma4VocabPath(t)
	md, err := readTestGGUF(p)
	if err != nil {
		t.Fatal(err)
	}
	v, err := VocabFromMetadata(md)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	inputs, want := loadVectorsAbs(t, p)
	bad := 0
	for i, in := range inputs {
		got := tok.Encode(in, false, false)
		if !equalIDs(got, want[i]) {
			bad++
			t.Errorf("Encode(%s) = %v, want %v", quotePrefix(in), got, want[i])
		}
	}
	t.Logf("%d/%d vectors equal", len(inputs)-bad, len(inputs))
}

// gemma4Specials are Gemma 4 special-token texts mixed into generated
// strings.
var gemma4Specials = []string{"<bos>", "<eos>", "<pad>", "<unk>", "<mask>", "<|turn>", "<turn|>", "<|tool_response>", "<tool_response|>", "</s>", "<|channel>", "<0x41>"}

// genGemma4Strings returns n strings of 1 to 10 random pieces: words,
// runs of spaces, newlines and tabs, digits, punctuation, accented and CJK
// letters, emoji, random code points and special-token texts.
func genGemma4Strings(r *rand.Rand, n int) []string {
	words := []string{"Hello", "world", "the", "a", "don't", "I'm", "über", "naïve", "Äpfel", "こんにちは", "世界", "привет", "مرحبا", "🦙", "👍🏽", "🚀", "ied", "½", "3333", "1.5", "$x", "//", "```", "func main() {", "	", "(", ")", "\u00a0", "\u200b", "ℕ"}
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		for k := 1 + r.IntN(10); k > 0; k-- {
			switch r.IntN(8) {
			case 0, 1, 2:
				b.WriteString(words[r.IntN(len(words))])
			case 3:
				b.WriteString(strings.Repeat(" ", 1+r.IntN(4)))
			case 4:
				b.WriteString(strings.Repeat("\n", 1+r.IntN(4)))
			case 5:
				b.WriteString(gemma4Specials[r.IntN(len(gemma4Specials))])
			case 6:
				b.WriteString(strconv.Itoa(r.IntN(100000)))
			default:
				c := rune(0x20 + r.IntN(0x3000))
				if r.IntN(4) == 0 {
					c = rune(0x10000 + r.IntN(0x10000))
				}
				if utf8.ValidRune(c) {
					b.WriteRune(c)
				}
			}
			if r.IntN(2) == 0 {
				b.WriteByte(' ')
			}
		}
		out[i] = b.String()
	}
	return out
}

// TestGemma4MatchesLlamaCpp tokenizes 1500 generated strings and 120 with newline runs with Tandem
// and with llama.cpp (node-llama-cpp 3.21.1, testdata/llamacpp-tokenize.mjs,
// vocabulary only) on the real Gemma 4 vocabulary, with and without special
// tokens parsed, and decodes the plain ids: all must be equal. It runs only
// when TANDEM_NPM_DIR holds node-llama-cpp (and the vocabulary is found as
// for TestGemma4Vectors); it takes about half a minute.
func TestGemma4MatchesLlamaCpp(t *testing.T) {
	npm := os.Getenv("TANDEM_NPM_DIR")
	if npm == "" {
		t.Skip("TANDEM_NPM_DIR not set: the live llama.cpp comparison needs node-llama-cpp")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not found")
	}
	p := gemma4VocabPath(t)
	md, err := readTestGGUF(p)
	if err != nil {
		t.Fatal(err)
	}
	v, err := VocabFromMetadata(md)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	strs := genGemma4Strings(rand.New(rand.NewPCG(4, 4)), 1500)
	for k := 1; k <= 40; k++ { // newline runs: llama.cpp keeps a run that is a token whole
		strs = append(strs, strings.Repeat("\n", k), "a"+strings.Repeat("\n", k)+"b", strings.Repeat("\n ", k))
	}
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.json"), filepath.Join(dir, "out.json")
	data, err := json.Marshal(strs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "testdata/llamacpp-tokenize.mjs", p, in, out)
	cmd.Env = append(os.Environ(), "TANDEM_NPM_DIR="+npm)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("node llamacpp-tokenize.mjs: %v\n%s", err, msg)
	}
	data, err = os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var ref []struct {
		Plain, Special []int32
		Text           string
	}
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref) != len(strs) {
		t.Fatalf("llama.cpp answered %d strings, want %d", len(ref), len(strs))
	}
	bad := 0
	for i, s := range strs {
		plain, special := tok.Encode(s, false, false), tok.Encode(s, false, true)
		text := tok.Decode(ref[i].Plain)
		if !equalIDs(plain, ref[i].Plain) || !equalIDs(special, ref[i].Special) || text != ref[i].Text {
			if bad++; bad <= 10 {
				t.Errorf("%q:\n plain   %v\n llama   %v\n special %v\n llama   %v\n decode  %q\n llama   %q",
					s, plain, ref[i].Plain, special, ref[i].Special, text, ref[i].Text)
			}
		}
	}
	t.Logf("%d/%d strings equal (plain ids, special ids, decoded text)", len(strs)-bad, len(strs))
}

// gemma4SmallVocab is a tiny Gemma 4 style vocabulary: <pad>, <eos>,
// <bos>, <unk>, the 256 byte tokens, a few merged words and the turn and
// tool-response markers (which end generation, so "</s>" does not).
func gemma4SmallVocab() *Vocab {
	v := &Vocab{
		Model: modelGemma4, Pre: "llama-bpe", BOS: 2, EOS: 1, UNK: 3, EOT: -1, EOM: -1, PAD: 0, SEP: -1,
		FIMPre: -1, FIMSuf: -1, FIMMid: -1, FIMPad: -1, FIMRep: -1, FIMSep: -1, AddBOS: true,
		Merges: []string{"h e", "l l", "he ll", "hell o", "▁ hello", "\n \n", "é t", "ét é"},
	}
	add := func(s string, tt TokenType) {
		v.Tokens = append(v.Tokens, s)
		v.Types = append(v.Types, tt)
	}
	add("<pad>", TypeControl)
	add("<eos>", TypeControl)
	add("<bos>", TypeControl)
	add("<unk>", TypeUnknown)
	for b := 0; b < 256; b++ {
		add(fmt.Sprintf("<0x%02X>", b), TypeByte)
	}
	for _, s := range []string{"▁", "h", "e", "l", "o", "he", "ll", "hell", "hello", "▁hello", "\n", "\n\n", "é", "t", "ét", "été"} {
		add(s, TypeNormal)
	}
	add("<|turn>", TypeControl)
	add("<turn|>", TypeControl)
	add("<|tool_response>", TypeControl)
	add("</s>", TypeControl)
	v.EOT = int32(len(v.Tokens) - 1) // "</s>" as the file's EOT: llama.cpp drops it from EOG
	return v
}

func TestGemma4Small(t *testing.T) {
	v := gemma4SmallVocab()
	tok, err := New(v)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	id := func(s string) int32 { return tok.toID[s] }
	bt := func(b byte) int32 { return id(fmt.Sprintf("<0x%02X>", b)) }
	cases := []struct {
		in      string
		special bool
		want    []int32
	}{
		// spaces become "▁" and merge with the word; no space prefix
		{"hello hello", false, []int32{id("hello"), id("▁hello")}},
		// a character outside the vocabulary falls back to its UTF-8 bytes
		{"h€", false, []int32{id("h"), bt(0xE2), bt(0x82), bt(0xAC)}},
		// merges run over raw UTF-8 (no GPT-2 byte mapping)
		{"été", false, []int32{id("été")}},
		// newline runs are words of their own
		{"he\n\n\nhe", false, []int32{id("he"), id("\n\n"), id("\n"), id("he")}},
		{"<turn|>hello", true, []int32{id("<turn|>"), id("hello")}},
		{"<turn|>", false, []int32{bt('<'), id("t"), bt('u'), bt('r'), bt('n'), bt('|'), bt('>')}},
	}
	for _, c := range cases {
		if got := tok.Encode(c.in, false, c.special); !equalIDs(got, c.want) {
			t.Errorf("Encode(%q, special=%v) = %v, want %v", c.in, c.special, got, c.want)
		}
	}
	if got := tok.Encode("hello", true, false); !equalIDs(got, []int32{2, id("hello")}) {
		t.Errorf("Encode with BOS = %v", got)
	}
	// Decoding: "▁" is a space, byte tokens are their byte, controls vanish.
	ids := []int32{2, id("hello"), id("▁hello"), bt(0xE2), bt(0x82), bt(0xAC), id("<turn|>"), id("\n")}
	if got, want := tok.Decode(ids), "hello hello€\n"; got != want {
		t.Errorf("Decode = %q, want %q", got, want)
	}
	for _, s := range []string{"<eos>", "<turn|>", "<|tool_response>"} {
		if !tok.IsEOG(id(s)) {
			t.Errorf("IsEOG(%s) = false", s)
		}
	}
	if tok.IsEOG(id("</s>")) || tok.IsEOG(id("<|turn>")) {
		t.Errorf("</s> or <|turn> ends generation")
	}
	if got := tok.Decode([]int32{id("</s>")}); got != "</s>" {
		t.Errorf("Decode(</s>) = %q, want it shown as a normal token", got)
	}
}

func TestGemma4VocabFromMetadata(t *testing.T) {
	v := gemma4SmallVocab()
	md := mapMetadata{
		keyModel: modelGemma4, keyTokens: v.Tokens, keyMerges: v.Merges,
		keyAddBOS: false, "tokenizer.ggml.bos_token_id": uint32(2),
	}
	got, err := VocabFromMetadata(md)
	if err != nil {
		t.Fatal(err)
	}
	if !got.AddBOS || got.BOS != 2 || got.EOS != -1 || got.UNK != -1 || got.AddSpacePrefix {
		t.Errorf("AddBOS %v BOS %d EOS %d UNK %d AddSpacePrefix %v; want true 2 -1 -1 false (llama.cpp forces BOS on)",
			got.AddBOS, got.BOS, got.EOS, got.UNK, got.AddSpacePrefix)
	}
	delete(md, keyMerges)
	if _, err := VocabFromMetadata(md); err == nil {
		t.Error("gemma4 vocabulary without merges accepted")
	}
}
