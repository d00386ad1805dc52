package model_test

import (
	"fmt"
	"os"
	"syscall"
	"testing"

	"tandem/internal/engine/kernels"
	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
)

// BenchmarkPrefill runs a 512-token prefill of the model at
// $TANDEM_PREFILL_MODEL (default /tmp/kb/110m.gguf, the synthesized 110m
// Q8_0 benchmark model; skipped when absent) at 1 and 2 threads, warm (the
// scratch grown by a first step). Beside wall time it reports the process's
// CPU time per step (cpu-ms/op) and the pool rounds per step, so that a
// change to the forward pass's serial work or rounds shows through the
// noise of a shared machine.
func BenchmarkPrefill(b *testing.B) {
	path := os.Getenv("TANDEM_PREFILL_MODEL")
	if path == "" {
		path = "/tmp/kb/110m.gguf"
	}
	if _, err := os.Stat(path); err != nil {
		b.Skipf("no benchmark model at %s (set TANDEM_PREFILL_MODEL)", path)
	}
	m, err := model.Load(path)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	const n = 512
	kv, err := kvcache.New(m.CacheConfig(16, n/16, tensor.F16))
	if err != nil {
		b.Fatal(err)
	}
	pages, err := kv.Alloc(n / 16)
	if err != nil {
		b.Fatal(err)
	}
	prompt := make([]int32, n)
	for i := range prompt {
		prompt[i] = int32(3 + (i*7919)%(m.Config.Vocab-3))
	}
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			pool := kernels.NewPool(threads)
			defer pool.Close()
			r := model.NewRunner(m, pool)
			step := func() {
				if _, err := r.Forward(kv, []model.Seq{{Tokens: prompt, Pages: pages}}); err != nil {
					b.Fatal(err)
				}
			}
			step()
			r.ResetTimes()
			s0, c0 := pool.Stats(), processCPU()
			steps := 0
			for b.Loop() {
				step()
				steps++
			}
			s1, c1 := pool.Stats(), processCPU()
			t := r.Times()
			b.ReportMetric((c1-c0)/1e6/float64(steps), "cpu-ms/op")
			b.ReportMetric(float64(s1.Rounds-s0.Rounds)/float64(steps), "rounds/op")
			b.ReportMetric(float64(s1.Wakes-s0.Wakes)/float64(steps), "wakes/op")
			b.ReportMetric(float64(t.Total-t.MatMul-t.Attention)/1e6/float64(steps), "other-ms/op")
		})
	}
}

// processCPU returns the CPU time the process has used, in ns.
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano() + ru.Stime.Nano())
}
