package synth

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"

	"tandem/internal/engine/gguf"
	"tandem/internal/engine/tensor"
)

// Options says what Write produces.
type Options struct {
	// Config is the model shape (see Preset).
	Config Config
	// Type is the file type (see ParseFileType and matrixType): F32, F16,
	// Q8_0, Q4_0, Q4_1, Q5_0 or Q5_1 give every matrix that type; Q4_K,
	// Q3_K, Q2_K, IQ4_XS and IQ4_NL are llama.cpp's Q4_K_M, Q3_K_M, Q2_K,
	// IQ4_XS and IQ4_NL mixes, and MXFP4 MXFP4 feed-forward matrices with
	// Q8_0 elsewhere (see doc.go). Norms are always F32.
	Type tensor.Type
	// Pure gives every matrix the type Type, as llama-quantize --pure.
	Pure bool
	// VocabFrom, when set, is a GGUF file whose tokenizer.* keys are copied;
	// its token count replaces Config.Vocab.
	VocabFrom string
	// Seed decides every weight: same Options, same bytes.
	Seed uint64
}

// weightStd is the standard deviation of the synthesized weights, the usual
// initializer scale of Llama-style models.
const weightStd = 0.02

// tensorSpec is one tensor of the model: its name, shape (ne0 first), type,
// and whether it is a norm rather than random weights. A norm is all ones,
// or, with jitter, ones plus uniform noise of ±normJitter (the archs beyond
// llama, so a test notices a norm applied with the wrong weights). data,
// when set, is the tensor's F32 contents (RoPE factors).
type tensorSpec struct {
	name   string
	dims   []uint64
	typ    tensor.Type
	norm   bool
	jitter bool
	gain   float32 // norm weights are multiplied by it when nonzero
	data   []float32
	// bias: uniform random F32 values of ±biasScale (attention biases),
	// or of ±weightStd·√3 with small (a random weight vector).
	bias, small bool
	// lo, hi: uniform random F32 values in [lo, hi) when they differ
	// (the DeltaNet's convolution taps, dt and a).
	lo, hi float32
}

// biasScale is the half-width of the synthesized attention biases.
const biasScale = 0.5

// normJitter is the half-width of the noise on jittered norm weights.
const normJitter = 0.25

