package main

import (
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
}

func (f *engineFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.model, "model", "", "path of a GGUF model file")
	fs.IntVar(&f.threads, "threads", 0, "compute threads (0: all cores)")
	fs.StringVar(&f.kvType, "kv-type", "f16", "KV cache element type: f16 or f32")
	fs.IntVar(&f.pageTokens, "page-tokens", 16, "token positions per KV cache page")
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

// open loads the model and starts a runner on a new thread pool; the caller
// closes both through the returned function.
func (f *engineFlags) open() (*model.Runner, *kernels.Pool, func(), error) {
	if f.model == "" {
		return nil, nil, nil, fmt.Errorf("--model is required: give the path of a GGUF file (or make one with `tandem model synth`)")
	}
	m, err := model.Load(f.model)
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
