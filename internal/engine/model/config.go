package model

import (
	"fmt"
)

// RopeStyle says which elements of a head RoPE rotates together.
type RopeStyle int

const (
	// RopeNorm rotates adjacent pairs (2i, 2i+1): llama.cpp's LLAMA_ROPE_TYPE_NORM, used by arch "llama".
	RopeNorm RopeStyle = iota
	// RopeNeox rotates pairs (i, i+n/2): LLAMA_ROPE_TYPE_NEOX, used by arch "qwen2".
	RopeNeox
)

// String names the style.
func (s RopeStyle) String() string {
	if s == RopeNeox {
		return "neox"
	}
	return "norm"
}

// Config is a model's shape and hyperparameters, read from GGUF metadata.
type Config struct {
	Arch      string
	Name      string
	Dim       int // embedding length
	Layers    int
	Heads     int
	KVHeads   int
	HeadDim   int // key/value length per head
	FF        int // feed-forward length
	Vocab     int
	Context   int // training context length
	RopeDim   int // dimensions rotated per head
	RopeBase  float32
	RopeScale float32 // position multiplier (1/linear scaling factor)
	RopeStyle RopeStyle
	NormEps   float32
}

// Metadata is the part of a GGUF file the loader reads keys from.
// *gguf.File satisfies it.
type Metadata interface {
	String(key string) (string, bool)
	Int(key string) (int, bool)
	Float32(key string) (float32, bool)
	Strings(key string) ([]string, bool)
}

// limits that keep a hostile file from asking for absurd allocations.
const (
	dimMax     = 1 << 16
	layersMax  = 1024
	headsMax   = 1024
	vocabMax   = 1 << 21
	contextMax = 1 << 22
)

// ConfigFromMetadata reads the architecture keys ({arch}.embedding_length, ...).
func ConfigFromMetadata(md Metadata) (Config, error) {
	var c Config
	arch, ok := md.String("general.architecture")
	if !ok {
		return c, fmt.Errorf("model metadata: general.architecture is missing")
	}
	c.Arch = arch
	switch arch {
	case "llama":
		c.RopeStyle = RopeNorm
	case "qwen2":
		c.RopeStyle = RopeNeox
	default:
		return c, fmt.Errorf("model architecture %q is not supported (supported: llama, qwen2)", arch)
	}
	c.Name, _ = md.String("general.name")
	req := func(key string, dst *int, max int) error {
		v, ok := md.Int(arch + "." + key)
		if !ok {
			return fmt.Errorf("model metadata: %s.%s is missing", arch, key)
		}
		if v <= 0 || v > max {
			return fmt.Errorf("model metadata: %s.%s = %d is out of range 1..%d", arch, key, v, max)
		}
		*dst = v
		return nil
	}
	for _, r := range []struct {
		key string
		dst *int
		max int
	}{
		{"embedding_length", &c.Dim, dimMax},
		{"block_count", &c.Layers, layersMax},
		{"feed_forward_length", &c.FF, dimMax * 8},
		{"attention.head_count", &c.Heads, headsMax},
	} {
		if err := req(r.key, r.dst, r.max); err != nil {
			return c, err
		}
	}
	c.KVHeads = c.Heads
	if _, ok := md.Int(arch + ".attention.head_count_kv"); ok {
		if err := req("attention.head_count_kv", &c.KVHeads, headsMax); err != nil {
			return c, err
		}
	}
	if c.Heads%c.KVHeads != 0 {
		return c, fmt.Errorf("model metadata: head_count %d is not a multiple of head_count_kv %d", c.Heads, c.KVHeads)
	}
	c.HeadDim = c.Dim / c.Heads
	if _, ok := md.Int(arch + ".attention.key_length"); ok {
		if err := req("attention.key_length", &c.HeadDim, dimMax); err != nil {
			return c, err
		}
		vl, ok := md.Int(arch + ".attention.value_length")
		if ok && vl != c.HeadDim {
			return c, fmt.Errorf("model metadata: key_length %d != value_length %d is not supported", c.HeadDim, vl)
		}
	}
	if c.HeadDim <= 0 || c.HeadDim%2 != 0 {
		return c, fmt.Errorf("model metadata: head dimension %d must be positive and even", c.HeadDim)
	}
	c.RopeDim = c.HeadDim
	if _, ok := md.Int(arch + ".rope.dimension_count"); ok {
		if err := req("rope.dimension_count", &c.RopeDim, c.HeadDim); err != nil {
			return c, err
		}
		if c.RopeDim%2 != 0 {
			return c, fmt.Errorf("model metadata: rope.dimension_count %d must be even", c.RopeDim)
		}
	}
	c.Context = 2048
	if _, ok := md.Int(arch + ".context_length"); ok {
		if err := req("context_length", &c.Context, contextMax); err != nil {
			return c, err
		}
	}
	c.RopeBase = 10000 // llama.cpp's default when the key is absent
	if v, ok := md.Float32(arch + ".rope.freq_base"); ok {
		if !(v > 0) {
			return c, fmt.Errorf("model metadata: rope.freq_base %v must be positive", v)
		}
		c.RopeBase = v
	}
	c.RopeScale = 1
	if typ, ok := md.String(arch + ".rope.scaling.type"); ok && typ != "none" {
		f, _ := md.Float32(arch + ".rope.scaling.factor")
		switch {
		case typ == "linear" && f > 0:
			c.RopeScale = 1 / f
		case typ == "linear":
		default:
			return c, fmt.Errorf("model metadata: rope scaling %q is not supported (supported: none, linear)", typ)
		}
	}
	c.NormEps = 1e-5
	if v, ok := md.Float32(arch + ".attention.layer_norm_rms_epsilon"); ok {
		if !(v > 0 && v < 1) {
			return c, fmt.Errorf("model metadata: layer_norm_rms_epsilon %v is out of range (0,1)", v)
		}
		c.NormEps = v
	}
	if n, ok := md.Int(arch + ".expert_count"); ok && n > 0 {
		return c, fmt.Errorf("model metadata: mixture-of-experts models (%s.expert_count = %d) are not supported", arch, n)
	}
	if toks, ok := md.Strings("tokenizer.ggml.tokens"); ok {
		c.Vocab = len(toks)
	}
	if v, ok := md.Int(arch + ".vocab_size"); ok && c.Vocab == 0 {
		c.Vocab = v
	}
	if c.Vocab <= 0 || c.Vocab > vocabMax {
		return c, fmt.Errorf("model metadata: vocabulary size %d is out of range 1..%d", c.Vocab, vocabMax)
	}
	return c, nil
}
