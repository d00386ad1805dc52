package model

import (
	"fmt"
	"math"
	"strings"
)

// RopeStyle says which elements of a head RoPE rotates together.
type RopeStyle int

const (
	// RopeNorm rotates adjacent pairs (2i, 2i+1): llama.cpp's LLAMA_ROPE_TYPE_NORM, used by arch "llama".
	RopeNorm RopeStyle = iota
	// RopeNeox rotates pairs (i, i+n/2): LLAMA_ROPE_TYPE_NEOX, used by archs
	// "qwen2", "qwen3", "phi3", "gemma2" and "gemma3".
	RopeNeox
)

// Activation is the nonlinearity of the feed-forward gate.
type Activation int

const (
	// ActSiLU is SwiGLU's silu(gate)·up (llama, qwen, phi3).
	ActSiLU Activation = iota
	// ActGELU is GeGLU's gelu_tanh(gate)·up (gemma), computed through
	// ggml's half-precision GELU table as llama.cpp's CPU backend does.
	ActGELU
	// ActSwiGLUOAI is gpt-oss's clamped gate (gptoss.go): with x = min(gate,
	// 7) and y = clamp(up, -7, 7), x·sigmoid(1.702·x)·(y+1).
	ActSwiGLUOAI
)

// String names the activation.
func (a Activation) String() string {
	switch a {
	case ActGELU:
		return "gelu"
	case ActSwiGLUOAI:
		return "swiglu-oai (clamped at 7, alpha 1.702)"
	}
	return "silu"
}

// Architectures lists the values of general.architecture Tandem runs.
var Architectures = []string{"llama", "qwen2", "qwen3", "phi3", "gemma2", "gemma3", "gemma4", "qwen3moe", "qwen2moe", "qwen35", "qwen35moe", "gpt-oss"}

// UnsupportedArchError is the error for a file of an architecture Tandem
// does not run.
type UnsupportedArchError struct{ Arch string }

func (e *UnsupportedArchError) Error() string {
	return fmt.Sprintf("model architecture %q is not supported (supported: %s)", e.Arch, strings.Join(Architectures, ", "))
}

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

	// The fields below describe architecture features; their zero values
	// mean a plain Llama block.

	// RopeAttnFactor multiplies RoPE's cos and sin ({arch}.rope.scaling.attn_factor,
	// Phi-3's long-context scaling); 1 when absent.
	RopeAttnFactor float32
	// RopeOrigContext is {arch}.rope.scaling.original_context_length (Context
	// when absent). Phi-3 uses its long RoPE factors when Context exceeds it;
	// YaRN computes its correction dimensions from it.
	RopeOrigContext int
	// Yarn is YaRN RoPE scaling (rope.scaling.type "yarn", gptoss.go); its
	// zero value means none. With YaRN, RopeAttnFactor holds llama.cpp's
	// yarn_attn_factor.
	Yarn YarnConfig
	// AttnSinks: every query head has a learned logit (attn_sinks) that
	// joins its softmax's denominator and no value (gpt-oss).
	AttnSinks bool
	// QKNorm: per-head RMS norms of Q and K before RoPE (qwen3, gemma3).
	QKNorm bool
	// PostNorms: RMS norms of the attention and feed-forward outputs before
	// their residual adds (gemma2, gemma3).
	PostNorms bool
	// Act is the feed-forward gate's nonlinearity.
	Act Activation
	// EmbedScale multiplies the token embeddings (gemma: sqrt(Dim)); 0 means 1.
	EmbedScale float32
	// QueryScale, when nonzero, multiplies Q before attention and the scores
	// are not scaled again (phi3, gemma); when zero the scores are scaled by
	// 1/sqrt(HeadDim) inside the softmax, as llama.cpp does for llama.
	QueryScale float32
	// AttnSoftcap, when nonzero, caps attention scores as cap·tanh(s/cap)
	// before the softmax (gemma2).
	AttnSoftcap float32
	// FinalSoftcap, when nonzero, caps the logits the same way (gemma2,
	// optional in gemma3).
	FinalSoftcap float32
	// TiedOutput: the output projection is always token_embd, whatever else
	// the file holds (gemma2, as llama.cpp loads it).
	TiedOutput bool
	// SlidingWindow is the attention window of the sliding-window layers
	// ({arch}.attention.sliding_window): a token at position p attends to
	// positions p-SlidingWindow+1 .. p. 0 means no layer is windowed.
	SlidingWindow int
	// SWALayers marks, per layer, the sliding-window layers; nil when
	// SlidingWindow is 0.
	SWALayers []bool
	// RopeBaseSWA and RopeScaleSWA are the RoPE base and position scale of
	// the sliding-window layers (gemma3: base 10000, scale 1, while the
	// global layers use RopeBase and RopeScale).
	RopeBaseSWA, RopeScaleSWA float32
	// MoE describes the mixture-of-experts feed-forward blocks (moe.go);
	// its zero value (no experts) means dense blocks.
	MoE MoEConfig
	// Gemma4 holds gemma4's per-layer shapes (gemma4.go); nil for every
	// other architecture.
	Gemma4 *Gemma4Config
	// State describes the per-sequence recurrent state of hybrid models
	// (qwen35: Gated DeltaNet layers keep a convolution and a recurrent
	// state instead of KV pages); its zero value means every layer keeps
	// KV pages and there is no state.
	State StateConfig
	// GDN is the shape of the Gated DeltaNet layers of hybrid models
	// (gdn.go); its zero value means none.
	GDN GDNConfig
	// Recurrent marks, per layer, the Gated DeltaNet layers, which keep
	// recurrent state and no KV pages; nil when there are none.
	Recurrent []bool
	// AttnGate: the full-attention layers' Q projection holds, per head,
	// the query then a gate; the attention output is multiplied by
	// sigmoid(gate) before the output projection (qwen35).
	AttnGate bool
	// RopeSections are the interleaved multi-axis RoPE sections
	// ({arch}.rope.dimension_sections, llama.cpp's IMROPE); for text every
	// axis holds the token position except the fourth, which holds 0, so
	// the rotary pairs that fall to the fourth axis do not rotate. All
	// zero for plain RoPE.
	RopeSections [4]int
	// NextN is the number of multi-token-prediction blocks after the
	// Layers ones ({arch}.nextn_predict_layers, qwen35): their tensors are
	// in the file, and the forward pass does not run them (llama.cpp runs
	// them only to draft tokens).
	NextN int
}

