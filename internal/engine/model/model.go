package model

import (
	"fmt"
	"unsafe"

	"tandem/internal/engine/gguf"
	"tandem/internal/engine/kernels"
	"tandem/internal/engine/tensor"
	"tandem/internal/engine/tokenizer"
)

// Linear is a weight matrix used as y = W·x: Out rows of In elements of Type,
// read in place from the model file.
type Linear struct {
	Name string
	Type tensor.Type
	In   int
	Out  int
	Data []byte
	// Panels is a Q8_0 matrix packed for the AVX512 panel kernel
	// (kernels.PackQ8_0), made at Load where the CPU runs it; nil
	// otherwise. Every product of the matrix then uses them.
	Panels []byte
}

// Layer holds one transformer block's weights.
type Layer struct {
	AttnNorm []float32
	// QKV is the fused Q|K|V projection (attn_qkv, phi3); when it is set
	// (QKV.Data != nil) Q, K and V are empty.
	QKV          Linear
	QKVBias      []float32 // attn_qkv.bias when present
	Q, K, V, O   Linear
	QBias, KBias []float32 // required in qwen2, optional elsewhere; nil when absent
	VBias        []float32
	QNorm, KNorm []float32 // per-head Q/K RMS norm weights (HeadDim); nil unless Config.QKNorm
	PostAttnNorm []float32 // post_attention_norm; nil unless Config.PostNorms
	FFNNorm      []float32
	// Gate and Up are the feed-forward projections; when Gate is empty
	// (Gate.Data == nil, phi3) Up is the fused gate|up matrix of 2·FF rows.
	Gate, Up, Down Linear
	PostFFNNorm    []float32 // post_ffw_norm; nil unless Config.PostNorms
	// Sinks are the per-query-head sink logits (attn_sinks, gpt-oss); nil
	// unless Config.AttnSinks.
	Sinks []float32
	// OBias is attn_output.bias (gpt-oss); nil when absent.
	OBias []float32
	// MoE is the layer's mixture of experts (moe.go), which replaces Gate,
	// Up and Down (left empty); nil in a dense layer.
	MoE *MoE
	// GDN is a recurrent layer's Gated DeltaNet (gdn.go), which replaces
	// the attention weights (left empty); nil in an attention layer.
	GDN *GDNLayer

	// g4 holds a gemma4 layer's other weights (gemma4.go); nil otherwise.
	g4 *gemma4Layer

	// qkvSpan and gateUpSpan are Q|K|V and Gate|Up as one matrix, when
	// the file stores the tensors back to back with one type (spanOf); a
	// multi-token step then runs each as one product.
	qkvSpan, gateUpSpan Linear
}

// Model is a loaded model: its configuration, tokenizer and weights. It is
// immutable after Load and safe for concurrent use by many Runners; it keeps
// the file mapped until Close.
type Model struct {
	Config    Config
	Tokenizer *tokenizer.Tokenizer
	File      *gguf.File

	Embed      Linear // token_embd: Vocab rows of Dim
	OutputNorm []float32
	Output     Linear // output, or token_embd when tied
	RopeFreqs  []float32
	Layers     []Layer
	// g4 holds gemma4's per-layer embedding weights (gemma4.go); nil
	// for other architectures.
	g4 *gemma4Model
}

// Load maps a GGUF file and checks that every tensor the architecture needs
// is present with the right shape and a supported type.
func Load(path string) (*Model, error) { return load(path, gguf.Open) }

// LoadInMemory is Load with the file read into process memory
// (gguf.OpenInMemory: transparent huge pages advised) instead of mapped:
// decode, which streams the active weights once a step, then takes fewer
// TLB misses, at the cost of reading the file at start and a private copy
// of it (processes loading one file no longer share its page cache).
// The model computes exactly what Load's does.
func LoadInMemory(path string) (*Model, error) { return load(path, gguf.OpenInMemory) }

