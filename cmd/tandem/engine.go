package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"tandem/internal/engine/kernels"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
)

// engineFlags are the flags every command that runs the engine shares.
type engineFlags struct {
	model      string
	threads    int
	kvType     string
	pageTokens int
	level      string
	mmap       bool
}

func (f *engineFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.model, "model", "", "GGUF model: a file path, or a hub reference (hf.co/ORG/REPO[:QUANT]) pulled on first use")
	fs.IntVar(&f.threads, "threads", 0, "compute threads (0: all cores)")
	fs.StringVar(&f.kvType, "kv-type", "f16", "KV cache element type: f16 or f32")
	fs.IntVar(&f.pageTokens, "page-tokens", 16, "token positions per KV cache page")
	fs.StringVar(&f.level, "kernel-level", "", "compute kernels: generic, avx2 or avx512 (default: the best this CPU has)")
	fs.BoolVar(&f.mmap, "mmap", true, "map the GGUF file (its pages shared with the page cache and other processes); false: read it into process memory "+
		"with transparent huge pages, which decode streams faster where TLB misses are dear, at the cost of a private copy and the read at start")
}

func (f *engineFlags) kvDType() (tensor.Type, error) {
	switch f.kvType {
	case "f16":
		return tensor.F16, nil
	case "f32":
		return tensor.F32, nil
	}
	return 0, fmt.Errorf("--kv-type %q is not supported: use f16 or f32", f.kvType)
}

// open loads the model (pulling a hub reference into the cache first, see
// resolveModel) and starts a runner on a new thread pool; the caller closes
// both through the returned function.
func (f *engineFlags) open(ctx context.Context) (*model.Runner, *kernels.Pool, func(), error) {
	if f.model == "" {
		return nil, nil, nil, fmt.Errorf("--model is required: give the path of a GGUF file or a hub reference such as hf.co/ORG/REPO:Q4_K_M (or make one with `tandem model synth`)")
	}
	if err := kernels.SetLevelByName(f.level); err != nil {
		return nil, nil, nil, fmt.Errorf("--kernel-level: %w", err)
	}
	path, err := resolveModel(ctx, f.model)
	if err != nil {
		return nil, nil, nil, err
	}
	load := model.Load
	if !f.mmap {
		load = model.LoadInMemory
	}
	m, err := load(path)
	if err != nil {
		return nil, nil, nil, err
	}
	pool := kernels.NewPool(f.threads)
	closeAll := func() {
		pool.Close()
		m.Close()
	}
	return model.NewRunner(m, pool), pool, closeAll, nil
}
