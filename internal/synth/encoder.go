package synth

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"

	"tandem/internal/engine/gguf"
	"tandem/internal/engine/tensor"
)

// EncoderArchs are the BERT-family embedding architectures WriteEncoder
// synthesizes, laid out as llama.cpp's loaders for them expect.
var EncoderArchs = []string{"nomic-bert", "bert"}

// encoderNormGain multiplies the layer-norm weights of an encoder 256
// wide, so that the random Q and K give attention scores far from zero:
// attention then depends on which tokens are where, and a test notices a
// wrong mask or RoPE. Wider models get it scaled by sqrt(256/Dim), which
// keeps the scores' spread: with sharper attention a deep random encoder
// is chaotic (two correct engines' rounding differences grow layer by
// layer; at 768 wide and 12 layers with the gain unscaled, llama.cpp and
// Tandem part to a cosine of 0.97 even in F32, while 4 layers agree to
// 1e-7).
const encoderNormGain = 8

// normGain is encoderNormGain for a model dim wide.
func normGain(dim int) float32 {
	return float32(encoderNormGain * math.Sqrt(256/float64(dim)))
}

// WriteEncoder synthesizes a random-weight BERT-family embedding model
// (o.Config.Arch "nomic-bert" or "bert") with a synthesized WordPiece
// vocabulary and writes it to path as GGUF v3. Its shape is o.Config's
// Dim, Layers, Heads, FF and Context (KVHeads is taken equal to Heads, as
// BERT has no grouped-query attention); o.Config.Pooling chooses
// {arch}.pooling_type (0 means mean, nomic-embed-text's). Matrices get
// o.Type (F32, F16 or Q8_0); norms and biases are F32.
func WriteEncoder(path string, o Options) error {
	w, err := buildEncoder(o)
	if err != nil {
		return err
	}
	if err := w.WriteFile(path); err != nil {
		return fmt.Errorf("write synthesized encoder %s: %w", path, err)
	}
	return nil
}

func buildEncoder(o Options) (*gguf.Writer, error) {
	c := o.Config
	if !slices.Contains(EncoderArchs, c.Arch) {
		return nil, fmt.Errorf("synthesize encoder: architecture %q is not one of %s", c.Arch, strings.Join(EncoderArchs, ", "))
	}
	if c.Name == "" {
		c.Name = "tandem-synth-" + c.Arch
	}
	switch o.Type {
	case tensor.F32, tensor.F16, tensor.Q8_0:
	default:
		return nil, fmt.Errorf("synthesize encoder: weight type %s not supported (want f32, f16 or q8_0)", o.Type)
	}
	c.KVHeads = c.Heads
	if c.NormEps == 0 || c.NormEps == 1e-5 {
		c.NormEps = 1e-12 // BERT's layer_norm_eps
	}
	if o.VocabFrom != "" {
		return nil, fmt.Errorf("synthesize encoder: --vocab-from is not supported for %s (it writes its own WordPiece vocabulary)", c.Arch)
	}
	voc := wordPieceVocab()
	shape := c
	shape.Arch = "" // check the shape only
	if err := shape.check([]tensor.Type{o.Type}, VocabMin, false); err != nil {
		return nil, fmt.Errorf("synthesize encoder: %w", err)
	}
	if o.Type == tensor.Q8_0 && (c.Dim%32 != 0 || c.FF%32 != 0) {
		return nil, fmt.Errorf("synthesize encoder: q8_0 needs dim and feed-forward width that are multiples of 32")
	}
	pooling := c.Pooling
	if pooling == 0 {
		pooling = 1
	}
	w := gguf.NewWriter()
	a := c.Arch + "."
	w.SetString("general.architecture", c.Arch)
	w.SetString("general.name", c.Name)
	ft := uint32(0)
	switch o.Type {
	case tensor.F16:
		ft = 1
	case tensor.Q8_0:
		ft = 7
	}
	w.SetUint32("general.file_type", ft)
	w.SetUint32("general.quantization_version", 2)
	w.SetUint32(a+"context_length", uint32(c.Context))
	w.SetUint32(a+"embedding_length", uint32(c.Dim))
	w.SetUint32(a+"block_count", uint32(c.Layers))
	w.SetUint32(a+"feed_forward_length", uint32(c.FF))
	w.SetUint32(a+"attention.head_count", uint32(c.Heads))
	w.SetFloat32(a+"attention.layer_norm_epsilon", c.NormEps)
	w.Set(a+"attention.causal", gguf.BoolValue(false))
	w.SetUint32(a+"pooling_type", uint32(pooling))
	if c.Arch == "nomic-bert" {
		w.SetFloat32(a+"rope.freq_base", c.RopeBase)
	}
	for _, kv := range voc.wpmKeys() {
		w.Set(kv.Key, kv.Value)
	}

	dim, ff, ctx, nv := uint64(c.Dim), uint64(c.FF), uint64(c.Context), uint64(len(voc.tokens))
	type spec struct {
		name string
		dims []uint64
		kind int // 0 matrix, 1 norm weight, 2 bias, 3 small F32 matrix
	}
	specs := []spec{{"token_embd.weight", []uint64{dim, nv}, 0}, {"token_types.weight", []uint64{dim, 2}, 3}}
	if c.Arch == "bert" {
		specs = append(specs, spec{"position_embd.weight", []uint64{dim, ctx}, 0})
	}
	specs = append(specs, spec{"token_embd_norm.weight", []uint64{dim}, 1}, spec{"token_embd_norm.bias", []uint64{dim}, 2})
	for l := range c.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		if c.Arch == "nomic-bert" {
			specs = append(specs, spec{p + "attn_qkv.weight", []uint64{dim, 3 * dim}, 0})
		} else {
			specs = append(specs,
				spec{p + "attn_q.weight", []uint64{dim, dim}, 0}, spec{p + "attn_q.bias", []uint64{dim}, 2},
				spec{p + "attn_k.weight", []uint64{dim, dim}, 0}, spec{p + "attn_k.bias", []uint64{dim}, 2},
				spec{p + "attn_v.weight", []uint64{dim, dim}, 0}, spec{p + "attn_v.bias", []uint64{dim}, 2})
		}
		specs = append(specs, spec{p + "attn_output.weight", []uint64{dim, dim}, 0})
		if c.Arch == "bert" {
			specs = append(specs, spec{p + "attn_output.bias", []uint64{dim}, 2})
		}
		specs = append(specs, spec{p + "attn_output_norm.weight", []uint64{dim}, 1}, spec{p + "attn_output_norm.bias", []uint64{dim}, 2})
		specs = append(specs, spec{p + "ffn_up.weight", []uint64{dim, ff}, 0})
		if c.Arch == "bert" {
			specs = append(specs, spec{p + "ffn_up.bias", []uint64{ff}, 2})
		} else {
			specs = append(specs, spec{p + "ffn_gate.weight", []uint64{dim, ff}, 0})
		}
		specs = append(specs, spec{p + "ffn_down.weight", []uint64{ff, dim}, 0})
		if c.Arch == "bert" {
			specs = append(specs, spec{p + "ffn_down.bias", []uint64{dim}, 2})
		}
		specs = append(specs, spec{p + "layer_output_norm.weight", []uint64{dim}, 1}, spec{p + "layer_output_norm.bias", []uint64{dim}, 2})
	}
	for i, s := range specs {
		var err error
		p := rand.NewPCG(o.Seed, mix(uint64(i)<<32|0xfffffffe))
		switch s.kind {
		case 1:
			err = w.AddTensor(s.name, tensor.F32, s.dims, jittered(int(s.dims[0]), normGain(c.Dim), p))
		case 2, 3:
			n := int(s.dims[0])
			if len(s.dims) > 1 {
				n *= int(s.dims[1])
			}
			v := make([]float32, n)
			for j := range v {
				v[j] = float32(float64(p.Uint64()>>11)/(1<<53)*0.2 - 0.1)
			}
			err = w.AddTensor(s.name, tensor.F32, s.dims, f32Bytes(v))
		default:
			g := generator{spec: tensorSpec{name: s.name, dims: s.dims, typ: o.Type}, seed: o.Seed, index: uint64(i), workers: runtime.GOMAXPROCS(0)}
			err = w.AddTensorFunc(s.name, o.Type, s.dims, g.write)
		}
		if err != nil {
			return nil, fmt.Errorf("synthesize encoder: add tensor %s: %w", s.name, err)
		}
	}
	return w, nil
}

