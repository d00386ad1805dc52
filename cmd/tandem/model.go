package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"tandem/internal/engine/gguf"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
	"tandem/internal/engine/tokenizer"
	"tandem/internal/synth"
)

func modelCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "model", Short: "Inspect and make GGUF model files"}
	cmd.AddCommand(modelInfoCmd(), modelSynthCmd())
	return cmd
}

func modelInfoCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "info MODEL",
		Short: "Print a model's architecture, shapes, tensor types, vocabulary and chat template",
		Long: `Info describes a GGUF file. MODEL is a path or a hub reference as --model takes
(ORG/REPO[:QUANT], hf.co/ORG/REPO[:QUANT], a file URL; pulled on first use; a
path that exists wins). --format json writes the same facts as one JSON object.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "text" && format != "json" {
				return fmt.Errorf("--format %q is not supported: use text or json", format)
			}
			log, err := loggerTo(cmd.ErrOrStderr(), "text")
			if err != nil {
				return err
			}
			path, err := resolveModelTo(cmd.Context(), args[0], cmd.ErrOrStderr(), log)
			if err != nil {
				return err
			}
			f, err := gguf.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			if format == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(modelInfo(args[0], path, f))
			}
			return printInfo(cmd.OutOrStdout(), path, f)
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output: text or json")
	return cmd
}

// infoJSON is `model info --format json`.
type infoJSON struct {
	Model        string    `json:"model"`
	Path         string    `json:"path"`
	GGUFVersion  uint32    `json:"gguf_version"`
	MetadataKeys int       `json:"metadata_keys"`
	Architecture string    `json:"architecture"`
	Supported    bool      `json:"supported"`
	Unsupported  string    `json:"unsupported,omitempty"`
	Name         string    `json:"name,omitempty"`
	Embedding    int       `json:"embedding,omitempty"`
	Layers       int       `json:"layers,omitempty"`
	Heads        int       `json:"heads,omitempty"`
	KVHeads      int       `json:"kv_heads,omitempty"`
	HeadDim      int       `json:"head_dim,omitempty"`
	FeedForward  int       `json:"feed_forward,omitempty"`
	Context      int       `json:"context,omitempty"`
	Rope         *infoRope `json:"rope,omitempty"`
	NormEps      float32   `json:"norm_eps,omitempty"`
	Features     string    `json:"features,omitempty"`
	// Hybrid models (qwen35): the layer mix and the per-sequence state.
	RecurrentLayers int            `json:"recurrent_layers,omitempty"`
	KVLayers        int            `json:"kv_layers,omitempty"`
	StateBytes      int            `json:"state_bytes,omitempty"`
	StateLayout     string         `json:"state_layout,omitempty"`
	Parameters      uint64         `json:"parameters"`
	TensorBytes     uint64         `json:"tensor_bytes"`
	TensorTypes     map[string]int `json:"tensor_types"`
	Vocabulary      *infoVocab     `json:"vocabulary,omitempty"`
	VocabError      string         `json:"vocabulary_error,omitempty"`
	ChatTemplate    string         `json:"chat_template"`
	Tensors         []infoTensor   `json:"tensors"`
}

type infoRope struct {
	Style string  `json:"style"`
	Dims  int     `json:"dims"`
	Base  float32 `json:"base"`
	Scale float32 `json:"scale"`
}

type infoVocab struct {
	Tokens       int    `json:"tokens"`
	Model        string `json:"model"`
	PreTokenizer string `json:"pre_tokenizer"`
	BOS          int32  `json:"bos"`
	EOS          int32  `json:"eos"`
	AddBOS       bool   `json:"add_bos"`
}

type infoTensor struct {
	Name string   `json:"name"`
	Type string   `json:"type"`
	Dims []uint64 `json:"dims"`
}

// modelInfo collects what printInfo prints.
func modelInfo(ref, path string, f *gguf.File) infoJSON {
	in := infoJSON{Model: ref, Path: path, GGUFVersion: f.Version, MetadataKeys: len(f.KV), Architecture: f.Architecture(),
		TensorTypes: map[string]int{}, Tensors: make([]infoTensor, 0, len(f.Tensors))}
	if cfg, err := model.ConfigFromMetadata(f); err != nil {
		in.Unsupported = err.Error()
	} else {
		in.Supported = true
		in.Name, in.Architecture, in.Embedding, in.Layers = cfg.Name, cfg.Arch, cfg.Dim, cfg.Layers
		in.Heads, in.KVHeads, in.HeadDim, in.FeedForward, in.Context = cfg.Heads, cfg.KVHeads, cfg.HeadDim, cfg.FF, cfg.Context
		in.Rope = &infoRope{cfg.RopeStyle.String(), cfg.RopeDim, cfg.RopeBase, cfg.RopeScale}
		in.NormEps, in.Features = cfg.NormEps, archFeatures(cfg)
		in.KVLayers = cfg.KVLayers()
		in.RecurrentLayers = cfg.Layers - in.KVLayers
		in.StateBytes, in.StateLayout = 4*cfg.State.Floats, cfg.State.Layout
	}
	for _, t := range f.Tensors {
		in.Parameters += t.NumElements()
		in.TensorBytes += t.Size
		in.TensorTypes[t.Type.String()]++
		in.Tensors = append(in.Tensors, infoTensor{t.Name, t.Type.String(), t.Dims})
	}
	if voc, err := tokenizer.VocabFromMetadata(f); err != nil {
		in.VocabError = err.Error()
	} else {
		pre := voc.Pre
		if pre == "" {
			pre = "default"
		}
		in.Vocabulary = &infoVocab{len(voc.Tokens), voc.Model, pre, voc.BOS, voc.EOS, voc.AddBOS}
		in.ChatTemplate = voc.ChatTemplate
	}
	return in
}

func printInfo(w io.Writer, path string, f *gguf.File) error {
	fmt.Fprintf(w, "file          %s (GGUF v%d, %d tensors, %d metadata keys)\n", path, f.Version, len(f.Tensors), len(f.KV))
	if model.IsEncoder(f.Architecture()) {
		printEncoderInfo(w, f)
	} else if cfg, err := model.ConfigFromMetadata(f); err != nil {
		// Still describe the file: vocabulary-only and foreign files are
		// worth inspecting too.
		fmt.Fprintf(w, "architecture  %s (tandem cannot run it: %v)\n", f.Architecture(), err)
	} else {
		fmt.Fprintf(w, "name          %s\n", cfg.Name)
		fmt.Fprintf(w, "architecture  %s\n", cfg.Arch)
		fmt.Fprintf(w, "embedding     %d\n", cfg.Dim)
		fmt.Fprintf(w, "layers        %d\n", cfg.Layers)
		fmt.Fprintf(w, "heads         %d (kv %d, head dim %d)\n", cfg.Heads, cfg.KVHeads, cfg.HeadDim)
		fmt.Fprintf(w, "feed forward  %d\n", cfg.FF)
		fmt.Fprintf(w, "context       %d\n", cfg.Context)
		fmt.Fprintf(w, "rope          %s, %d dims, base %g, scale %g\n", cfg.RopeStyle, cfg.RopeDim, cfg.RopeBase, cfg.RopeScale)
		fmt.Fprintf(w, "norm eps      %g\n", cfg.NormEps)
		if f := archFeatures(cfg); f != "" {
			fmt.Fprintf(w, "features      %s\n", f)
		}
		if mc := cfg.MoE; mc.Experts > 0 {
			norm := ""
			if mc.NormWeights {
				norm = ", weights renormalized over the chosen"
			}
			shared := ""
			if mc.SharedFF > 0 {
				shared = fmt.Sprintf(", shared expert width %d", mc.SharedFF)
			}
			fmt.Fprintf(w, "experts       %d, %d used per token, width %d, %s gating%s%s\n", mc.Experts, mc.Used, mc.FF, mc.Gating, norm, shared)
		}
		if cfg.State.Floats > 0 {
			printHybrid(w, cfg)
		}
		ap, ab := model.ActiveWeights(f, cfg)
		fmt.Fprintf(w, "per token     %d active parameters, %.1f MiB of weights read (one token's forward pass, KV cache aside)\n", ap, float64(ab)/(1<<20))
		if p, err := model.PoolingFromMetadata(f, cfg.Arch); err != nil || p != model.PoolNone {
			fmt.Fprintf(w, "pooling       %s (an embedding model: tandem serve answers /v1/embeddings)%s\n", p, errSuffix(err))
		}
	}
	var params, bytes uint64
	counts := map[tensor.Type]int{}
	for _, t := range f.Tensors {
		params += t.NumElements()
		bytes += t.Size
		counts[t.Type]++
	}
	types := make([]string, 0, len(counts))
	for t, n := range counts {
		types = append(types, fmt.Sprintf("%s x%d", t, n))
	}
	sort.Strings(types)
	fmt.Fprintf(w, "parameters    %d (%.1f MiB of tensor data)\n", params, float64(bytes)/(1<<20))
	fmt.Fprintf(w, "tensor types  %s\n", strings.Join(types, ", "))
	if voc, err := tokenizer.VocabFromMetadata(f); err != nil {
		fmt.Fprintf(w, "vocabulary    (unreadable: %v)\n", err)
	} else {
		pre := voc.Pre
		if pre == "" {
			pre = "default"
		}
		fmt.Fprintf(w, "vocabulary    %d tokens, %s tokenizer, pre-tokenizer %s, bos %d, eos %d, add bos %v\n",
			len(voc.Tokens), voc.Model, pre, voc.BOS, voc.EOS, voc.AddBOS)
		if voc.ChatTemplate == "" {
			fmt.Fprintf(w, "chat template (none)\n")
		} else {
			fmt.Fprintf(w, "chat template\n%s\n", voc.ChatTemplate)
		}
	}
	fmt.Fprintln(w, "tensors")
	for _, t := range f.Tensors {
		fmt.Fprintf(w, "  %-28s %-6s %v\n", t.Name, t.Type, t.Dims)
	}
	return nil
}

func modelSynthCmd() *cobra.Command {
	var (
		preset, typ, vocabFrom, out string
		seed                        uint64
		context                     int
		arch                        string
		layers, window, pattern     int
		keyLength                   int
		experts, used, expFF, shFF  int
		origContext                 int
		llama3Rope, tied, pure      bool
		attnCap, finalCap, gain     float32
		ropeBase                    float32
		pooling                     string
		ropeDims, interval          int
		ssmConv, ssmHead            int
		ssmKHeads, ssmVHeads        int
		nextN                       int
	)
	cmd := &cobra.Command{
		Use:   "synth --preset tiny|110m|1b|a3b|q35-2b|g4e|g4a4b|oss20b --type f16|q8_0|q4_0|q4_1|q5_0|q5_1|q4_k_m|q3_k_m|q2_k|iq4_xs|iq4_nl|mxfp4 [--pure] [--arch llama|qwen2|qwen3|phi3|gemma2|gemma3|gemma4|qwen3moe|qwen2moe|qwen35|qwen35moe|gpt-oss|nomic-bert|bert] [--experts N --experts-used K] [--pooling mean|cls|last] -o OUT",
		Short: "Write a random-weight GGUF of a model architecture (a fixture for tests and benchmarks; llama.cpp loads it too)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("-o is required: the path of the GGUF file to write")
			}
			cfg, err := synth.Preset(preset)
			if err != nil {
				return err
			}
			if context > 0 {
				cfg.Context = context
			}
			if layers > 0 {
				cfg.Layers = layers
			}
			// flags left at zero keep the preset's values
			for _, f := range []struct {
				dst *int
				v   int
			}{{&cfg.KeyLength, keyLength}, {&cfg.Experts, experts}, {&cfg.ExpertsUsed, used}, {&cfg.ExpertFF, expFF}, {&cfg.SharedFF, shFF},
				{&cfg.RopeDims, ropeDims}, {&cfg.FullAttnInterval, interval}, {&cfg.SSMConv, ssmConv}, {&cfg.SSMHeadDim, ssmHead},
				{&cfg.SSMKHeads, ssmKHeads}, {&cfg.SSMVHeads, ssmVHeads}, {&cfg.NextN, nextN}} {
				if f.v != 0 {
					*f.dst = f.v
				}
			}
			if cfg.Arch == "" || cmd.Flags().Changed("arch") {
				cfg.Arch = arch
			}
			cfg.Llama3Rope, cfg.Tied = llama3Rope, tied
			cfg.RopeOrigContext = origContext
			cfg.AttnSoftcap, cfg.AttnGain = attnCap, gain
			if window > 0 || pattern > 0 || finalCap > 0 { // zero keeps the preset's (gemma4's set them)
				cfg.SlidingWindow, cfg.SlidingWindowPattern, cfg.FinalSoftcap = max(window, 0), pattern, finalCap
			}
			if ropeBase > 0 {
				cfg.RopeBase = ropeBase
			}
			t, err := synth.ParseFileType(typ)
			if err != nil {
				return err
			}
			if cfg.Pooling, err = parsePooling(pooling); err != nil {
				return err
			}
			write := synth.Write
			if slices.Contains(synth.EncoderArchs, arch) {
				write = synth.WriteEncoder
			}
			if err := write(out, synth.Options{Config: cfg, Type: t, Pure: pure, VocabFrom: vocabFrom, Seed: seed}); err != nil {
				return err
			}
			mix := typ
			if pure {
				mix += ", pure"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (%s %s, %s)\n", out, cfg.Arch, preset, mix)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&preset, "preset", "tiny", "model shape: tiny, 110m, 1b, a3b (a scaled-down Qwen3-30B-A3B, arch qwen3moe), q35-2b (Qwen3.5-2B's shape, arch qwen35), g4e (a tiny Gemma 4 E2B-like gemma4: per-layer embeddings, shared KV), g4a4b (a tiny Gemma 4 26B-A4B-like gemma4 mixture of experts) or oss20b (gpt-oss-20b's block with 4 layers, arch gpt-oss)")
	fs.IntVar(&interval, "full-attention-interval", 0, "qwen35, qwen35moe: every Nth layer is full attention, the others Gated DeltaNet (0: 4, or the layer count when fewer)")
	fs.IntVar(&ropeDims, "rope-dims", 0, "qwen35, qwen35moe: rotated dimensions per attention head (0: a quarter of the head)")
	fs.IntVar(&ssmConv, "ssm-conv", 0, "qwen35, qwen35moe: DeltaNet convolution taps (0: 4)")
	fs.IntVar(&ssmHead, "ssm-head-dim", 0, "qwen35, qwen35moe: DeltaNet head length (0: the attention head's)")
	fs.IntVar(&ssmKHeads, "ssm-k-heads", 0, "qwen35, qwen35moe: DeltaNet query/key heads (0: the KV heads)")
	fs.IntVar(&ssmVHeads, "ssm-v-heads", 0, "qwen35, qwen35moe: DeltaNet value heads (0: the query heads)")
	fs.IntVar(&nextN, "nextn", 0, "qwen35, qwen35moe: append N multi-token-prediction blocks (nextn_predict_layers), which Tandem and llama.cpp's main pass skip")
	fs.StringVar(&typ, "type", "q8_0", "file type: "+strings.Join(synth.FileTypeNames, ", ")+
		" (q4_k/q4_k_m, q3_k/q3_k_m, q2_k, iq4_xs and iq4_nl are llama.cpp's mixes of those names; mxfp4 puts MXFP4 on the feed-forward matrices and Q8_0 elsewhere)")
	fs.BoolVar(&pure, "pure", false, "every matrix gets the --type itself, no mix (llama-quantize --pure)")
	fs.StringVar(&vocabFrom, "vocab-from", "", "copy the tokenizer of this GGUF file, or convert this Hugging Face tokenizer.json (default: a synthesized SentencePiece vocabulary)")
	fs.StringVarP(&out, "output", "o", "", "file to write")
	fs.Uint64Var(&seed, "seed", 1, "weight seed")
	fs.IntVar(&context, "context", 0, "context length written into the model (0: the preset's, 2048)")
	fs.StringVar(&arch, "arch", "llama", "architecture: "+strings.Join(append(slices.Clone(synth.Archs), synth.EncoderArchs...), ", ")+" (nomic-bert and bert are embedding encoders with a WordPiece vocabulary)")
	fs.StringVar(&pooling, "pooling", "", "write {arch}.pooling_type: mean, cls or last (an embedding model; qwen3 with last is Qwen3-Embedding's kind; encoders default to mean)")
	fs.IntVar(&layers, "layers", 0, "number of blocks (0: the preset's)")
	fs.IntVar(&keyLength, "head-dim", 0, "head dimension, written as attention.key_length/value_length (0: dim/heads)")
	fs.BoolVar(&llama3Rope, "llama3-rope", false, "write Llama 3.1's rope_freqs factors (llama, qwen3)")
	fs.BoolVar(&tied, "tied", false, "no output.weight: the output projection is token_embd (always for gemma2)")
	fs.IntVar(&window, "sliding-window", 0, "write {arch}.attention.sliding_window (gemma2, gemma3 window their local layers, gpt-oss its even layers (0: 128); llama.cpp ignores it for llama and phi3)")
	fs.IntVar(&pattern, "sliding-window-pattern", 0, "write {arch}.attention.sliding_window_pattern (0: the arch's default, gemma2 2, gemma3 6)")
	fs.IntVar(&origContext, "rope-orig-context", 0, "phi3: write LongRoPE factors and this original context length")
	fs.Float32Var(&attnCap, "attn-softcap", 0, "write {arch}.attn_logit_softcapping (0: leave it out)")
	fs.Float32Var(&ropeBase, "rope-base", 0, "RoPE base frequency (0: 10000; Llama 3.x uses 500000)")
	fs.Float32Var(&gain, "attn-gain", 0, "multiply the attn_norm weights, scaling attention scores by its square (0: leave them)")
	fs.Float32Var(&finalCap, "final-softcap", 0, "write {arch}.final_logit_softcapping (0: leave it out)")
	fs.IntVar(&experts, "experts", 0, "qwen3moe, qwen2moe, qwen35moe, gpt-oss, gemma4: number of experts (0: 8; gemma4: none, a dense file)")
	fs.IntVar(&used, "experts-used", 0, "qwen3moe, qwen2moe, qwen35moe, gpt-oss, gemma4: experts used per token (0: 2; gpt-oss 4)")
	fs.IntVar(&expFF, "expert-ff", 0, "qwen3moe, qwen2moe, qwen35moe, gpt-oss: expert feed-forward width (0: half the preset's)")
	fs.IntVar(&shFF, "shared-ff", 0, "qwen2moe: shared expert feed-forward width (0: the preset's)")
	return cmd
}

// printHybrid prints a hybrid model's layer mix and per-sequence state.
func printHybrid(w io.Writer, c model.Config) {
	var mix []byte
	for _, r := range c.Recurrent {
		if r {
			mix = append(mix, 'D')
		} else {
			mix = append(mix, 'A')
		}
	}
	kv := c.KVLayers()
	g := c.GDN
	mtp := ""
	if c.NextN > 0 {
		mtp = fmt.Sprintf(" (and %d multi-token-prediction blocks, not run)", c.NextN)
	}
	fmt.Fprintf(w, "layer mix     %d Gated DeltaNet (D) + %d full attention (A): %s%s\n", c.Layers-kv, kv, mix, mtp)
	fmt.Fprintf(w, "deltanet      conv %d taps over %d channels, %d key heads, %d value heads of %d\n", g.Conv, g.Channels(), g.KHeads, g.VHeads, g.HeadDim)
	fmt.Fprintf(w, "kv cache      %d of %d layers (%d bytes per token at F16)\n", kv, c.Layers, kv*2*c.KVHeads*c.HeadDim*2)
	fmt.Fprintf(w, "state         %d bytes per sequence (%.2f MiB; %d per DeltaNet layer: conv %d, recurrent %d)\n", 4*c.State.Floats,
		float64(4*c.State.Floats)/(1<<20), 4*g.LayerFloats(), 4*g.ConvFloats(), 4*g.RecurrentFloats())
	fmt.Fprintf(w, "state layout  %s\n", c.State.Layout)
}

// archFeatures describes the non-Llama parts of a model's block in one line.
func archFeatures(c model.Config) string {
	var f []string
	if c.Yarn.ExtFactor != 0 {
		f = append(f, fmt.Sprintf("yarn rope (factor %g, original context %d, attn factor %g)", 1/c.RopeScale, c.RopeOrigContext, c.RopeAttnFactor))
	} else if c.RopeAttnFactor != 1 {
		f = append(f, fmt.Sprintf("rope attn factor %g", c.RopeAttnFactor))
	}
	if c.AttnSinks {
		f = append(f, "attention sinks")
	}
	if c.QKNorm {
		f = append(f, "q/k norm")
	}
	if c.AttnGate {
		f = append(f, "gated attention")
	}
	if s := c.RopeSections; s != [4]int{} {
		f = append(f, fmt.Sprintf("interleaved multi-axis rope sections %v", s))
	}
	if c.PostNorms {
		f = append(f, "post norms")
	}
	if c.Act != model.ActSiLU {
		f = append(f, c.Act.String())
	}
	if c.EmbedScale != 0 {
		f = append(f, fmt.Sprintf("embeddings x%g", c.EmbedScale))
	}
	if c.AttnSoftcap != 0 {
		f = append(f, fmt.Sprintf("attention soft-cap %g", c.AttnSoftcap))
	}
	if c.FinalSoftcap != 0 {
		f = append(f, fmt.Sprintf("final soft-cap %g", c.FinalSoftcap))
	}
	if c.SlidingWindow > 0 {
		n := 0
		for _, w := range c.SWALayers {
			if w {
				n++
			}
		}
		f = append(f, fmt.Sprintf("sliding window %d on %d of %d layers (rope base %g there)", c.SlidingWindow, n, c.Layers, c.RopeBaseSWA))
	}
	if g := c.Gemma4; g != nil {
		f = append(f, fmt.Sprintf("windowed layers' head dim %d (rope %d dims), kv heads per layer %v", g.HeadDimSWA, g.RopeDimSWA, g.KVHeads))
		if g.KVLayers < c.Layers {
			f = append(f, fmt.Sprintf("K/V kept by layers 0-%d, shared by the last %d", g.KVLayers-1, c.Layers-g.KVLayers))
		}
		if g.PerLayer > 0 {
			f = append(f, fmt.Sprintf("per-layer embeddings of %d", g.PerLayer))
		}
	}
	return strings.Join(f, ", ")
}

// parsePooling maps --pooling to {arch}.pooling_type (0: leave it out).
func parsePooling(s string) (int, error) {
	switch s {
	case "":
		return 0, nil
	case "mean":
		return 1, nil
	case "cls":
		return 2, nil
	case "last":
		return 3, nil
	}
	return 0, fmt.Errorf("--pooling %q: want mean, cls or last", s)
}
