package embed

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"tandem/internal/engine/tensor"
	"tandem/internal/synth"
)

// reference is testdata/llamacpp-embeddings.json: per synthesized model,
// the file's sha256 and, per input text, llama.cpp's token ids and
// embedding (node-llama-cpp 3.21.1's embedding context, llama.cpp 80fb11a;
// recorded with scripts/embedcompare/record.mjs on the files that
// `tandem model synth` writes with the options of fixtures below).
type reference map[string]struct {
	SHA256 string
	Inputs []struct {
		Text      string
		IDs       []int32
		Embedding []float32
	}
}

// fixtures are the synthesized models of the reference, as
// `tandem model synth --preset tiny` writes them: nomic-bert F32 with RoPE
// base 1000, bert F16 with a 512-token context (mean pooling, and cls),
// and a Q8_0 qwen3 with last-token pooling (Qwen3-Embedding's kind) and
// with mean pooling.
var fixtures = []struct {
	name string
	cfg  func(c *synth.Config)
	typ  tensor.Type
	min  float64 // least cosine accepted
}{
	{"nomic-bert", func(c *synth.Config) { c.Arch, c.RopeBase = "nomic-bert", 1000 }, tensor.F32, 0.999999},
	{"bert", func(c *synth.Config) { c.Arch, c.Context = "bert", 512 }, tensor.F16, 0.999999},
	// an F16 KV cache and Q8_0 weights on both sides; seen: >= 0.99994
	{"qwen3-last", func(c *synth.Config) { c.Arch, c.Pooling = "qwen3", 3 }, tensor.Q8_0, 0.9999},
	{"bert-cls", func(c *synth.Config) { c.Arch, c.Context, c.Pooling = "bert", 512, 2 }, tensor.F16, 0.999999},
	{"qwen3-mean", func(c *synth.Config) { c.Arch, c.Pooling = "qwen3", 1 }, tensor.Q8_0, 0.9999},
}

func writeFixture(t *testing.T, i int) string {
	t.Helper()
	f := fixtures[i]
	cfg, err := synth.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	f.cfg(&cfg)
	path := filepath.Join(t.TempDir(), f.name+".gguf")
	write := synth.Write
	if slices.Contains(synth.EncoderArchs, cfg.Arch) {
		write = synth.WriteEncoder
	}
	if err := write(path, synth.Options{Config: cfg, Type: f.typ, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	return path
}

func fileSHA(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestMatchesLlamaCpp: on each synthesized model, Tandem's token ids equal
// llama.cpp's, and its embeddings of all the inputs, computed as one
// batch, have cosine >= the fixture's bound with llama.cpp's, each closer
// to its own input's reference than to any other's.
func TestMatchesLlamaCpp(t *testing.T) {
	b, err := os.ReadFile("testdata/llamacpp-embeddings.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref reference
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	for i, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			r, ok := ref[fx.name]
			if !ok {
				t.Fatalf("no reference for %s", fx.name)
			}
			path := writeFixture(t, i)
			if got := fileSHA(t, path); got != r.SHA256 {
				t.Fatalf("synthesized file has sha256 %s, the reference was recorded on %s: the synthesizer changed; record again (scripts/embedcompare/record.mjs)", got, r.SHA256)
			}
			m, err := Open(path, 1, 0, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			s := New(m.Runner, m.Info, Config{})
			defer s.Close()
			var ins [][]int32
			for _, in := range r.Inputs {
				ids := m.Tokenizer.Encode(in.Text, true, false)
				if !slices.Equal(ids, in.IDs) {
					t.Errorf("%q: ids %v, llama.cpp %v", in.Text, ids, in.IDs)
				}
				ins = append(ins, in.IDs)
			}
			vecs, err := s.Embed(context.Background(), ins)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range vecs {
				c := cosine(v, r.Inputs[k].Embedding)
				if c < fx.min {
					t.Errorf("%q: cosine %.7f with llama.cpp, want >= %v", r.Inputs[k].Text, c, fx.min)
				}
				for j := range r.Inputs {
					if j != k && cosine(v, r.Inputs[j].Embedding) >= c {
						t.Errorf("%q: as close to input %d's reference as to its own", r.Inputs[k].Text, j)
					}
				}
				t.Logf("%q: 1-cos %.2e", r.Inputs[k].Text, 1-c)
			}
		})
	}
}

// TestWordPieceMatchesLlamaCpp: the synthesized nomic-bert file's WordPiece
// vocabulary (lower-casing, so accents are stripped too) tokenizes like
// llama.cpp (node-llama-cpp 3.21.1's model.tokenize(text) and
// tokenize(text, true)): punctuation and CJK split off, white space of any
// kind, unknown pieces as [UNK], special-token text parsed only when asked.
func TestWordPieceMatchesLlamaCpp(t *testing.T) {
	m, err := Open(writeFixture(t, 0), 1, 0, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, tc := range []struct {
		text           string
		plain, special []int32
	}{
		{"Hello, World!", []int32{200, 445, 154, 141, 118, 359, 444, 142}, nil},
		{"naïve café", []int32{109, 343, 171, 151, 115, 153, 166, 151}, nil},
		{"THE Little   girl\tsaw\na dog", []int32{187, 195, 196, 224, 106, 259}, nil},
		{"xyzzy plugh the", []int32{127, 168, 176, 176, 168, 122, 161, 163, 167, 158, 187}, nil},
		{"Once upon a time...", []int32{191, 192, 106, 193, 140, 140, 140}, nil},
		{"ümlaut ÀB 12345", []int32{116, 164, 437, 163, 152, 106, 170, 131, 179, 180, 181, 182}, nil},
		{"你好 world", []int32{100, 100, 118, 359, 444}, nil},
		{"[CLS] the [SEP]", []int32{100, 115, 441, 100, 187, 100, 110, 151, 169, 100}, []int32{101, 187, 102}},
		{"a-b_c=d", []int32{106, 146, 123, 100, 115, 100, 113}, nil},
	} {
		if got := m.Tokenizer.Encode(tc.text, false, false); !slices.Equal(got, tc.plain) {
			t.Errorf("%q: %v, llama.cpp %v", tc.text, got, tc.plain)
		}
		want := tc.special
		if want == nil {
			want = tc.plain
		}
		if got := m.Tokenizer.Encode(tc.text, false, true); !slices.Equal(got, want) {
			t.Errorf("%q with special tokens: %v, llama.cpp %v", tc.text, got, want)
		}
	}
}

// TestOpenInMemory: every fixture (encoders and decoders, F32, F16 and
// Q8_0) read into memory (OpenInMemory, --mmap=false) gives the same
// embeddings, bit for bit, as the mapped file (Open).
func TestOpenInMemory(t *testing.T) {
	inputs := [][]int32{{101, 187, 102}, {101, 191, 192, 106, 193, 140, 140, 140, 102}}
	for i, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			path := writeFixture(t, i)
			var got [2][][]float32
			for k, open := range []func(string, int, int, int, []int) (*Model, error){Open, OpenInMemory} {
				m, err := open(path, 1, 0, 0, nil)
				if err != nil {
					t.Fatal(err)
				}
				s := New(m.Runner, m.Info, Config{})
				got[k], err = s.Embed(context.Background(), inputs)
				s.Close()
				m.Close()
				if err != nil {
					t.Fatal(err)
				}
			}
			for j := range inputs {
				if !slices.EqualFunc(got[0][j], got[1][j], func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
					t.Errorf("input %d: in memory %v, mapped %v", j, got[1][j][:4], got[0][j][:4])
				}
			}
		})
	}
}
