package synth

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"tandem/internal/engine/tensor"
)

// Config is the shape of a synthesized model.
type Config struct {
	// Name goes into general.name; empty means "tandem-synth".
	Name string
	// Arch is general.architecture: "llama" (the default when empty),
	// "qwen2", "qwen3", "phi3", "gemma2", "gemma3", or the mixtures of
	// experts "qwen3moe", "qwen2moe" and "gpt-oss" (see Archs, moe.go and
	// gptoss.go). Hyperparameter keys
	// are written under this prefix and tensors laid out as llama.cpp's
	// loader for that architecture expects.
	Arch string
	// Dim is the embedding width (llama.embedding_length).
	Dim int
	// Layers is the number of transformer blocks (llama.block_count).
	Layers int
	// Heads is the number of query heads; Dim must be a multiple of it.
	Heads int
	// KVHeads is the number of key/value heads; Heads must be a multiple of it.
	KVHeads int
	// FF is the feed-forward width (llama.feed_forward_length).
	FF int
	// Vocab is the size of the synthesized vocabulary. It is ignored when
	// Options.VocabFrom names a file: that file's token count is used.
	Vocab int
	// Context is the trained context length (llama.context_length).
	Context int
	// RopeBase is llama.rope.freq_base; 0 means 10000.
	RopeBase float32
	// NormEps is llama.attention.layer_norm_rms_epsilon; 0 means 1e-5.
	NormEps float32

	// Llama3Rope writes rope_freqs.weight with Llama 3.1's RoPE factors
	// (factor 8, low 1, high 4, original context 8192), computed from
	// RopeBase and the head dimension as llama.cpp's converter does (llama
	// and qwen3 only).
	Llama3Rope bool
	// Tied leaves output.weight out, so the output projection is token_embd
	// (always so for gemma2, whose llama.cpp loader has no output tensor).
	Tied bool
	// SlidingWindow, when positive, is written as {arch}.attention.sliding_window.
	// gemma2 and gemma3 window their local layers with it; llama.cpp ignores
	// the key for llama ("mistral"-style files) and phi3.
	SlidingWindow int
	// SlidingWindowPattern, when positive, is written as
	// {arch}.attention.sliding_window_pattern (gemma2 defaults to 2, gemma3
	// to 6: the last layer of each period is global).
	SlidingWindowPattern int
	// AttnSoftcap and FinalSoftcap, when positive, are written as
	// {arch}.attn_logit_softcapping and {arch}.final_logit_softcapping
	// (gemma2, gemma3; llama.cpp's gemma2 defaults are 50 and 30).
	AttnSoftcap, FinalSoftcap float32
	// RopeOrigContext, when positive, makes a phi3 file a LongRoPE one:
	// rope_factors_long and rope_factors_short tensors,
	// phi3.rope.scaling.original_context_length and the attention factor
	// sqrt(1 + ln(Context/RopeOrigContext)/ln(RopeOrigContext)).
	RopeOrigContext int
	// AttnGain, when positive, multiplies the attn_norm weights, which
	// scales Q, K and V and so the attention scores by its square. Random
	// weights otherwise give scores near 0, nearly uniform attention, and
	// outputs blind to positions (RoPE, windows); tests set it to make
	// those matter. A llama file with AttnGain gets jittered norms too.
	AttnGain float32
	// KeyLength, when positive, is the head dimension, written as
	// {arch}.attention.key_length and value_length, instead of Dim/Heads
	// (Qwen3 and Gemma have heads·head_dim != Dim).
	KeyLength int

	// Experts, ExpertsUsed and ExpertFF are a mixture-of-experts file's
	// expert count, experts used per token and expert feed-forward width
	// ({arch}.expert_count, expert_used_count, expert_feed_forward_length);
	// SharedFF is qwen2moe's shared expert width. Zero means 8, 2, FF/2
	// and FF for the MoE architectures; they must be zero for the others.
	Experts, ExpertsUsed, ExpertFF, SharedFF int
	// Gemma4 is gemma4's own shape (gemma4.go); zero for other archs.
	Gemma4 Gemma4Shape
	// Pooling, when positive, is written as {arch}.pooling_type (1 mean,
	// 2 cls, 3 last): a qwen3 file with 3 is a decoder embedding model as
	// Qwen3-Embedding is; WriteEncoder's files default to 1.
	Pooling int

	// The hybrid architectures qwen35 and qwen35moe (qwen35.go): RopeDims
	// is the rotated part of each head (rope.dimension_count; 0 means a
	// quarter of the head), SSMConv the convolution taps (0: 4),
	// SSMHeadDim the DeltaNet head length (0: the attention head's),
	// SSMKHeads and SSMVHeads its key and value heads (0: KVHeads and
	// Heads), FullAttnInterval the period of the full-attention layers (0:
	// 4, or Layers when fewer, so a file has at least one). They must be
	// zero for the other architectures.
	RopeDims, SSMConv, SSMHeadDim, SSMKHeads, SSMVHeads, FullAttnInterval int
	// NextN, for qwen35 and qwen35moe, appends that many multi-token-
	// prediction blocks ({arch}.nextn_predict_layers; block_count counts
	// them), written after every other tensor, as Qwen3.5's converter
	// exports them by default.
	NextN int
}

