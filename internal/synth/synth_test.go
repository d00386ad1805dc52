package synth

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tandem/internal/engine/gguf"
	"tandem/internal/engine/tensor"
	"tandem/internal/testenv"
)

func tinyOptions(t *testing.T, typ tensor.Type, seed uint64) Options {
	t.Helper()
	c, err := Preset("tiny")
	if err != nil {
		t.Fatalf("Preset(tiny) error: %v", err)
	}
	return Options{Config: c, Type: typ, Seed: seed}
}

// render builds the file in memory with the given number of workers.
func render(t *testing.T, o Options, workers int) []byte {
	t.Helper()
	w, err := build(o, workers)
	if err != nil {
		t.Fatalf("build(%+v) error: %v", o, err)
	}
	var b bytes.Buffer
	if _, err := w.WriteTo(&b); err != nil {
		t.Fatalf("WriteTo error: %v", err)
	}
	return b.Bytes()
}

func TestPresets(t *testing.T) {
	cases := []struct {
		name                                                 string
		dim, layers, heads, kvHeads, ff, vocab, ctx, headDim int
	}{
		{"tiny", 256, 2, 4, 2, 512, 512, 2048, 64},
		{"110m", 768, 12, 12, 12, 2048, 32000, 2048, 64},
		{"1b", 2048, 22, 32, 4, 5632, 32000, 2048, 64},
	}
	for _, c := range cases {
		p, err := Preset(c.name)
		if err != nil {
			t.Fatalf("Preset(%q) error: %v", c.name, err)
		}
		got := []int{p.Dim, p.Layers, p.Heads, p.KVHeads, p.FF, p.Vocab, p.Context, p.HeadDim()}
		want := []int{c.dim, c.layers, c.heads, c.kvHeads, c.ff, c.vocab, c.ctx, c.headDim}
		if !slices.Equal(got, want) || p.RopeBase != 10000 || p.NormEps != 1e-5 {
			t.Errorf("Preset(%q) = %+v, want dims %v, rope base 10000, eps 1e-5", c.name, p, want)
		}
		for _, typ := range []tensor.Type{tensor.F16, tensor.Q8_0, tensor.Q4_K} {
			if err := p.check(weightTypes(typ, false), p.Vocab, true); err != nil {
				t.Errorf("Preset(%q) is not valid for %s: %v", c.name, typ, err)
			}
		}
	}
	if _, err := Preset("7b"); err == nil || !strings.Contains(err.Error(), "7b") {
		t.Errorf("Preset(7b) error = %v, want one naming the preset", err)
	}
}

// wantType returns the type tensor name should have in a file of type typ
// with the given number of layers.
func wantType(name string, typ tensor.Type, layers int) tensor.Type {
	if strings.HasSuffix(name, "norm.weight") {
		return tensor.F32
	}
	if typ != tensor.Q4_K {
		return typ
	}
	if name == "output.weight" {
		return tensor.Q6_K
	}
	var l int
	var kind string
	if _, err := fmt.Sscanf(name, "blk.%d.%s", &l, &kind); err == nil &&
		(kind == "attn_v.weight" || kind == "ffn_down.weight") && useMoreBits(l, layers) {
		return tensor.Q6_K
	}
	return tensor.Q4_K
}

func TestRoundTrip(t *testing.T) {
	for _, typ := range []tensor.Type{tensor.F16, tensor.Q8_0, tensor.Q4_K, tensor.F32} {
		t.Run(typ.String(), func(t *testing.T) {
			o := tinyOptions(t, typ, 7)
			path := filepath.Join(t.TempDir(), "tiny.gguf")
			if err := Write(path, o); err != nil {
				t.Fatalf("Write(%s) error: %v", typ, err)
			}
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatalf("gguf.Open of the written file: %v", err)
			}
			defer f.Close()
			checkKeys(t, f, typ)
			checkTensors(t, f, o.Config, typ)
		})
	}
}