// layout returns the model's tensors in file order, named and shaped as
// llama.cpp's loader for c.Arch expects.
func layout(c Config, typ tensor.Type, pure bool, vocab int) []tensorSpec {
	if c.Arch == gptossArch {
		return gptossLayout(c, typ, pure, vocab)
	}
	if c.Arch == "gemma4" {
		return gemma4Layout(c, typ, pure, vocab)
	}
	hd := uint64(c.HeadDim())
	dim, ff, kv, qd := uint64(c.Dim), uint64(c.FF), uint64(c.KVHeads)*hd, uint64(c.Heads)*hd
	jitter := c.Arch != "llama" || c.AttnGain > 0
	layer := -1 // the block being laid out
	mat := func(name string, cat category, dims ...uint64) tensorSpec {
		t := matrixType(typ, pure, cat, layer, c)
		return tensorSpec{name: name, dims: dims, typ: t}
	}
	bias := func(name string, n uint64) tensorSpec {
		return tensorSpec{name: name, dims: []uint64{n}, typ: tensor.F32, bias: true}
	}
	vec := func(name string, n uint64) tensorSpec {
		return tensorSpec{name: name, dims: []uint64{n}, typ: tensor.F32, bias: true, small: true}
	}
	normN := func(name string, n uint64) tensorSpec {
		return tensorSpec{name: name, dims: []uint64{n}, typ: tensor.F32, norm: true, jitter: jitter}
	}
	norm := func(name string) tensorSpec { return normN(name, dim) }
	specs := []tensorSpec{mat("token_embd.weight", catTokenEmbd, dim, uint64(vocab))}
	if c.Llama3Rope {
		specs = append(specs, tensorSpec{name: "rope_freqs.weight", dims: []uint64{hd / 2}, typ: tensor.F32,
			data: llama3Factors(float64(c.RopeBase), int(hd))})
	}
	if c.RopeOrigContext > 0 {
		long, short := longRopeFactors(int(hd))
		specs = append(specs,
			tensorSpec{name: "rope_factors_long.weight", dims: []uint64{hd / 2}, typ: tensor.F32, data: long},
			tensorSpec{name: "rope_factors_short.weight", dims: []uint64{hd / 2}, typ: tensor.F32, data: short})
	}
	for l := range c.Layers {
		layer = l
		p := fmt.Sprintf("blk.%d.", l)
		an := norm(p + "attn_norm.weight")
		an.gain = c.AttnGain
		specs = append(specs, an)
		if gdnArch(c.Arch) {
			specs = append(specs, gdnAttention(c, l, p, mat, normN)...)
			specs = append(specs, norm(p+"post_attention_norm.weight"))
			if moeArch(c.Arch) {
				specs = append(specs, moeFFN(c, p, mat, vec)...)
			} else {
				specs = append(specs,
					mat(p+"ffn_gate.weight", catFFNGate, dim, ff),
					mat(p+"ffn_up.weight", catFFNUp, dim, ff),
					mat(p+"ffn_down.weight", catFFNDown, ff, dim))
			}
			continue
		}
		if c.Arch == "phi3" {
			specs = append(specs, mat(p+"attn_qkv.weight", catAttnV, dim, qd+2*kv))
		} else {
			specs = append(specs,
				mat(p+"attn_q.weight", catAttnQ, dim, qd),
				mat(p+"attn_k.weight", catAttnK, dim, kv),
				mat(p+"attn_v.weight", catAttnV, dim, kv))
		}
		if biasArch(c.Arch) {
			specs = append(specs, bias(p+"attn_q.bias", qd), bias(p+"attn_k.bias", kv), bias(p+"attn_v.bias", kv))
		}
		if qkNormArch(c.Arch) {
			specs = append(specs, normN(p+"attn_q_norm.weight", hd), normN(p+"attn_k_norm.weight", hd))
		}
		specs = append(specs, mat(p+"attn_output.weight", catAttnOut, qd, dim))
		gemma := c.Arch == "gemma2" || c.Arch == "gemma3"
		if gemma {
			specs = append(specs, norm(p+"post_attention_norm.weight"))
		}
		specs = append(specs, norm(p+"ffn_norm.weight"))
		switch {
		case moeArch(c.Arch):
			specs = append(specs, moeFFN(c, p, mat, vec)...)
		case c.Arch == "phi3":
			specs = append(specs, mat(p+"ffn_up.weight", catFFNUp, dim, 2*ff))
		default:
			specs = append(specs,
				mat(p+"ffn_gate.weight", catFFNGate, dim, ff),
				mat(p+"ffn_up.weight", catFFNUp, dim, ff))
		}
		if !moeArch(c.Arch) {
			specs = append(specs, mat(p+"ffn_down.weight", catFFNDown, ff, dim))
		}
		if gemma {
			specs = append(specs, norm(p+"post_ffw_norm.weight"))
		}
	}
	specs = append(specs, norm("output_norm.weight"))
	layer = -1
	if !c.Tied {
		specs = append(specs, mat("output.weight", catOutput, dim, uint64(vocab)))
	}
	// multi-token-prediction blocks last, so the other tensors' bytes do
	// not depend on them
	for l := c.Layers; l < c.Layers+c.NextN; l++ {
		layer = l
		specs = append(specs, mtpBlock(c, l, mat, normN, vec)...)
	}
	return specs
}

// llama3Factors are the rope_freqs values llama.cpp's converter writes for
// Llama 3.1's "llama3" RoPE scaling (factor 8, low_freq_factor 1,
// high_freq_factor 4, original_max_position_embeddings 8192).
func llama3Factors(base float64, headDim int) []float32 {
	const factor, low, high, old = 8.0, 1.0, 4.0, 8192.0
	lowWave, highWave := old/low, old/high
	out := make([]float32, headDim/2)
	for i := range out {
		freq := 1 / math.Pow(base, float64(2*i)/float64(headDim))
		wave := 2 * math.Pi / freq
		switch {
		case wave < highWave:
			out[i] = 1
		case wave > lowWave:
			out[i] = factor
		default:
			smooth := (old/wave - low) / (high - low)
			out[i] = float32(1 / ((1-smooth)/factor + smooth))
		}
	}
	return out
}