// Archs lists the architectures Write synthesizes.
var Archs = []string{"llama", "qwen2", "qwen3", "phi3", "gemma2", "gemma3", "gemma4", "qwen3moe", "qwen2moe", "qwen35", "qwen35moe", "gpt-oss"}

// Limits on Config, far above any preset; they keep a typo from asking for
// an absurd file and keep every size computation inside int range.
const (
	// DimMax bounds Dim and FF.
	DimMax = 1 << 16
	// LayersMax bounds Layers.
	LayersMax = 1 << 10
	// VocabMax bounds the synthesized vocabulary size.
	VocabMax = 1 << 20
	// ContextMax bounds Context.
	ContextMax = 1 << 24
	// VocabMin is the smallest synthesized vocabulary: <unk>, <s>, </s>, the
	// 256 byte tokens and "▁".
	VocabMin = 3 + 256 + 1
)

// presets are the shapes Preset knows, by name.
var presets = map[string]Config{
	// tiny: every matrix row is a multiple of 256, so all K-quants apply.
	"tiny": {Name: "tandem-synth-tiny", Dim: 256, Layers: 2, Heads: 4, KVHeads: 2, FF: 512, Vocab: 512, Context: 2048},
	// 110m: llama2.c's stories110M shape.
	"110m": {Name: "tandem-synth-110m", Dim: 768, Layers: 12, Heads: 12, KVHeads: 12, FF: 2048, Vocab: 32000, Context: 2048},
	// 1b: TinyLlama 1.1B's shape.
	"1b": {Name: "tandem-synth-1b", Dim: 2048, Layers: 22, Heads: 32, KVHeads: 4, FF: 5632, Vocab: 32000, Context: 2048},
	// a3b: Qwen3-30B-A3B's block (2048 wide, 32 query heads and 4 KV heads
	// of 128, 8 of the experts 768 wide used per token) with 64 experts and
	// 12 layers instead of 128 and 48: about 0.75B active parameters of
	// 3.9B, 2.2 GB as q4_k_m.
	"a3b": {Name: "tandem-synth-a3b", Arch: "qwen3moe", Dim: 2048, Layers: 12, Heads: 32, KVHeads: 4, KeyLength: 128, FF: 6144,
		Vocab: 32000, Context: 4096, Experts: 64, ExpertsUsed: 8, ExpertFF: 768},
	// q35-2b: Qwen3.5-2B's shape (24 layers, every fourth full attention
	// with 8 query and 2 KV heads of 256, a quarter of each rotated;
	// DeltaNet layers with 16 key and 16 value heads of 128; tied
	// embeddings) with a 32000-token vocabulary instead of 248320: about
	// 1.4B parameters.
	"q35-2b": {Name: "tandem-synth-q35-2b", Arch: "qwen35", Dim: 2048, Layers: 24, Heads: 8, KVHeads: 2, KeyLength: 256, FF: 6144,
		Vocab: 32000, Context: 4096, Tied: true, RopeDims: 64, SSMHeadDim: 128, SSMKHeads: 16, SSMVHeads: 16},
}

// Preset returns the Config named name: "tiny" (256 wide, 2 layers, GQA 2:1,
// 512-token vocabulary), "110m" (stories110M's shape), "1b" (TinyLlama
// 1.1B's shape), "a3b" (a qwen3moe of Qwen3-30B-A3B's block, scaled
// down), "q35-2b" (a qwen35 of Qwen3.5-2B's shape), the gemma4 presets
// g4e and g4a4b, or "oss20b" (a gpt-oss of gpt-oss-20b's block, scaled
// down; gptoss.go); all but the first three have an Arch. NormEps is set
// to llama.cpp's default, and RopeBase to 10000 where the preset has none.
func Preset(name string) (Config, error) {
	c, ok := presets[name]
	if !ok {
		c, ok = gemma4Presets[name]
	}
	if !ok {
		return Config{}, fmt.Errorf("unknown synth preset %q (want tiny, 110m, 1b, a3b, q35-2b, g4e, g4a4b or oss20b)", name)
	}
	if c.RopeBase == 0 {
		c.RopeBase = 10000
	}
	c.NormEps = 1e-5
	return c, nil
}

// withDefaults fills the zero-means-default fields.
func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = "tandem-synth"
	}
	if c.Arch == "" {
		c.Arch = "llama"
	}
	if c.Arch == "gemma2" {
		c.Tied = true
	}
	if c.RopeBase == 0 {
		c.RopeBase = 10000
	}
	if c.NormEps == 0 {
		c.NormEps = 1e-5
	}
	return c.gptossDefaults().moeDefaults().gdnDefaults().gemma4Defaults()
}

