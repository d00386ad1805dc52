package embed

import (
	"fmt"
	"strings"

	"tandem/internal/engine/gguf"
	"tandem/internal/engine/kernels"
	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
	"tandem/internal/engine/tokenizer"
)

// Model is an opened embedding model: its runner, what it is, its
// tokenizer, and Close, which frees the runner's threads and the file.
type Model struct {
	Runner    Runner
	Info      Info
	Tokenizer *tokenizer.Tokenizer
	Close     func()
}

// IsEmbeddingFile reports whether the GGUF file at path is an embedding
// model: an encoder architecture, or a file that sets {arch}.pooling_type
// to a pooling (not none).
func IsEmbeddingFile(path string) (bool, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	arch := f.Architecture()
	if model.IsEncoder(arch) {
		return true, nil
	}
	p, err := model.PoolingFromMetadata(f, arch)
	if err != nil {
		return false, err
	}
	return p != model.PoolNone, nil
}

// Open loads the embedding model at path, its file mapped, on a pool of
// threads threads (0: all cores). maxTokens bounds the tokens of one batch
// (a decoder's KV cache is sized for it with F16 elements, llama.cpp's
// default). dims, when not empty, lists the Matryoshka lengths the model
// allows (else KnownDims by the model's name).
func Open(path string, threads, maxTokens, maxInputs int, dims []int) (*Model, error) {
	return open(path, false, threads, maxTokens, maxInputs, dims)
}

// OpenInMemory is Open with the file read into process memory instead of
// mapped (model.LoadInMemory, model.LoadEncoderInMemory: --mmap=false);
// the embeddings are the same.
func OpenInMemory(path string, threads, maxTokens, maxInputs int, dims []int) (*Model, error) {
	return open(path, true, threads, maxTokens, maxInputs, dims)
}

func open(path string, inMemory bool, threads, maxTokens, maxInputs int, dims []int) (*Model, error) {
	ok, err := IsEmbeddingFile(path)
	if err != nil {
		return nil, fmt.Errorf("open embedding model: %w", err)
	}
	if !ok {
		return nil, fmt.Errorf("open embedding model %s: it sets no pooling type ({arch}.pooling_type): %w", path, ErrNotEmbedding)
	}
	if maxTokens <= 0 {
		maxTokens = DefaultMaxBatchTokens
	}
	if maxInputs <= 0 {
		maxInputs = DefaultMaxBatchInputs
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	arch := f.Architecture()
	f.Close()
	var m *Model
	if model.IsEncoder(arch) {
		load := model.LoadEncoder
		if inMemory {
			load = model.LoadEncoderInMemory
		}
		m, err = openEncoder(load, path, threads)
	} else {
		load := model.Load
		if inMemory {
			load = model.LoadInMemory
		}
		m, err = openDecoder(load, path, threads, maxTokens, maxInputs)
	}
	if err != nil {
		return nil, err
	}
	m.Info.Dims = dims
	if len(dims) == 0 {
		m.Info.Dims = KnownDims(m.Info.Name, m.Info.Dim)
	}
	for _, d := range m.Info.Dims {
		if d < 1 || d > m.Info.Dim {
			m.Close()
			return nil, fmt.Errorf("open embedding model: truncation length %d is out of range 1..%d", d, m.Info.Dim)
		}
	}
	return m, nil
}

func openEncoder(load func(string) (*model.Encoder, error), path string, threads int) (*Model, error) {
	e, err := load(path)
	if err != nil {
		return nil, err
	}
	pool := kernels.NewPool(threads)
	c := e.Config
	return &Model{Runner: e.NewRunner(pool), Tokenizer: e.Tokenizer,
		Info:  Info{Name: c.Name, Arch: c.Arch, Dim: c.Dim, Context: c.Context, Vocab: c.Vocab, Pooling: c.Pooling},
		Close: func() { pool.Close(); e.Close() }}, nil
}

func openDecoder(load func(string) (*model.Model, error), path string, threads, maxTokens, maxInputs int) (*Model, error) {
	m, err := load(path)
	if err != nil {
		return nil, err
	}
	p, err := model.PoolingFromMetadata(m.File, m.Config.Arch)
	if err != nil {
		m.Close()
		return nil, err
	}
	const pageTokens = 16
	pages := maxTokens/pageTokens + maxInputs + 1
	kv, err := kvcache.New(m.CacheConfig(pageTokens, pages, tensor.F16))
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("open embedding model: kv cache of %d pages: %w", pages, err)
	}
	pool := kernels.NewPool(threads)
	c := m.Config
	d := &decoder{r: model.NewRunner(m, pool), kv: kv, pooling: p, dim: c.Dim}
	return &Model{Runner: d, Tokenizer: m.Tokenizer,
		Info:  Info{Name: c.Name, Arch: c.Arch, Dim: c.Dim, Context: c.Context, Vocab: c.Vocab, Pooling: p},
		Close: func() { pool.Close(); m.Close() }}, nil
}

// decoder runs a causal model's forward pass for embeddings: every input
// gets pages of a private KV cache for the step, the final-norm hidden
// states are pooled, and the pages go back.
type decoder struct {
	r       *model.Runner
	kv      *kvcache.Cache
	pooling model.Pooling
	dim     int
}

func (d *decoder) Embed(inputs [][]int32) ([][]float32, error) {
	seqs := make([]model.Seq, len(inputs))
	defer func() {
		for _, s := range seqs {
			if s.Pages != nil {
				_ = d.kv.Release(s.Pages) // pages this call allocated; a failure here is a bug the cache reports
			}
		}
	}()
	pc := d.kv.Config()
	for i, in := range inputs {
		pages, err := d.kv.Alloc(pc.PagesFor(len(in)))
		if err != nil {
			return nil, fmt.Errorf("kv pages for input %d (%d tokens): %w", i, len(in), err)
		}
		seqs[i] = model.Seq{Tokens: in, Pages: pages, AllLogits: d.pooling != model.PoolLast}
	}
	hs, err := d.r.ForwardHidden(d.kv, seqs)
	if err != nil {
		return nil, err
	}
	out := make([][]float32, len(inputs))
	for i, h := range hs {
		out[i] = make([]float32, d.dim)
		model.PoolRows(d.pooling, h, len(h)/d.dim, d.dim, out[i])
	}
	return out, nil
}

// KnownDims returns the Matryoshka lengths of models known to be trained
// for truncation, by general.name (nomic-embed-text-v1.5: 64..768;
// Qwen3-Embedding: 32 up to its width), clipped to dim; nil otherwise.
func KnownDims(name string, dim int) []int {
	n := strings.ToLower(name)
	var dims []int
	switch {
	case strings.Contains(n, "nomic-embed-text-v1.5"), strings.Contains(n, "nomic-embed-text-v2"):
		dims = []int{64, 128, 256, 512, 768}
	case strings.Contains(n, "qwen3-embedding"):
		for d := 32; d <= dim; d *= 2 {
			dims = append(dims, d)
		}
	}
	var out []int
	for _, d := range dims {
		if d <= dim {
			out = append(out, d)
		}
	}
	return out
}