func load(path string, open func(string) (*gguf.File, error)) (*Model, error) {
	f, err := open(path)
	if err != nil {
		return nil, fmt.Errorf("load model: %w", err)
	}
	m, err := FromFile(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("load model %s: %w", path, err)
	}
	return m, nil
}

// FromFile builds a Model over an open GGUF file, which it then owns.
func FromFile(f *gguf.File) (*Model, error) {
	cfg, err := ConfigFromMetadata(f)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizerOf(f)
	if err != nil {
		return nil, err
	}
	if tok.VocabSize() != cfg.Vocab {
		return nil, fmt.Errorf("tokenizer has %d tokens but the model expects %d", tok.VocabSize(), cfg.Vocab)
	}
	m := &Model{Config: cfg, Tokenizer: tok, File: f}
	l := loader{f: f, used: map[string]bool{}}
	if cfg.Gemma4 != nil {
		if err := m.loadGemma4(&l); err != nil {
			return nil, err
		}
		m.packPanels()
		return m, nil
	}
	c := cfg
	qDim, kvDim := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	m.Embed = l.linear("token_embd.weight", c.Dim, c.Vocab)
	m.OutputNorm = l.vector("output_norm.weight", c.Dim)
	if _, ok := f.Tensor("output.weight"); (ok || c.Arch == "gpt-oss") && !c.TiedOutput {
		m.Output = l.linear("output.weight", c.Dim, c.Vocab)
	} else {
		m.Output = m.Embed
	}
	// RoPE frequency factors, as llama.cpp picks them: rope_freqs (Llama
	// 3.x) when present, else Phi-3's long factors when the context exceeds
	// the original one and its short factors otherwise. Tandem runs a model
	// at its trained context, so the choice is made once here.
	factors := ""
	switch {
	case l.has("rope_freqs.weight"):
		factors = "rope_freqs.weight"
	case c.Context > c.RopeOrigContext && l.has("rope_factors_long.weight"):
		factors = "rope_factors_long.weight"
	case c.Context <= c.RopeOrigContext && l.has("rope_factors_short.weight"):
		factors = "rope_factors_short.weight"
	}
	if factors != "" {
		m.RopeFreqs = l.vector(factors, c.RopeDim/2)
	}
	m.Layers = make([]Layer, c.Layers)
	state := 0 // the next recurrent layer's offset in the state slot
	for i := range m.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		ly := &m.Layers[i]
		ly.AttnNorm = l.vector(p+"attn_norm.weight", c.Dim)
		qOut := qDim
		if c.AttnGate {
			qOut = 2 * qDim // per head: query, then gate
		}
		switch {
		case i < len(c.Recurrent) && c.Recurrent[i]:
			ly.GDN = l.gdnLayer(p, &c, state)
			state += c.GDN.LayerFloats()
		case l.has(p+"attn_qkv.weight") && !gdnArch(c.Arch):
			ly.QKV = l.linear(p+"attn_qkv.weight", c.Dim, qDim+2*kvDim)
			if l.has(p + "attn_qkv.bias") {
				ly.QKVBias = l.vector(p+"attn_qkv.bias", qDim+2*kvDim)
			}
		default:
			ly.Q = l.linear(p+"attn_q.weight", c.Dim, qOut)
			ly.K = l.linear(p+"attn_k.weight", c.Dim, kvDim)
			ly.V = l.linear(p+"attn_v.weight", c.Dim, kvDim)
			// Biases: qwen2 requires them, every other architecture may
			// have them (llama.cpp loads them when present).
			need := c.Arch == "qwen2" || c.Arch == "qwen2moe"
			if need || l.has(p+"attn_q.bias") {
				ly.QBias = l.vector(p+"attn_q.bias", qDim)
			}
			if need || l.has(p+"attn_k.bias") {
				ly.KBias = l.vector(p+"attn_k.bias", kvDim)
			}
			if need || l.has(p+"attn_v.bias") {
				ly.VBias = l.vector(p+"attn_v.bias", kvDim)
			}
		}
		if ly.GDN == nil {
			ly.O = l.linear(p+"attn_output.weight", qDim, c.Dim)
			if c.QKNorm {
				ly.QNorm = l.vector(p+"attn_q_norm.weight", c.HeadDim)
				ly.KNorm = l.vector(p+"attn_k_norm.weight", c.HeadDim)
			}
		}
		if c.PostNorms {
			ly.PostAttnNorm = l.vector(p+"post_attention_norm.weight", c.Dim)
			ly.PostFFNNorm = l.vector(p+"post_ffw_norm.weight", c.Dim)
		}
		if gdnArch(c.Arch) {
			// qwen35's "post-attention" norm is the feed-forward's input norm
			ly.FFNNorm = l.vector(p+"post_attention_norm.weight", c.Dim)
		} else if c.Arch == "gpt-oss" {
			l.gptossLayer(p, ly, &c)
		} else {
			ly.FFNNorm = l.vector(p+"ffn_norm.weight", c.Dim)
		}
		switch {
		case c.MoE.Experts > 0:
			ly.MoE = l.moe(p, &c)
		case c.Arch == "phi3":
			ly.Up = l.linear(p+"ffn_up.weight", c.Dim, 2*c.FF)
			ly.Down = l.linear(p+"ffn_down.weight", c.FF, c.Dim)
		default:
			ly.Gate = l.linear(p+"ffn_gate.weight", c.Dim, c.FF)
			ly.Up = l.linear(p+"ffn_up.weight", c.Dim, c.FF)
			ly.Down = l.linear(p+"ffn_down.weight", c.FF, c.Dim)
		}
	}
	// Like llama.cpp, refuse files with tensors the architecture does not
	// use, rather than run them without those weights. Phi-3's unchosen
	// RoPE factors are part of the architecture.
	l.used["rope_factors_long.weight"], l.used["rope_factors_short.weight"] = true, true
	// The multi-token-prediction blocks are part of the file, not of the
	// forward pass.
	for _, t := range f.Tensors {
		var b int
		if _, err := fmt.Sscanf(t.Name, "blk.%d.", &b); err == nil && b >= c.Layers && b < c.Layers+c.NextN {
			l.used[t.Name] = true
		}
	}
	if err := l.allUsed(c.Arch); err != nil {
		return nil, err
	}
	for i := range m.Layers {
		ly := &m.Layers[i]
		if ly.QKV.Data == nil && ly.GDN == nil && !c.AttnGate {
			ly.qkvSpan = spanOf(&ly.Q, &ly.K, &ly.V)
		}
		if ly.Gate.Data != nil {
			ly.gateUpSpan = spanOf(&ly.Gate, &ly.Up)
		}
	}
	m.packPanels()
	return m, nil
}