// HeadDim returns KeyLength when set, else Dim / Heads (0 when Heads is not
// positive).
func (c Config) HeadDim() int {
	if c.KeyLength > 0 {
		return c.KeyLength
	}
	if c.Heads <= 0 {
		return 0
	}
	return c.Dim / c.Heads
}

// check reports the first problem of a Config (after withDefaults) for
// matrices of the types types; vocab is the vocabulary size actually used.
func (c Config) check(types []tensor.Type, vocab int, synthVocab bool) error {
	for _, f := range []struct {
		name    string
		v, high int
	}{
		{"dim", c.Dim, DimMax},
		{"layers", c.Layers, LayersMax},
		{"heads", c.Heads, c.Dim},
		{"kv heads", c.KVHeads, c.Heads},
		{"feed-forward width", c.FF, DimMax},
		{"context", c.Context, ContextMax},
	} {
		if f.v < 1 || f.v > f.high {
			return fmt.Errorf("%s %d out of range: want 1..%d", f.name, f.v, max(f.high, 1))
		}
	}
	if c.KeyLength < 0 || c.KeyLength > DimMax || (c.KeyLength > 0 && c.Arch == "phi3") {
		return fmt.Errorf("key length %d: want 0..%d, and 0 for phi3 (its attention output is Dim wide)", c.KeyLength, DimMax)
	}
	if c.KeyLength == 0 && c.Dim%c.Heads != 0 {
		return fmt.Errorf("dim %d is not a multiple of heads %d", c.Dim, c.Heads)
	}
	if c.HeadDim()%2 != 0 {
		return fmt.Errorf("head dim %d (dim %d / heads %d) is odd; RoPE rotates pairs", c.HeadDim(), c.Dim, c.Heads)
	}
	if c.Heads%c.KVHeads != 0 {
		return fmt.Errorf("heads %d is not a multiple of kv heads %d", c.Heads, c.KVHeads)
	}
	if synthVocab && (vocab < VocabMin || vocab > VocabMax) {
		return fmt.Errorf("vocab %d out of range: want %d..%d", vocab, VocabMin, VocabMax)
	}
	if !(c.RopeBase > 0) || math.IsInf(float64(c.RopeBase), 0) {
		return fmt.Errorf("rope base %v must be a positive finite number", c.RopeBase)
	}
	if !(c.NormEps > 0 && c.NormEps < 1) {
		return fmt.Errorf("norm epsilon %v must be in (0, 1)", c.NormEps)
	}
	if c.Arch != "" && !slices.Contains(Archs, c.Arch) {
		return fmt.Errorf("architecture %q cannot be synthesized (want one of %s)", c.Arch, strings.Join(Archs, ", "))
	}
	if c.Llama3Rope && c.Arch != "llama" && c.Arch != "qwen3" {
		return fmt.Errorf("llama3 rope factors are for llama and qwen3 files, not %s", c.Arch)
	}
	if c.RopeOrigContext != 0 && (c.Arch != "phi3" || c.RopeOrigContext < 2 || c.RopeOrigContext > c.Context) {
		return fmt.Errorf("rope original context %d: only phi3 files take one, in 2..context (%d)", c.RopeOrigContext, c.Context)
	}
	if c.SlidingWindow < 0 || c.SlidingWindow > ContextMax || c.SlidingWindowPattern < 0 || c.SlidingWindowPattern > LayersMax {
		return fmt.Errorf("sliding window %d / pattern %d out of range", c.SlidingWindow, c.SlidingWindowPattern)
	}
	if c.AttnGain < 0 || c.AttnGain > 1000 {
		return fmt.Errorf("attention gain %v out of range 0..1000", c.AttnGain)
	}
	if c.AttnSoftcap < 0 || c.FinalSoftcap < 0 || math.IsInf(float64(c.AttnSoftcap), 0) || math.IsInf(float64(c.FinalSoftcap), 0) {
		return fmt.Errorf("soft-caps %v / %v must be finite and non-negative", c.AttnSoftcap, c.FinalSoftcap)
	}
	if err := c.checkGptOss(); err != nil {
		return err
	}
	if err := c.checkMoE(); err != nil {
		return err
	}
	if err := c.checkGDN(); err != nil {
		return err
	}
	if err := c.checkGemma4(types); err != nil {
		return err
	}
	if strings.ContainsRune(c.Name, 0) {
		return fmt.Errorf("name %q contains a NUL byte", c.Name)
	}
	// Every matrix row (ne0) is Dim, FF, the attention width or an expert
	// width long.
	for _, t := range types {
		for _, n := range append(append([]int{c.Dim, c.FF, c.Heads * c.HeadDim()}, c.moeRowWidths()...), c.gdnRowWidths()...) {
			if _, err := t.RowBytes(n); err != nil {
				return fmt.Errorf("type %s needs rows that are multiples of %d: %w", t, t.BlockSize(), err)
			}
		}
	}
	return nil
}