// KVLayers is the number of layers that keep KV pages: every layer but
// the recurrent ones.
func (c *Config) KVLayers() int {
	if c.Gemma4 != nil {
		return c.Gemma4.KVLayers // the last layers share earlier layers' K/V
	}
	n := c.Layers
	for _, r := range c.Recurrent {
		if r {
			n--
		}
	}
	return n
}

// kvLayerIndex returns, per layer, its index among the KV layers (-1 for a
// recurrent layer).
func (c *Config) kvLayerIndex() []int {
	idx := make([]int, c.Layers)
	k := 0
	for l := range idx {
		if l < len(c.Recurrent) && c.Recurrent[l] {
			idx[l] = -1
			continue
		}
		idx[l] = k
		k++
	}
	return idx
}

// StateConfig is the recurrent state one sequence carries between
// forward steps: a fixed-size block of float32s that every token rewrites.
type StateConfig struct {
	// Floats is the number of float32s of one sequence's state slot
	// (0: the model has no recurrent layers).
	Floats int
	// Layout names the slot's layout (layer kinds, sizes, element order)
	// so that two processes exchange a state only when they lay it out
	// alike; "" when Floats is 0.
	Layout string
}

// Window returns the attention window of layer l: SlidingWindow for a
// sliding-window layer, 0 (unbounded) otherwise.
func (c *Config) Window(l int) int {
	if c.SlidingWindow > 0 && l < len(c.SWALayers) && c.SWALayers[l] {
		return c.SlidingWindow
	}
	return 0
}

// AllWindowed reports whether every layer is a sliding-window layer, so no
// position older than SlidingWindow is ever read again.
func (c *Config) AllWindowed() bool {
	if c.SlidingWindow <= 0 {
		return false
	}
	for _, w := range c.SWALayers {
		if !w {
			return false
		}
	}
	return len(c.SWALayers) == c.Layers
}

