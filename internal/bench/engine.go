package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/model"
	"tandem/internal/engine/sample"
	"tandem/internal/engine/tensor"
)

// EngineOptions configures an engine benchmark.
type EngineOptions struct {
	PromptTokens int         // prompt length, prefilled in one step as llama.cpp's bench does
	GenTokens    int         // tokens decoded greedily after the prompt
	KVType       tensor.Type // KV cache element type
	PageTokens   int         // KV page size
	Seed         uint64      // picks the random prompt tokens
}

// EngineResult is what an engine benchmark measured.
type EngineResult struct {
	Model        string  `json:"model"`
	Threads      int     `json:"threads"`
	PromptTokens int     `json:"prompt_tokens"`
	GenTokens    int     `json:"gen_tokens"`
	PrefillS     float64 `json:"prefill_s"`
	DecodeS      float64 `json:"decode_s"`
	PrefillTokS  float64 `json:"prefill_tok_s"`
	DecodeTokS   float64 `json:"decode_tok_s"`
	// PrefillShares and DecodeShares say where each phase's forward time
	// went, from the runner's own counters.
	PrefillShares Shares `json:"prefill_time_shares"`
	DecodeShares  Shares `json:"decode_time_shares"`
}

// Shares splits a phase's forward time into matrix multiplications,
// attention and everything else (norms, RoPE, activations, embedding,
// sampling setup), as fractions summing to 1.
type Shares struct {
	MatMul    float64 `json:"matmul"`
	Attention float64 `json:"attention"`
	Other     float64 `json:"other"`
}

// sharesOf turns the runner's counters into Shares.
func sharesOf(t model.PhaseTimes) Shares {
	if t.Total <= 0 {
		return Shares{}
	}
	tot := float64(t.Total)
	s := Shares{MatMul: float64(t.MatMul) / tot, Attention: float64(t.Attention) / tot}
	s.Other = max(0, 1-s.MatMul-s.Attention)
	return s
}

// Engine prefills a random prompt and decodes greedily, timing each phase.
func Engine(ctx context.Context, r *model.Runner, threads int, o EngineOptions) (*EngineResult, error) {
	m := r.Model()
	total := o.PromptTokens + o.GenTokens
	if o.PromptTokens <= 0 || o.GenTokens < 0 {
		return nil, fmt.Errorf("bench: prompt tokens must be positive and gen tokens non-negative")
	}
	if total > m.Config.Context {
		return nil, fmt.Errorf("bench: %d prompt + %d generated tokens exceed the model's context of %d", o.PromptTokens, o.GenTokens, m.Config.Context)
	}
	pt := o.PageTokens
	if pt <= 0 {
		pt = 16
	}
	kv, err := kvcache.New(m.CacheConfig(pt, (total+pt-1)/pt, o.KVType))
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	pages, err := kv.Alloc(kv.Config().PagesFor(total))
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	rng := rand.New(rand.NewPCG(o.Seed, 1))
	prompt := make([]int32, o.PromptTokens)
	for i := range prompt {
		prompt[i] = int32(3 + rng.IntN(m.Config.Vocab-3)) // skip the usual special ids 0..2
	}
	res := &EngineResult{Model: m.Config.Name, Threads: threads, PromptTokens: o.PromptTokens, GenTokens: o.GenTokens}
	r.ResetTimes()
	start := time.Now()
	out, err := r.Forward(kv, []model.Seq{{Tokens: prompt, Pos: 0, Pages: pages}})
	if err != nil {
		return nil, fmt.Errorf("bench: prefill: %w", err)
	}
	res.PrefillS = time.Since(start).Seconds()
	res.PrefillShares = sharesOf(r.Times())
	r.ResetTimes()
	smp := sample.New(sample.Params{})
	logits := out[0]
	history := prompt
	start = time.Now()
	for i := range o.GenTokens {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		id, _ := smp.Sample(logits, history)
		history = append(history, id)
		out, err = r.Forward(kv, []model.Seq{{Tokens: []int32{id}, Pos: o.PromptTokens + i, Pages: pages}})
		if err != nil {
			return nil, fmt.Errorf("bench: decode: %w", err)
		}
		logits = out[0]
	}
	res.DecodeS = time.Since(start).Seconds()
	res.DecodeShares = sharesOf(r.Times())
	res.PrefillTokS = float64(o.PromptTokens) / res.PrefillS
	if o.GenTokens > 0 {
		res.DecodeTokS = float64(o.GenTokens) / res.DecodeS
	}
	return res, nil
}