// packPanels packs every Q8_0 matrix the forward pass multiplies for the
// AVX512 panel kernel, when this CPU runs it (kernels.PanelsUsable): all
// of them or none, since the panel kernel rounds differently from the row
// kernels and a token's result must not depend on which path ran it. A
// span's parts share its panels where they start on a panel boundary.
// The embedding table keeps its rows (a lookup reads them); a tied output
// projection gets panels of its own. The file's pages of the packed
// matrices are then dropped from memory (gguf.File.DropPages), so the panels
// do not double the weights' resident memory.
func (m *Model) packPanels() {
	if !kernels.PanelsUsable() {
		return
	}
	embed := unsafe.SliceData(m.Embed.Data)
	pack := func(w *Linear) {
		if w.Type != tensor.Q8_0 || w.Data == nil || w.Panels != nil {
			return
		}
		w.Panels = kernels.PackQ8_0(w.Data, w.Out, w.In)
		if m.File != nil && unsafe.SliceData(w.Data) != embed {
			m.File.DropPages(w.Data) // read again only below AVX512
		}
	}
	share := func(span *Linear, parts ...*Linear) {
		if span.Type != tensor.Q8_0 || span.Data == nil {
			return
		}
		pack(span)
		lo := 0
		for _, w := range parts {
			w.Panels = kernels.PanelRows(span.Panels, span.In, lo, lo+w.Out, span.Out)
			lo += w.Out
		}
	}
	for i := range m.Layers {
		ly := &m.Layers[i]
		share(&ly.qkvSpan, &ly.Q, &ly.K, &ly.V)
		share(&ly.gateUpSpan, &ly.Gate, &ly.Up)
		for _, w := range []*Linear{&ly.QKV, &ly.Q, &ly.K, &ly.V, &ly.O, &ly.Gate, &ly.Up, &ly.Down} {
			pack(w)
		}
		if d := ly.GDN; d != nil {
			for _, w := range []*Linear{&d.QKV, &d.Z, &d.Beta, &d.Alpha, &d.Out} {
				pack(w)
			}
		}
	}
	pack(&m.Output)
}

