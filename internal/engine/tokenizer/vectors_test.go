package tokenizer

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"tandem/internal/testenv"
)

// vectorSets are llama.cpp's tokenizer test vectors (tests/test-tokenizer-0)
// in the shared folder: a vocab-only (or full) GGUF and the .inp/.out pair
// that llama.cpp (and, for the shipped vocabs, HF tokenizers) produce with
// add_special=false, parse_special=false.
var vectorSets = []struct {
	name, gguf, vectors string
}{
	{"llama-spm", "testdata/tokenizer/ggml-vocab-llama-spm.gguf", "testdata/tokenizer/ggml-vocab-llama-spm.gguf"},
	{"phi-3", "testdata/tokenizer/ggml-vocab-phi-3.gguf", "testdata/tokenizer/ggml-vocab-phi-3.gguf"},
	{"gpt-2", "testdata/tokenizer/ggml-vocab-gpt-2.gguf", "testdata/tokenizer/ggml-vocab-gpt-2.gguf"},
	{"deepseek-coder", "testdata/tokenizer/ggml-vocab-deepseek-coder.gguf", "testdata/tokenizer/ggml-vocab-deepseek-coder.gguf"},
	{"deepseek-llm", "testdata/tokenizer/ggml-vocab-deepseek-llm.gguf", "testdata/tokenizer/ggml-vocab-deepseek-llm.gguf"},
	{"stories260K", "models/stories260K.gguf", "testdata/tokenizer/stories260K.gguf"},
	// The random-weight model carries the real Llama 2 vocabulary, which
	// tokenizes the test strings exactly like llama-spm.
	{"llama-2-tiny-random", "models/llama-2-tiny-random.gguf", "testdata/tokenizer/ggml-vocab-llama-spm.gguf"},
}

var tokenizerCache sync.Map // shared path -> *Tokenizer

// loadTokenizer builds the tokenizer of a shared GGUF (skipping the test
// when the shared folder is missing), once per test binary.
func loadTokenizer(t testing.TB, rel string) *Tokenizer {
	t.Helper()
	path := testenv.Shared(t, rel)
	if tok, ok := tokenizerCache.Load(path); ok {
		return tok.(*Tokenizer)
	}
	md, err := readTestGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := VocabFromMetadata(md)
	if err != nil {
		t.Fatalf("VocabFromMetadata(%s): %v", rel, err)
	}
	tok, err := New(v)
	if err != nil {
		t.Fatalf("New(vocab of %s): %v", rel, err)
	}
	tokenizerCache.Store(path, tok)
	return tok
}