// longRopeFactors are Phi-3-style LongRoPE factors: short ones near 1 and
// long ones rising from 1 to about 40 over the rotated pairs, the shape of
// Phi-3-mini-128k's.
func longRopeFactors(headDim int) (long, short []float32) {
	n := headDim / 2
	long, short = make([]float32, n), make([]float32, n)
	for i := range n {
		x := float64(i) / float64(max(n-1, 1))
		long[i] = float32(1 + 39*x*x)
		short[i] = float32(1 + 0.1*x)
	}
	return long, short
}

// Write synthesizes a random-weight Llama model as described by o and writes
// it to path as GGUF v3 (through a temporary file, so a failed write leaves
// no partial model at path). Weights are streamed one chunk of rows at a
// time, so memory stays small whatever the model size.
func Write(path string, o Options) error {
	w, err := build(o, runtime.GOMAXPROCS(0))
	if err != nil {
		return err
	}
	if err := w.WriteFile(path); err != nil {
		return fmt.Errorf("write synthesized model %s: %w", path, err)
	}
	return nil
}

// build checks o and returns a Writer holding the metadata and the tensor
// generators, which run with the given number of worker goroutines when the
// Writer writes.
func build(o Options, workers int) (*gguf.Writer, error) {
	c := o.Config.withDefaults()
	ft, ok := fileTypes[o.Type]
	if !ok {
		return nil, fmt.Errorf("synthesize model: weight type %s not supported (want one of %s)", o.Type, strings.Join(FileTypeNames, ", "))
	}
	var tokKeys []gguf.KV
	vocabSize := c.Vocab
	if o.VocabFrom != "" {
		var err error
		if tokKeys, vocabSize, err = tokenizerKeysFrom(o.VocabFrom); err != nil {
			return nil, fmt.Errorf("synthesize model: %w", err)
		}
	}
	if err := c.check(weightTypes(o.Type, o.Pure), vocabSize, o.VocabFrom == ""); err != nil {
		return nil, fmt.Errorf("synthesize model: %w", err)
	}
	if o.VocabFrom == "" {
		tokKeys = synthVocab(vocabSize).keys()
	}

	w := gguf.NewWriter()
	a := c.Arch + "."
	w.SetString("general.architecture", c.Arch)
	w.SetString("general.name", c.Name)
	w.SetUint32("general.file_type", ft.ftype)
	w.SetUint32("general.quantization_version", 2)
	w.SetUint32(a+"vocab_size", uint32(vocabSize))
	w.SetUint32(a+"context_length", uint32(c.Context))
	w.SetUint32(a+"embedding_length", uint32(c.Dim))
	w.SetUint32(a+"block_count", uint32(c.Layers+c.NextN))
	w.SetUint32(a+"feed_forward_length", uint32(c.FF))
	w.SetUint32(a+"attention.head_count", uint32(c.Heads))
	w.SetUint32(a+"attention.head_count_kv", uint32(c.KVHeads))
	w.SetFloat32(a+"attention.layer_norm_rms_epsilon", c.NormEps)
	w.SetUint32(a+"rope.dimension_count", uint32(c.HeadDim()))
	if c.KeyLength > 0 {
		w.SetUint32(a+"attention.key_length", uint32(c.KeyLength))
		w.SetUint32(a+"attention.value_length", uint32(c.KeyLength))
	}
	w.SetFloat32(a+"rope.freq_base", c.RopeBase)
	if c.SlidingWindow > 0 {
		w.SetUint32(a+"attention.sliding_window", uint32(c.SlidingWindow))
	}
	if c.SlidingWindowPattern > 0 {
		w.SetUint32(a+"attention.sliding_window_pattern", uint32(c.SlidingWindowPattern))
	}
	if c.AttnSoftcap > 0 {
		w.SetFloat32(a+"attn_logit_softcapping", c.AttnSoftcap)
	}
	if c.FinalSoftcap > 0 {
		w.SetFloat32(a+"final_logit_softcapping", c.FinalSoftcap)
	}
	if c.RopeOrigContext > 0 {
		w.SetUint32(a+"rope.scaling.original_context_length", uint32(c.RopeOrigContext))
		scale := float64(c.Context) / float64(c.RopeOrigContext)
		attn := 1.0
		if scale > 1 {
			attn = math.Sqrt(1 + math.Log(scale)/math.Log(float64(c.RopeOrigContext)))
		}
		w.SetFloat32(a+"rope.scaling.attn_factor", float32(attn))
	}
	setMoEKeys(w, c)
	setGDNKeys(w, c)
	setGptOssKeys(w, c)
	if err := setGemma4Keys(w, c); err != nil {
		return nil, fmt.Errorf("synthesize model: %w", err)
	}
	if c.Pooling > 0 {
		w.SetUint32(a+"pooling_type", uint32(c.Pooling))
	}
	for _, kv := range tokKeys {
		w.Set(kv.Key, kv.Value)
	}

	for i, s := range layout(c, o.Type, o.Pure, vocabSize) {
		var err error
		switch {
		case s.data != nil:
			err = w.AddTensor(s.name, s.typ, s.dims, f32Bytes(s.data))
		case s.lo != s.hi:
			err = w.AddTensor(s.name, s.typ, s.dims, rangeValues(s, rand.NewPCG(o.Seed, mix(uint64(i)<<32|0xfffffffd))))
		case s.bias:
			scale := float32(biasScale)
			if s.small {
				scale = weightStd * 1.7320508075688772
			}
			if s.gain != 0 {
				scale = s.gain // a bias of its own width (gpt-oss)
			}
			n := uint64(1)
			for _, d := range s.dims {
				n *= d
			}
			err = w.AddTensor(s.name, s.typ, s.dims, biasValues(int(n), scale, rand.NewPCG(o.Seed, mix(uint64(i)<<32|0xfffffffe))))
		case s.norm && s.jitter:
			err = w.AddTensor(s.name, s.typ, s.dims, jittered(int(s.dims[0]), s.gain, rand.NewPCG(o.Seed, mix(uint64(i)<<32|0xffffffff))))
		case s.norm:
			err = w.AddTensor(s.name, s.typ, s.dims, ones(int(s.dims[0])))
		default:
			g := generator{spec: s, seed: o.Seed, index: uint64(i), workers: workers}
			err = w.AddTensorFunc(s.name, s.typ, s.dims, g.write)
		}
		if err != nil {
			return nil, fmt.Errorf("synthesize model: add tensor %s: %w", s.name, err)
		}
	}
	return w, nil
}