func checkKeys(t *testing.T, f *gguf.File, typ tensor.Type) {
	t.Helper()
	if f.Version != 3 {
		t.Errorf("version = %d, want 3", f.Version)
	}
	strs := map[string]string{
		"general.architecture": "llama",
		"general.name":         "tandem-synth-tiny",
		"tokenizer.ggml.model": "llama",
	}
	for k, want := range strs {
		if got, ok := f.String(k); !ok || got != want {
			t.Errorf("String(%s) = %q, %v, want %q", k, got, ok, want)
		}
	}
	u32s := map[string]uint32{
		"general.file_type":               map[tensor.Type]uint32{tensor.F32: 0, tensor.F16: 1, tensor.Q8_0: 7, tensor.Q4_K: 15}[typ],
		"general.quantization_version":    2,
		"llama.context_length":            2048,
		"llama.embedding_length":          256,
		"llama.block_count":               2,
		"llama.feed_forward_length":       512,
		"llama.attention.head_count":      4,
		"llama.attention.head_count_kv":   2,
		"llama.rope.dimension_count":      64,
		"llama.vocab_size":                512,
		"tokenizer.ggml.bos_token_id":     1,
		"tokenizer.ggml.eos_token_id":     2,
		"tokenizer.ggml.unknown_token_id": 0,
	}
	for k, want := range u32s {
		if got, ok := f.Uint32(k); !ok || got != want {
			t.Errorf("Uint32(%s) = %d, %v, want %d", k, got, ok, want)
		}
	}
	f32s := map[string]float32{"llama.attention.layer_norm_rms_epsilon": 1e-5, "llama.rope.freq_base": 10000}
	for k, want := range f32s {
		if got, ok := f.Float32(k); !ok || got != want {
			t.Errorf("Float32(%s) = %v, %v, want %v", k, got, ok, want)
		}
	}
	if got, ok := f.Bool("tokenizer.ggml.add_bos_token"); !ok || !got {
		t.Errorf("Bool(tokenizer.ggml.add_bos_token) = %v, %v, want true", got, ok)
	}
	tokens, _ := f.Strings("tokenizer.ggml.tokens")
	scores, _ := f.Float32s("tokenizer.ggml.scores")
	types, _ := f.Int32s("tokenizer.ggml.token_type")
	if len(tokens) != 512 || len(scores) != 512 || len(types) != 512 {
		t.Errorf("tokenizer arrays have %d tokens, %d scores, %d types, want 512 each", len(tokens), len(scores), len(types))
	}
}

func checkTensors(t *testing.T, f *gguf.File, c Config, typ tensor.Type) {
	t.Helper()
	kv := uint64(c.KVHeads * c.HeadDim())
	dim, ff, vocab := uint64(c.Dim), uint64(c.FF), uint64(c.Vocab)
	want := map[string][]uint64{
		"token_embd.weight":  {dim, vocab},
		"output_norm.weight": {dim},
		"output.weight":      {dim, vocab},
	}
	for l := range c.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		want[p+"attn_norm.weight"] = []uint64{dim}
		want[p+"attn_q.weight"] = []uint64{dim, dim}
		want[p+"attn_k.weight"] = []uint64{dim, kv}
		want[p+"attn_v.weight"] = []uint64{dim, kv}
		want[p+"attn_output.weight"] = []uint64{dim, dim}
		want[p+"ffn_norm.weight"] = []uint64{dim}
		want[p+"ffn_gate.weight"] = []uint64{dim, ff}
		want[p+"ffn_up.weight"] = []uint64{dim, ff}
		want[p+"ffn_down.weight"] = []uint64{ff, dim}
	}
	if len(f.Tensors) != len(want) {
		t.Errorf("file has %d tensors, want %d", len(f.Tensors), len(want))
	}
	q6 := 0
	for _, ti := range f.Tensors {
		dims, ok := want[ti.Name]
		if !ok {
			t.Errorf("unexpected tensor %s", ti.Name)
			continue
		}
		if !slices.Equal(ti.Dims, dims) {
			t.Errorf("tensor %s dims = %v, want %v", ti.Name, ti.Dims, dims)
		}
		if wt := wantType(ti.Name, typ, c.Layers); ti.Type != wt {
			t.Errorf("tensor %s type = %s, want %s", ti.Name, ti.Type, wt)
		}
		if ti.Type == tensor.Q6_K {
			q6++
		}
		vals := make([]float32, ti.NumElements())
		if err := tensor.Dequantize(ti.Type, ti.Data, vals); err != nil {
			t.Errorf("dequantize %s: %v", ti.Name, err)
			continue
		}
		if strings.HasSuffix(ti.Name, "norm.weight") {
			for i, v := range vals {
				if v != 1 {
					t.Errorf("norm %s[%d] = %v, want 1", ti.Name, i, v)
					break
				}
			}
			continue
		}
		var sum, sq float64
		for _, v := range vals {
			sum += float64(v)
			sq += float64(v) * float64(v)
		}
		n := float64(len(vals))
		mean, std := sum/n, math.Sqrt(sq/n-(sum/n)*(sum/n))
		if math.Abs(mean) > 0.002 || std < 0.017 || std > 0.023 {
			t.Errorf("tensor %s: mean %.5f, std %.5f; want about 0 and 0.02", ti.Name, mean, std)
		}
	}
	// Q4_K_M on 2 layers: output, and layer 1's attn_v and ffn_down.
	if wantQ6 := map[bool]int{true: 3, false: 0}[typ == tensor.Q4_K]; q6 != wantQ6 {
		t.Errorf("%d Q6_K tensors, want %d", q6, wantQ6)
	}
}

