package model_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"tandem/internal/engine/kernels"
	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
)

// BenchmarkHybridSpeed times a hybrid model (qwen35) at
// $TANDEM_HYBRID_MODEL (skipped when unset) as llamacpp-bench.mjs times
// llama.cpp: a 512-token prefill of one sequence (its prompt ids
// 1000+(i·7919 mod 20000), reduced mod the vocabulary), then 16 greedy
// decode steps ($TANDEM_HYBRID_PD="P,D" changes the counts), at
// $TANDEM_HYBRID_THREADS threads (default 1 and 2). It
// reports prefill-tok/s and decode-tok/s of the last iteration (run it
// with -benchtime=1x, as scripts/qwen35-bench.sh does). With
// $TANDEM_HYBRID_MMAP=false the file is read into memory with huge pages
// (model.LoadInMemory, as --mmap=false does) instead of mapped.
func BenchmarkHybridSpeed(b *testing.B) {
	path := os.Getenv("TANDEM_HYBRID_MODEL")
	if path == "" {
		b.Skip("set TANDEM_HYBRID_MODEL to a qwen35 GGUF (tandem model synth --preset q35-2b)")
	}
	load := model.Load
	switch v := os.Getenv("TANDEM_HYBRID_MMAP"); v {
	case "", "true":
	case "false":
		load = model.LoadInMemory
	default:
		b.Fatalf("TANDEM_HYBRID_MMAP=%q: want true or false", v)
	}
	m, err := load(path)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	p, d := 512, 16
	if s := os.Getenv("TANDEM_HYBRID_PD"); s != "" {
		if _, err := fmt.Sscanf(s, "%d,%d", &p, &d); err != nil || p < 1 || d < 1 {
			b.Fatalf("TANDEM_HYBRID_PD=%q: want PROMPT,DECODE token counts", s)
		}
	}
	kv, err := kvcache.New(m.CacheConfig(16, (p+d)/16+1, tensor.F16))
	if err != nil {
		b.Fatal(err)
	}
	prompt := make([]int32, p)
	for i := range prompt {
		prompt[i] = int32((1000 + (i*7919)%20000) % m.Config.Vocab)
	}
	threads := []int{1, 2}
	if s := os.Getenv("TANDEM_HYBRID_THREADS"); s != "" {
		var n int
		if _, err := fmt.Sscan(s, &n); err != nil || n < 1 {
			b.Fatalf("TANDEM_HYBRID_THREADS=%q: want a positive number", s)
		}
		threads = []int{n}
	}
	for _, th := range threads {
		b.Run(fmt.Sprintf("threads=%d", th), func(b *testing.B) {
			pool := kernels.NewPool(th)
			defer pool.Close()
			r := model.NewRunner(m, pool)
			var prefill, decode time.Duration
			for b.Loop() {
				pages, err := kv.Alloc(kv.Config().PagesFor(p + d))
				if err != nil {
					b.Fatal(err)
				}
				state := make([]float32, m.StateSize())
				t0 := time.Now()
				out, err := r.Forward(kv, []model.Seq{{Tokens: prompt, Pages: pages, State: state}})
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				for i := range d {
					out, err = r.Forward(kv, []model.Seq{{Tokens: []int32{argmax(out[0])}, Pos: p + i, Pages: pages, State: state}})
					if err != nil {
						b.Fatal(err)
					}
				}
				prefill, decode = t1.Sub(t0), time.Since(t1)
				kv.Release(pages)
			}
			b.ReportMetric(float64(p)/prefill.Seconds(), "prefill-tok/s")
			b.ReportMetric(float64(d)/decode.Seconds(), "decode-tok/s")
			t := r.Times()
			b.ReportMetric(float64(t.Total-t.MatMul-t.Attention)/float64(t.Total), "other-frac")
		})
	}
}
