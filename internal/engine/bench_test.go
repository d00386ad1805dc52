package engine_test

import (
	"context"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"tandem/internal/engine"
	"tandem/internal/engine/grammar"
	"tandem/internal/engine/kernels"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
	"tandem/internal/fixture"
)

// BenchmarkEngineDecode measures the step loop end to end on the tiny
// model (one kernel thread): each op submits 4 sequences and drains them.
// plain: 128 tokens each, unconstrained; json-schema: the test schema
// (compact), greedy, each until its document is complete; regex: a regex
// that never has to end (its end token banned) for 128 tokens, so that
// every step of every sequence takes a mask. It reports tokens per second
// and heap allocations per generated token (the whole process: Submit,
// Handle.Next and the loop).
func BenchmarkEngineDecode(b *testing.B) {
	m := fixtureModel(b)
	schema, err := grammar.Compile([]byte(testSchema), grammar.Options{DisableAnyWhitespace: true})
	if err != nil {
		b.Fatal(err)
	}
	regex, err := grammar.CompileRegex(`[a-z ]*`, grammar.Options{})
	if err != nil {
		b.Fatal(err)
	}
	eos := m.Tokenizer.EOS()
	for _, bc := range []struct {
		name string
		req  func(i int, prompt []int32) engine.Request
	}{
		{"plain", func(i int, p []int32) engine.Request {
			return engine.Request{Prompt: p, MaxTokens: 128, IgnoreEOS: true}
		}},
		{"json-schema", func(i int, p []int32) engine.Request {
			return engine.Request{Prompt: p, MaxTokens: 400, Grammar: schema}
		}},
		{"regex", func(i int, p []int32) engine.Request {
			return engine.Request{Prompt: p, MaxTokens: 128, Grammar: regex, LogitBias: map[int32]float32{eos: -100}}
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			pool := kernels.NewPool(1)
			defer pool.Close()
			e, err := engine.New(model.NewRunner(m, pool), engine.Config{Pages: 512, KVType: tensor.F16}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			rng := rand.New(rand.NewPCG(1, 2))
			prompts := make([][]int32, 16)
			for i := range prompts {
				prompts[i] = randomPrompt(rng, m, 12)
			}
			tokens := 0
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			for i := 0; b.Loop(); i++ {
				hs := make([]*engine.Handle, 4)
				for j := range hs {
					h, err := e.Submit(context.Background(), bc.req(i, prompts[(4*i+j)%len(prompts)]))
					if err != nil {
						b.Fatal(err)
					}
					hs[j] = h
				}
				for _, h := range hs {
					for {
						u, err := h.Next(context.Background())
						if err != nil {
							break
						}
						tokens += len(u.Tokens)
						if u.Done && u.Err != nil {
							b.Fatalf("sequence failed: %v", u.Err)
						}
					}
				}
			}
			el := time.Since(start)
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(tokens)/el.Seconds(), "tokens/s")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(tokens), "allocs/token")
		})
	}
}

// fixtureModel is tinyModel for benchmarks.
func fixtureModel(b *testing.B) *model.Model {
	b.Helper()
	return fixture.Tiny(b, tensor.Q8_0, 7)
}