// swaRopeDiffers reports whether sliding-window layers need their own RoPE
// table.
func (c *Config) swaRopeDiffers() bool {
	return c.Gemma4 == nil && c.SlidingWindow > 0 && (c.RopeBaseSWA != c.RopeBase || c.RopeScaleSWA != c.RopeScale)
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
	case "qwen2", "qwen3", "phi3", "gemma2", "gemma3", "gemma4", "qwen3moe", "qwen2moe", "qwen35", "qwen35moe", "gpt-oss":
		c.RopeStyle = RopeNeox
	default:
		return c, &UnsupportedArchError{Arch: arch}
	}
	c.Name, _ = md.String("general.name")
	if arch == "gemma4" {
		md = gemma4Meta{md} // per-layer arrays read as their largest element here
	}
	req := metaReq(md, arch)
	if err := readDims(md, arch, []dimKey{
		{"embedding_length", &c.Dim, dimMax},
		{"block_count", &c.Layers, layersMax},
		{"feed_forward_length", &c.FF, dimMax * 8},
		{"attention.head_count", &c.Heads, headsMax},
	}, &c.Heads, &c.KVHeads); err != nil {
		return c, err
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
	// RoPE scaling as llama.cpp reads it: the type defaults to "linear", the
	// factor (or the older rope.scale_linear) applies to linear and longrope
	// alike, and "none" forces scale 1. Llama 3.x's "llama3" scaling has no
	// type key: its converter folds it into the rope_freqs tensor.
	c.RopeScale = 1
	typ, ok := md.String(arch + ".rope.scaling.type")
	if !ok {
		typ = "linear"
	}
	f, ok := md.Float32(arch + ".rope.scaling.factor")
	if !ok {
		f, _ = md.Float32(arch + ".rope.scale_linear")
	}
	switch typ {
	case "none":
	case "linear", "longrope":
		if f != 0 {
			if !(f > 0) || math.IsInf(float64(f), 0) {
				return c, fmt.Errorf("model metadata: rope.scaling.factor %v must be a positive number", f)
			}
			c.RopeScale = 1 / f
		}
	case "yarn":
		if f != 0 {
			if !(f > 0) || math.IsInf(float64(f), 0) {
				return c, fmt.Errorf("model metadata: rope.scaling.factor %v must be a positive number", f)
			}
			c.RopeScale = 1 / f
		}
		c.Yarn = YarnConfig{ExtFactor: 1, BetaFast: 32, BetaSlow: 1}
	default:
		return c, fmt.Errorf("model metadata: rope scaling %q is not supported (supported: none, linear, longrope, yarn)", typ)
	}
	c.RopeAttnFactor = 1
	if v, ok := md.Float32(arch + ".rope.scaling.attn_factor"); ok {
		if !(v > 0) || math.IsInf(float64(v), 0) {
			return c, fmt.Errorf("model metadata: rope.scaling.attn_factor %v must be a positive number", v)
		}
		c.RopeAttnFactor = v
	}
	if c.Yarn.ExtFactor != 0 {
		c.RopeAttnFactor = yarnAttnFactor(c.RopeScale, c.RopeAttnFactor)
	}
	c.RopeOrigContext = c.Context
	if _, ok := md.Int(arch + ".rope.scaling.original_context_length"); ok {
		if err := req("rope.scaling.original_context_length", &c.RopeOrigContext, contextMax); err != nil {
			return c, err
		}
	}
	c.NormEps = 1e-5
	if v, ok := md.Float32(arch + ".attention.layer_norm_rms_epsilon"); ok {
		if !(v > 0 && v < 1) {
			return c, fmt.Errorf("model metadata: layer_norm_rms_epsilon %v is out of range (0,1)", v)
		}
		c.NormEps = v
	}
	if err := c.archFeatures(md, req); err != nil {
		return c, err
	}
	if err := c.moeFeatures(md, req); err != nil {
		return c, err
	}
	if err := c.gdnFeatures(md, req); err != nil {
		return c, err
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

// archFeatures sets the per-architecture fields, reading their keys the way
// llama.cpp's loader for that architecture does (defaults included).
func (c *Config) archFeatures(md Metadata, req func(string, *int, int) error) error {
	arch := c.Arch
	optFloat := func(key string, dst *float32) error {
		if v, ok := md.Float32(arch + "." + key); ok {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) || v < 0 {
				return fmt.Errorf("model metadata: %s.%s = %v must be a finite non-negative number", arch, key, v)
			}
			*dst = v
		}
		return nil
	}
	// swa reads the window and the layer pattern: with period n, layer l is
	// windowed when l%n < n-1 (the last layer of each period is global; a
	// period of 1 windows none).
	swa := func(defWindow, defPeriod int) error {
		c.SlidingWindow = defWindow
		if _, ok := md.Int(arch + ".attention.sliding_window"); ok {
			if err := req("attention.sliding_window", &c.SlidingWindow, contextMax); err != nil {
				return err
			}
		}
		// A period of 0 windows every layer, as llama.cpp's set_swa_pattern does.
		period := defPeriod
		if v, ok := md.Int(arch + ".attention.sliding_window_pattern"); ok {
			if v < 0 || v > layersMax {
				return fmt.Errorf("model metadata: %s.attention.sliding_window_pattern = %d is out of range 0..%d", arch, v, layersMax)
			}
			period = v
		}
		c.SWALayers = make([]bool, c.Layers)
		for l := range c.SWALayers {
			c.SWALayers[l] = period == 0 || l%period < period-1
		}
		return nil
	}
	// gemma's query scale: 1/sqrt(head dim), except the 27B models
	// (identified by their layer count, as llama.cpp does), which scale by
	// 1/sqrt(Dim/Heads).
	gemmaScale := func(layers27B int) float32 {
		if c.Layers == layers27B {
			return float32(1 / math.Sqrt(float64(c.Dim/c.Heads)))
		}
		return float32(1 / math.Sqrt(float64(c.HeadDim)))
	}
	switch arch {
	case "qwen3", "qwen3moe":
		c.QKNorm = true
	case "qwen35", "qwen35moe":
		c.QKNorm, c.AttnGate = true, true
	case "gpt-oss":
		if err := c.gptossFeatures(md, req, swa, optFloat); err != nil {
			return err
		}
	case "phi3":
		// llama.cpp disables Phi-3's sliding window (its converters do not
		// write the pattern), so Tandem ignores the key too.
		c.QueryScale = float32(1 / math.Sqrt(float64(c.HeadDim)))
	case "gemma2":
		c.PostNorms, c.Act, c.TiedOutput = true, ActGELU, true
		c.EmbedScale = float32(math.Sqrt(float64(c.Dim)))
		c.QueryScale = gemmaScale(46)
		c.AttnSoftcap, c.FinalSoftcap = 50, 30
		if err := optFloat("attn_logit_softcapping", &c.AttnSoftcap); err != nil {
			return err
		}
		if err := optFloat("final_logit_softcapping", &c.FinalSoftcap); err != nil {
			return err
		}
		if err := swa(4096, 2); err != nil {
			return err
		}
		c.RopeBaseSWA, c.RopeScaleSWA = c.RopeBase, c.RopeScale
		if err := optFloat("rope.freq_base_swa", &c.RopeBaseSWA); err != nil {
			return err
		}
	case "gemma4":
		if err := c.gemma4Features(md, req); err != nil {
			return err
		}
	case "gemma3":
		c.QKNorm, c.PostNorms, c.Act = true, true, ActGELU
		c.EmbedScale = float32(math.Sqrt(float64(c.Dim)))
		c.QueryScale = gemmaScale(62)
		if err := optFloat("final_logit_softcapping", &c.FinalSoftcap); err != nil {
			return err
		}
		if v, ok := md.Int(arch + ".attention.sliding_window"); ok && v > 0 {
			if err := swa(0, 6); err != nil {
				return err
			}
			c.RopeBaseSWA, c.RopeScaleSWA = 10000, 1
			if err := optFloat("rope.freq_base_swa", &c.RopeBaseSWA); err != nil {
				return err
			}
		}
	}
	if c.SlidingWindow > 0 && !(c.RopeBaseSWA > 0) {
		return fmt.Errorf("model metadata: %s.rope.freq_base_swa %v must be positive", arch, c.RopeBaseSWA)
	}
	return nil
}

// metaReq returns a reader of the integer {arch}.key into dst that refuses
// a missing key or a value outside 1..max.
func metaReq(md Metadata, arch string) func(key string, dst *int, max int) error {
	return func(key string, dst *int, max int) error {
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
}

// dimKey is one required dimension of an architecture's metadata.
type dimKey struct {
	key string
	dst *int
	max int
}

// readDims reads every key of keys (all required), then the KV head count
// into kvHeads: {arch}.attention.head_count_kv when present, else *heads.
func readDims(md Metadata, arch string, keys []dimKey, heads, kvHeads *int) error {
	req := metaReq(md, arch)
	for _, r := range keys {
		if err := req(r.key, r.dst, r.max); err != nil {
			return err
		}
	}
	*kvHeads = *heads
	if _, ok := md.Int(arch + ".attention.head_count_kv"); ok {
		return req("attention.head_count_kv", kvHeads, headsMax)
	}
	return nil
}