func TestUseMoreBits(t *testing.T) {
	cases := []struct {
		layers int
		want   []int
	}{
		{2, []int{1}},
		{12, []int{0, 3, 6, 9, 10, 11}},
		{22, []int{0, 1, 4, 7, 10, 13, 16, 19, 20, 21}},
	}
	for _, c := range cases {
		var got []int
		for l := range c.layers {
			if useMoreBits(l, c.layers) {
				got = append(got, l)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("useMoreBits layers of %d = %v, want %v", c.layers, got, c.want)
		}
	}
}

func TestDeterministic(t *testing.T) {
	for _, typ := range []tensor.Type{tensor.Q8_0, tensor.Q4_K} {
		a := render(t, tinyOptions(t, typ, 3), 1)
		b := render(t, tinyOptions(t, typ, 3), 4)
		if !bytes.Equal(a, b) {
			t.Errorf("%s seed 3: output with 1 and 4 workers differs", typ)
		}
		c := render(t, tinyOptions(t, typ, 4), 2)
		if len(c) != len(a) {
			t.Errorf("%s: seeds 3 and 4 give %d and %d bytes, want equal sizes", typ, len(a), len(c))
		}
		if bytes.Equal(a, c) {
			t.Errorf("%s: seeds 3 and 4 give identical files", typ)
		}
	}
	// Through the file path too.
	dir := t.TempDir()
	o := tinyOptions(t, tensor.F16, 9)
	p1, p2 := filepath.Join(dir, "a.gguf"), filepath.Join(dir, "b.gguf")
	if err := Write(p1, o); err != nil {
		t.Fatal(err)
	}
	if err := Write(p2, o); err != nil {
		t.Fatal(err)
	}
	f1, f2 := readFile(t, p1), readFile(t, p2)
	if !bytes.Equal(f1, f2) {
		t.Errorf("Write twice with seed 9 gave different files")
	}
}

func TestVocabFrom(t *testing.T) {
	src := testenv.Shared(t, "models/stories260K.gguf")
	o := tinyOptions(t, tensor.Q8_0, 1)
	o.VocabFrom = src
	path := filepath.Join(t.TempDir(), "v.gguf")
	if err := Write(path, o); err != nil {
		t.Fatalf("Write with VocabFrom error: %v", err)
	}
	from, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer from.Close()
	got, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	n := 0
	for _, kv := range from.KV {
		if !strings.HasPrefix(kv.Key, "tokenizer.") {
			continue
		}
		n++
		v, ok := got.Lookup(kv.Key)
		if !ok || !v.Equal(kv.Value) {
			t.Errorf("key %s = %v (present %v), want the source's %v", kv.Key, v.Text(), ok, kv.Value.Text())
		}
	}
	if n < 5 {
		t.Errorf("source has only %d tokenizer keys; the test expects a full tokenizer", n)
	}
	for _, kv := range got.KV {
		if _, ok := from.Lookup(kv.Key); strings.HasPrefix(kv.Key, "tokenizer.") && !ok {
			t.Errorf("written file has tokenizer key %s that the source lacks", kv.Key)
		}
	}
	srcTokens, _ := from.Strings("tokenizer.ggml.tokens")
	ti, ok := got.Tensor("token_embd.weight")
	if !ok || !slices.Equal(ti.Dims, []uint64{256, uint64(len(srcTokens))}) {
		t.Errorf("token_embd dims = %v, want [256 %d]", ti.Dims, len(srcTokens))
	}
	if v, _ := got.Uint32("llama.vocab_size"); int(v) != len(srcTokens) {
		t.Errorf("llama.vocab_size = %d, want %d", v, len(srcTokens))
	}
}

func TestVocabFromErrors(t *testing.T) {
	dir := t.TempDir()
	// A model without a tokenizer: written with the gguf writer directly.
	w := gguf.NewWriter()
	w.SetString("general.architecture", "llama")
	noTok := filepath.Join(dir, "notok.gguf")
	if err := w.WriteFile(noTok); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ from, want string }{
		{filepath.Join(dir, "missing.gguf"), "missing.gguf"},
		{noTok, "tokenizer.ggml.tokens"},
	} {
		o := tinyOptions(t, tensor.Q8_0, 1)
		o.VocabFrom = c.from
		err := Write(filepath.Join(dir, "out.gguf"), o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Write with VocabFrom %s error = %v, want one mentioning %q", c.from, err, c.want)
		}
	}
}