// Close unmaps the model file. No Runner may be in use.
func (m *Model) Close() error { return m.File.Close() }

// loader collects the first error so FromFile reads straight through.
type loader struct {
	f    *gguf.File
	err  error
	used map[string]bool // tensors read
}

// allUsed returns the loader's first error, or an error naming a tensor of
// the file that no read used: like llama.cpp, Tandem refuses files with
// tensors the architecture does not use rather than run them without those
// weights.
func (l *loader) allUsed(arch string) error {
	if l.err != nil {
		return l.err
	}
	for _, t := range l.f.Tensors {
		if !l.used[t.Name] {
			return fmt.Errorf("tensor %s is not part of Tandem's %s architecture (a variant it does not run)", t.Name, arch)
		}
	}
	return nil
}

// has reports whether the file holds a tensor called name.
func (l *loader) has(name string) bool {
	_, ok := l.f.Tensor(name)
	return ok
}

func (l *loader) tensor(name string, dims ...int) *gguf.TensorInfo {
	if l.err != nil {
		return nil
	}
	t, ok := l.f.Tensor(name)
	if !ok {
		l.err = fmt.Errorf("tensor %s is missing", name)
		return nil
	}
	l.used[name] = true
	match := len(t.Dims) == len(dims)
	for i := 0; match && i < len(dims); i++ {
		match = t.Dims[i] == uint64(dims[i])
	}
	// A trailing dimension of 1 is allowed (a vector stored as [n, 1]).
	if !match && len(t.Dims) == len(dims)+1 && t.Dims[len(dims)] == 1 {
		match = true
		for i := range dims {
			match = match && t.Dims[i] == uint64(dims[i])
		}
	}
	if !match {
		l.err = fmt.Errorf("tensor %s has shape %v, want %v", name, t.Dims, dims)
		return nil
	}
	return t
}

func (l *loader) linear(name string, in, out int) Linear {
	t := l.tensor(name, in, out)
	if t == nil {
		return Linear{}
	}
	if !kernels.Supported(t.Type) {
		l.err = fmt.Errorf("tensor %s has type %s, which has no matmul kernel", name, t.Type)
		return Linear{}
	}
	return Linear{Name: name, Type: t.Type, In: in, Out: out, Data: t.Data}
}

// vector reads a 1-D tensor (norm weights, biases) into f32.
func (l *loader) vector(name string, n int) []float32 {
	t := l.tensor(name, n)
	if t == nil {
		return nil
	}
	v := make([]float32, n)
	if err := tensor.Dequantize(t.Type, t.Data, v); err != nil {
		l.err = fmt.Errorf("tensor %s: %w", name, err)
		return nil
	}
	return v
}

// Row returns the RowBytes-long bytes of row r.
func (w *Linear) Row(r int) []byte {
	rb := len(w.Data) / w.Out
	return w.Data[r*rb : (r+1)*rb]
}

// tokenizerOf builds the tokenizer a GGUF file's metadata describes.
func tokenizerOf(f *gguf.File) (*tokenizer.Tokenizer, error) {
	voc, err := tokenizer.VocabFromMetadata(f)
	if err != nil {
		return nil, err
	}
	return tokenizer.New(voc)
}