// f32Bytes returns v as little-endian float32s.
func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// jittered returns n little-endian float32s uniform in 1±normJitter,
// multiplied by gain when it is nonzero.
func jittered(n int, gain float32, p *rand.PCG) []byte {
	v := make([]float32, n)
	for i := range v {
		u := float64(p.Uint64()>>11) / (1 << 53)
		v[i] = float32(1 + normJitter*(2*u-1))
		if gain != 0 {
			v[i] *= gain
		}
	}
	return f32Bytes(v)
}

// rangeValues returns the little-endian float32s of s, uniform in
// [s.lo, s.hi).
func rangeValues(s tensorSpec, p *rand.PCG) []byte {
	n := 1
	for _, d := range s.dims {
		n *= int(d)
	}
	v := make([]float32, n)
	for i := range v {
		u := float64(p.Uint64()>>11) / (1 << 53)
		v[i] = s.lo + (s.hi-s.lo)*float32(u)
	}
	return f32Bytes(v)
}

// ones returns n little-endian float32 ones.
func ones(n int) []byte {
	b := make([]byte, 4*n)
	for i := 0; i < len(b); i += 4 {
		binary.LittleEndian.PutUint32(b[i:], math.Float32bits(1))
	}
	return b
}

// chunkElems is about how many weights one generator chunk holds. A chunk
// is a run of whole rows with its own PRNG stream, so the bytes depend only
// on (seed, tensor index, chunk index), never on the number of workers.
const chunkElems = 1 << 16