func TestSynthVocab(t *testing.T) {
	for _, n := range []int{VocabMin, 512, 32000} {
		v := synthVocab(n)
		if len(v.tokens) != n || len(v.scores) != n || len(v.types) != n {
			t.Fatalf("synthVocab(%d) has %d tokens, %d scores, %d types", n, len(v.tokens), len(v.scores), len(v.types))
		}
		seen := map[string]bool{}
		for i, tok := range v.tokens {
			if seen[tok] {
				t.Errorf("synthVocab(%d): token %q appears twice", n, tok)
			}
			seen[tok] = true
			var wantType int32
			switch {
			case i == 0:
				wantType = tokenUnknown
			case i < 3:
				wantType = tokenControl
			case i < 259:
				wantType = tokenByte
				if want := fmt.Sprintf("<0x%02X>", i-3); tok != want {
					t.Errorf("synthVocab(%d) token %d = %q, want %q", n, i, tok, want)
				}
			default:
				wantType = tokenNormal
				if i > 259 && v.scores[i] >= v.scores[i-1] {
					t.Errorf("synthVocab(%d) score %d (%q) = %v, not below the previous %v", n, i, tok, v.scores[i], v.scores[i-1])
				}
			}
			if v.types[i] != wantType {
				t.Errorf("synthVocab(%d) type of %d (%q) = %d, want %d", n, i, tok, v.types[i], wantType)
			}
		}
		if got := v.tokens[:3]; !slices.Equal(got, []string{"<unk>", "<s>", "</s>"}) {
			t.Errorf("synthVocab(%d) specials = %q", n, got)
		}
		if v.tokens[259] != "▁" {
			t.Errorf("synthVocab(%d) token 259 = %q, want ▁", n, v.tokens[259])
		}
	}
	// The 512-token vocabulary has whole pieces for a story opening, and
	// every prefix on the way to them.
	v := synthVocab(512)
	has := map[string]bool{}
	for _, tok := range v.tokens {
		has[tok] = true
	}
	for _, w := range []string{"▁Once", "▁upon", "▁a", "▁time", "▁the", "▁little", "▁girl", "▁named"} {
		for i := 2; i <= len([]rune(w)); i++ {
			if p := string([]rune(w)[:i]); !has[p] {
				t.Errorf("synthVocab(512) lacks %q (prefix of %q)", p, w)
			}
		}
	}
	// Same size, same vocabulary.
	if w := synthVocab(512); !slices.Equal(w.tokens, v.tokens) {
		t.Errorf("synthVocab(512) differs between calls")
	}
}