// WordPiece special token ids, at BERT's (and llama.cpp's default) places.
const (
	wpmPad  = 0
	wpmUnk  = 100
	wpmCLS  = 101
	wpmSEP  = 102
	wpmMask = 103
)

// wordPieceVocab builds a BERT-style vocabulary as llama.cpp's converter
// writes one: [PAD], [unusedN] up to 99, [UNK], [CLS], [SEP], [MASK], then
// word-initial pieces ("▁" + letters, digits, punctuation and common
// words, lower-cased) and continuation pieces (letters and suffixes,
// written without BERT's "##").
func wordPieceVocab() vocab {
	var v vocab
	v.add("[PAD]", 0, tokenControl)
	for i := 1; i < wpmUnk; i++ {
		v.add(fmt.Sprintf("[unused%d]", i), 0, tokenControl)
	}
	v.add("[UNK]", 0, tokenUnknown)
	v.add("[CLS]", 0, tokenControl)
	v.add("[SEP]", 0, tokenControl)
	v.add("[MASK]", 0, tokenControl)
	seen := map[string]bool{}
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			v.add(s, 0, tokenNormal)
		}
	}
	chars := letterOrder + "0123456789.,!?'\"-:;()"
	for _, r := range chars {
		add(spaceMark + string(r))
	}
	for _, r := range letterOrder + "0123456789" {
		add(string(r))
	}
	for _, wd := range commonWords {
		add(spaceMark + strings.ToLower(wd))
	}
	for _, s := range suffixes {
		add(s)
	}
	for _, a := range letterOrder[:12] {
		for _, b := range letterOrder[:12] {
			add(string(a) + string(b))
		}
	}
	return v
}

// wpmKeys returns the tokenizer metadata of a WordPiece vocabulary.
func (v vocab) wpmKeys() []gguf.KV {
	return []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: gguf.StringValue("bert")},
		{Key: "tokenizer.ggml.tokens", Value: gguf.StringsValue(v.tokens)},
		{Key: "tokenizer.ggml.token_type", Value: gguf.Int32sValue(v.types)},
		{Key: "tokenizer.ggml.token_type_count", Value: gguf.Uint32Value(2)},
		{Key: "tokenizer.ggml.bos_token_id", Value: gguf.Uint32Value(wpmCLS)},
		{Key: "tokenizer.ggml.seperator_token_id", Value: gguf.Uint32Value(wpmSEP)},
		{Key: "tokenizer.ggml.unknown_token_id", Value: gguf.Uint32Value(wpmUnk)},
		{Key: "tokenizer.ggml.padding_token_id", Value: gguf.Uint32Value(wpmPad)},
		{Key: "tokenizer.ggml.mask_token_id", Value: gguf.Uint32Value(wpmMask)},
		{Key: "tokenizer.ggml.normalizer.lowercase", Value: gguf.BoolValue(true)},
	}
}