// loadVectors reads the .inp/.out pair at base+".inp"/".out".
func loadVectors(t testing.TB, base string) (inputs []string, want [][]int32) {
	t.Helper()
	inp, err := os.ReadFile(testenv.Shared(t, base+".inp"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(testenv.Shared(t, base+".out"))
	if err != nil {
		t.Fatal(err)
	}
	return parseVectors(t, base, inp, out)
}

// loadVectorsAbs is loadVectors for a pair outside the shared folder.
func loadVectorsAbs(t testing.TB, base string) (inputs []string, want [][]int32) {
	t.Helper()
	inp, err := os.ReadFile(base + ".inp")
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(base + ".out")
	if err != nil {
		t.Fatal(err)
	}
	return parseVectors(t, base, inp, out)
}

func parseVectors(t testing.TB, base string, inp, out []byte) (inputs []string, want [][]int32) {
	t.Helper()
	const sep = "\n__ggml_vocab_test__\n"
	inputs = strings.Split(string(inp), sep)
	// Older files end with the separator, newer ones (gemma-4) do not.
	if len(inputs) > 0 && inputs[len(inputs)-1] == "" {
		inputs = inputs[:len(inputs)-1]
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(inputs) {
		t.Fatalf("%s: %d inputs but %d output lines", base, len(inputs), len(lines))
	}
	for i, line := range lines {
		var ids []int32
		for _, f := range strings.Fields(line) {
			n, err := strconv.ParseInt(f, 10, 32)
			if err != nil {
				t.Fatalf("%s.out line %d: %v", base, i+1, err)
			}
			ids = append(ids, int32(n))
		}
		want = append(want, ids)
	}
	return inputs, want
}

// quotePrefix names a test string in failure messages.
func quotePrefix(s string) string {
	r := []rune(s)
	if len(r) > 24 {
		return strconv.Quote(string(r[:24])) + "…"
	}
	return strconv.Quote(s)
}

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestVectors(t *testing.T) {
	for _, vs := range vectorSets {
		t.Run(vs.name, func(t *testing.T) {
			tok := loadTokenizer(t, vs.gguf)
			inputs, want := loadVectors(t, vs.vectors)
			for i, in := range inputs {
				got := tok.Encode(in, false, false)
				if !equalIDs(got, want[i]) {
					t.Errorf("case %d %s: Encode = %v, want %v", i, quotePrefix(in), got, want[i])
				}
			}
		})
	}
}

// TestVectorRoundTrip checks Decode(Encode(s)) == s on the test strings.
// SPM's added leading space is removed again by Decode (also after BOS);
// BPE vocabularies with llama.cpp's clean_spaces get back the cleaned
// string.
func TestVectorRoundTrip(t *testing.T) {
	for _, vs := range vectorSets {
		t.Run(vs.name, func(t *testing.T) {
			tok := loadTokenizer(t, vs.gguf)
			inputs, _ := loadVectors(t, vs.vectors)
			for i, in := range inputs {
				want := in
				if tok.cleanSpaces {
					want = string(cleanSpaces([]byte(in)))
				}
				for _, addSpecial := range []bool{false, true} {
					ids := tok.Encode(in, addSpecial, false)
					if got := tok.Decode(ids); got != want {
						t.Errorf("case %d %s: Decode(Encode(s, %v, false)) = %q, want %q", i, quotePrefix(in), addSpecial, got, want)
					}
				}
			}
		})
	}
}

// decodeStream feeds ids one by one and checks that every chunk is valid
// UTF-8; it returns the concatenated text and the number of Add calls that
// held text back (returned "" for a token with a non-empty piece).
func decodeStream(t *testing.T, d *Decoder, tok *Tokenizer, ids []int32) (string, int) {
	t.Helper()
	var sb strings.Builder
	held := 0
	for _, id := range ids {
		s := d.Add(id)
		if !utf8.ValidString(s) {
			t.Errorf("Add(%d) = %q, not valid UTF-8", id, s)
		}
		if s == "" && tok.piece(id) != "" {
			held++
		}
		sb.WriteString(s)
	}
	s := d.Flush()
	if !utf8.ValidString(s) {
		t.Errorf("Flush() = %q, not valid UTF-8", s)
	}
	sb.WriteString(s)
	return sb.String(), held
}

func TestVectorStreaming(t *testing.T) {
	for _, vs := range vectorSets {
		t.Run(vs.name, func(t *testing.T) {
			tok := loadTokenizer(t, vs.gguf)
			inputs, _ := loadVectors(t, vs.vectors)
			for i, in := range inputs {
				for _, addSpecial := range []bool{false, true} {
					ids := tok.Encode(in, addSpecial, false)
					got, _ := decodeStream(t, tok.NewDecoder(), tok, ids)
					want := string(appendValidUTF8(nil, []byte(tok.Decode(ids))))
					if got != want {
						t.Errorf("case %d %s (addSpecial %v): streamed %q, Decode gives %q", i, quotePrefix(in), addSpecial, got, want)
					}
					var pieces []byte
					for _, id := range ids {
						pieces = append(pieces, tok.TokenPiece(id)...)
					}
					got, _ = decodeStream(t, tok.NewContinuationDecoder(), tok, ids)
					if want := string(appendValidUTF8(nil, pieces)); got != want {
						t.Errorf("case %d %s (addSpecial %v): continuation stream %q, want pieces %q", i, quotePrefix(in), addSpecial, got, want)
					}
				}
			}
		})
	}
}

// TestStoriesByteFallbackStreaming is the key streaming case: stories260K's
// 512-token vocabulary spells emoji as four byte tokens, so the decoder must
// hold the first three bytes back.
func TestStoriesByteFallbackStreaming(t *testing.T) {
	tok := loadTokenizer(t, "models/stories260K.gguf")
	for _, s := range []string{"🦙", "a 😁 b", "Führer", "我想在apple工作"} {
		ids := tok.Encode(s, true, false)
		d := tok.NewDecoder()
		got, held := decodeStream(t, d, tok, ids)
		if got != s {
			t.Errorf("streamed Encode(%q) = %q, want %q", s, got, s)
		}
		if held == 0 {
			t.Errorf("streaming %q (ids %v): no token was held back, want byte tokens joined", s, ids)
		}
	}
	// The four bytes of one emoji: nothing comes out before the last.
	ids := tok.Encode("🦙", false, false)
	var bytesOnly []int32
	for _, id := range ids {
		if tok.Vocab().Types[id] == TypeByte {
			bytesOnly = append(bytesOnly, id)
		}
	}
	if len(bytesOnly) != 4 {
		t.Fatalf("Encode(🦙) = %v, want 4 byte tokens (after the space)", ids)
	}
	d := tok.NewContinuationDecoder()
	for i, id := range bytesOnly {
		got := d.Add(id)
		want := ""
		if i == 3 {
			want = "🦙"
		}
		if got != want {
			t.Errorf("Add(byte %d of 🦙) = %q, want %q", i, got, want)
		}
	}
	// A truncated character is flushed as replacement characters.
	d = tok.NewContinuationDecoder()
	d.Add(bytesOnly[0])
	d.Add(bytesOnly[1])
	if got, want := d.Flush(), "\uFFFD\uFFFD"; got != want {
		t.Errorf("Flush after 2 of 4 bytes = %q, want %q", got, want)
	}
}

func TestVocabFromMetadataFiles(t *testing.T) {
	cases := []struct {
		gguf                     string
		model, pre               string
		n                        int
		bos, eos, unk            int32
		addBOS, addEOS, addSpace bool
		eog                      []int32
	}{
		{"testdata/tokenizer/ggml-vocab-llama-spm.gguf", "llama", "default", 32000, 1, 2, 0, true, false, true, []int32{2}},
		{"testdata/tokenizer/ggml-vocab-phi-3.gguf", "llama", "default", 32064, 1, 32000, 0, true, false, true, []int32{32000, 32007}},
		{"testdata/tokenizer/ggml-vocab-gpt-2.gguf", "gpt2", "gpt-2", 50257, 50256, 50256, -1, false, false, false, []int32{50256}},
		{"testdata/tokenizer/ggml-vocab-deepseek-coder.gguf", "gpt2", "deepseek-coder", 32256, 32013, 32014, -1, true, false, false, []int32{32014}},
		{"models/stories260K.gguf", "llama", "", 512, 1, 2, 0, true, false, true, []int32{2}},
	}
	for _, c := range cases {
		tok := loadTokenizer(t, c.gguf)
		v := tok.Vocab()
		got := fmt.Sprintf("%s %q n=%d bos=%d eos=%d unk=%d addBOS=%v addEOS=%v space=%v sep=%d",
			v.Model, v.Pre, len(v.Tokens), v.BOS, v.EOS, v.UNK, v.AddBOS, v.AddEOS, v.AddSpacePrefix, v.SEP)
		want := fmt.Sprintf("%s %q n=%d bos=%d eos=%d unk=%d addBOS=%v addEOS=%v space=%v sep=%d",
			c.model, c.pre, c.n, c.bos, c.eos, c.unk, c.addBOS, c.addEOS, c.addSpace, -1)
		if got != want {
			t.Errorf("VocabFromMetadata(%s) = %s, want %s", c.gguf, got, want)
		}
		var eog []int32
		for id := range v.Tokens {
			if tok.IsEOG(int32(id)) {
				eog = append(eog, int32(id))
			}
		}
		if !equalIDs(eog, c.eog) {
			t.Errorf("%s: EOG ids = %v, want %v", c.gguf, eog, c.eog)
		}
	}
}

// TestPhi3SpecialTokens checks llama.cpp's Phi-3 quirks: </s> is
// user-defined (split out even without parseSpecial) and special tokens
// swallow the white space after them.
func TestPhi3SpecialTokens(t *testing.T) {
	tok := loadTokenizer(t, "testdata/tokenizer/ggml-vocab-phi-3.gguf")
	hello := tok.Encode("Hello", false, false) // ▁Hello
	cases := []struct {
		in           string
		parseSpecial bool
		want         []int32
	}{
		{"Hello</s>  Hello", false, append(append(append([]int32{}, hello...), 2), hello...)},
		{"<|user|>\nHello<|end|>\n", true, append(append([]int32{32010}, hello...), 32007)},
	}
	for _, c := range cases {
		if got := tok.Encode(c.in, false, c.parseSpecial); !equalIDs(got, c.want) {
			t.Errorf("Encode(%q, false, %v) = %v, want %v", c.in, c.parseSpecial, got, c.want)
		}
	}
	if got := tok.Encode("<|user|>", false, false); equalIDs(got, []int32{32010}) {
		t.Errorf("Encode(%q, false, false) = %v: control token parsed without parseSpecial", "<|user|>", got)
	}
}