func TestConfigErrors(t *testing.T) {
	base, _ := Preset("tiny")
	cases := []struct {
		name string
		edit func(*Config)
		typ  tensor.Type
		want string
	}{
		{"zero dim", func(c *Config) { c.Dim = 0 }, tensor.Q8_0, "dim 0"},
		{"dim not multiple of heads", func(c *Config) { c.Heads = 3 }, tensor.F16, "not a multiple of heads"},
		{"odd head dim", func(c *Config) { c.Dim, c.Heads, c.KVHeads = 96, 32, 32 }, tensor.F16, "odd"},
		{"heads not multiple of kv heads", func(c *Config) { c.KVHeads = 3 }, tensor.F16, "kv heads"},
		{"kv heads above heads", func(c *Config) { c.KVHeads = 8 }, tensor.F16, "kv heads 8"},
		{"Q4_K needs 256", func(c *Config) { c.Dim = 128; c.Heads = 2; c.KVHeads = 2 }, tensor.Q4_K, "multiples of 256"},
		{"Q8_0 needs 32", func(c *Config) { c.FF = 500 }, tensor.Q8_0, "multiples of 32"},
		{"vocab too small", func(c *Config) { c.Vocab = 100 }, tensor.Q8_0, "vocab 100"},
		{"huge layers", func(c *Config) { c.Layers = 1 << 20 }, tensor.Q8_0, "layers"},
		{"negative eps", func(c *Config) { c.NormEps = -1 }, tensor.Q8_0, "epsilon"},
		{"NaN rope", func(c *Config) { c.RopeBase = float32(math.NaN()) }, tensor.Q8_0, "rope base"},
		{"unsupported type", func(c *Config) {}, tensor.Q5_K, "not supported"},
	}
	for _, c := range cases {
		cfg := base
		c.edit(&cfg)
		_, err := build(Options{Config: cfg, Type: c.typ}, 1)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: build error = %v, want one containing %q", c.name, err, c.want)
		}
	}
	// F16 rows may be any length.
	cfg := base
	cfg.FF = 500
	if _, err := build(Options{Config: cfg, Type: tensor.F16}, 1); err != nil {
		t.Errorf("build F16 with FF 500 error = %v, want nil", err)
	}
}

func BenchmarkWrite110mQ8_0(b *testing.B) {
	c, _ := Preset("110m")
	path := filepath.Join(b.TempDir(), "m.gguf")
	for b.Loop() {
		if err := Write(path, Options{Config: c, Type: tensor.Q8_0, Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return b
}

func TestDirectBlocks(t *testing.T) {
	for _, c := range []struct {
		typ   tensor.Type
		bytes int
	}{{tensor.Q4_K, q4kBlockBytes}, {tensor.Q6_K, q6kBlockBytes}} {
		if c.typ.TypeSize() != c.bytes {
			t.Fatalf("%s block is %d bytes here, tensor says %d", c.typ, c.bytes, c.typ.TypeSize())
		}
		const blocks = 2000
		buf := make([]byte, blocks*c.bytes)
		fillBlocks(c.typ, buf, rand.NewPCG(1, 2))
		vals := make([]float32, blocks*tensor.QKK)
		if err := tensor.Dequantize(c.typ, buf, vals); err != nil {
			t.Fatalf("Dequantize(%s) error: %v", c.typ, err)
		}
		var sum, sq float64
		for _, v := range vals {
			sum += float64(v)
			sq += float64(v) * float64(v)
		}
		n := float64(len(vals))
		mean, std := sum/n, math.Sqrt(sq/n-(sum/n)*(sum/n))
		if math.Abs(mean) > 0.0005 || math.Abs(std-weightStd) > 0.001 {
			t.Errorf("%d random %s blocks: mean %.6f, std %.6f; want 0 ± 0.0005 and %v ± 0.001", blocks, c.typ, mean, std, weightStd)
		}
		if c.typ != tensor.Q4_K {
			continue
		}
		for b := range blocks {
			s := buf[b*c.bytes+4 : b*c.bytes+16]
			for j := range 8 {
				sc, m := tensor.ScaleMinK4(j, s)
				if sc < 32 || sc > 63 || int(m) != (int(sc)*15+8)/16 {
					t.Fatalf("Q4_K block %d sub-block %d: scale %d, min %d; want scale in [32, 63] and min round(scale·15/16)", b, j, sc, m)
				}
			}
		}
	}
}
