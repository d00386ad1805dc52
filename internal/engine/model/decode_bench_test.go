package model_test

import (
	"fmt"
	"os"
	"testing"

	"tandem/internal/engine/gguf"
	"tandem/internal/engine/kernels"
	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
)

// BenchmarkDecode runs one-token decode steps of the model at
// $TANDEM_DECODE_MODEL (default /tmp/tandem-bench/a3b-q4_k_m.gguf, the
// synthesized a3b q4_k_m that scripts/moe-bench.sh writes; skipped when absent) after a 64-token prompt, at
// 1 and 2 threads, the file mapped as Load maps it ("mmap") and read into
// memory as LoadInMemory reads it ("memory"). Beside tok/s it reports the bytes of active weights
// streamed per second (model.ActiveWeights per token).
func BenchmarkDecode(b *testing.B) {
	path := os.Getenv("TANDEM_DECODE_MODEL")
	if path == "" {
		path = "/tmp/tandem-bench/a3b-q4_k_m.gguf"
	}
	if _, err := os.Stat(path); err != nil {
		b.Skipf("no benchmark model at %s (set TANDEM_DECODE_MODEL)", path)
	}
	for _, how := range []string{"mmap", "memory"} {
		open := gguf.Open
		if how == "memory" {
			open = gguf.OpenInMemory
		}
		f, err := open(path)
		if err != nil {
			b.Fatal(err)
		}
		m, err := model.FromFile(f)
		if err != nil {
			b.Fatal(err)
		}
		_, bytes := model.ActiveWeights(m.File, m.Config)
		const n, steps = 64, 64
		kv, err := kvcache.New(m.CacheConfig(16, (n+steps)/16, tensor.F16))
		if err != nil {
			b.Fatal(err)
		}
		pages, err := kv.Alloc((n + steps) / 16)
		if err != nil {
			b.Fatal(err)
		}
		prompt := make([]int32, n)
		for i := range prompt {
			prompt[i] = int32(3 + (i*7919)%(m.Config.Vocab-3))
		}
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/threads=%d", how, threads), func(b *testing.B) {
				pool := kernels.NewPool(threads)
				defer pool.Close()
				r := model.NewRunner(m, pool)
				if _, err := r.Forward(kv, []model.Seq{{Tokens: prompt, Pages: pages}}); err != nil {
					b.Fatal(err)
				}
				pos := n
				for b.Loop() {
					if _, err := r.Forward(kv, []model.Seq{{Tokens: []int32{int32(3 + pos)}, Pos: pos, Pages: pages}}); err != nil {
						b.Fatal(err)
					}
					if pos++; pos == n+steps {
						pos = n
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
				b.ReportMetric(float64(bytes)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
		m.Close()
	}
}