// generator produces one random weight matrix.
type generator struct {
	spec    tensorSpec
	seed    uint64
	index   uint64 // position of the tensor in the file
	workers int
}

// write streams the tensor: waves of chunks are generated and quantized in
// parallel, then written in order.
func (g generator) write(out io.Writer) error {
	ne0, rows := int(g.spec.dims[0]), 1
	for _, d := range g.spec.dims[1:] { // a 3-D tensor (experts) is rows of rows
		rows *= int(d)
	}
	rowBytes, err := g.spec.typ.RowBytes(ne0)
	if err != nil {
		return fmt.Errorf("generate %s: %w", g.spec.name, err)
	}
	rowsPerChunk := max(1, chunkElems/ne0)
	chunks := (rows + rowsPerChunk - 1) / rowsPerChunk
	workers := max(1, min(g.workers, chunks))
	wave := 4 * workers
	bufs := make([][]byte, min(wave, chunks))
	scratch := make([][]float32, workers)
	for i := range bufs {
		bufs[i] = make([]byte, rowsPerChunk*rowBytes)
	}
	if !directBlocks(g.spec.typ) {
		for i := range scratch {
			scratch[i] = make([]float32, rowsPerChunk*ne0)
		}
	}
	errs := make([]error, workers)
	for first := 0; first < chunks; first += wave {
		n := min(wave, chunks-first)
		var wg sync.WaitGroup
		for wk := range min(workers, n) {
			wg.Go(func() {
				for j := wk; j < n; j += workers {
					chunk := first + j
					r0 := chunk * rowsPerChunk
					nr := min(rowsPerChunk, rows-r0)
					p := g.stream(uint64(chunk))
					if directBlocks(g.spec.typ) {
						fillBlocks(g.spec.typ, bufs[j][:nr*rowBytes], p)
						continue
					}
					src := scratch[wk][:nr*ne0]
					fillUniform(src, p)
					if err := tensor.Quantize(g.spec.typ, src, bufs[j][:nr*rowBytes]); err != nil && errs[wk] == nil {
						errs[wk] = err
					}
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return fmt.Errorf("generate %s: %w", g.spec.name, err)
			}
		}
		for j := range n {
			nr := min(rowsPerChunk, rows-(first+j)*rowsPerChunk)
			if _, err := out.Write(bufs[j][:nr*rowBytes]); err != nil {
				return fmt.Errorf("write %s: %w", g.spec.name, err)
			}
		}
	}
	return nil
}

// stream returns the PRNG of one chunk of the tensor.
func (g generator) stream(chunk uint64) *rand.PCG {
	return rand.NewPCG(g.seed, mix(g.index<<32|chunk))
}

// fillUniform writes uniform weights with standard deviation weightStd into
// dst. A uniform on [-a, a] has variance a²/3, so a = weightStd·√3; each
// 64-bit draw gives four 16-bit values.
func fillUniform(dst []float32, p *rand.PCG) {
	const scale = weightStd * 1.7320508075688772 / 32768
	i := 0
	for ; i+4 <= len(dst); i += 4 {
		u := p.Uint64()
		dst[i] = (float32(int32(u&0xffff)-32768) + 0.5) * scale
		dst[i+1] = (float32(int32(u>>16&0xffff)-32768) + 0.5) * scale
		dst[i+2] = (float32(int32(u>>32&0xffff)-32768) + 0.5) * scale
		dst[i+3] = (float32(int32(u>>48)-32768) + 0.5) * scale
	}
	for u := p.Uint64(); i < len(dst); i++ {
		dst[i] = (float32(int32(u&0xffff)-32768) + 0.5) * scale
		u >>= 16
	}
}

// mix is splitmix64's finalizer: it spreads (tensor, chunk) keys over the
// PCG stream word so neighbouring chunks get unrelated streams.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
