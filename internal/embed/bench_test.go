//go:build unix

package embed

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"tandem/internal/engine/tensor"
	"tandem/internal/synth"
)

// BenchmarkEmbed measures the service's throughput on a nomic-bert of
// nomic-embed-text's width and depth (768 wide, 12 layers: synth preset
// 110m, F16) at a batch of 1 and of 32 inputs of 28 tokens: inputs/s of
// wall time, and CPU milliseconds per input (user+sys of the process,
// which holds on a loaded machine where wall time does not).
// TANDEM_EMBED_BENCH_MODEL names another GGUF file to use instead, and
// TANDEM_EMBED_BENCH_THREADS the compute threads (default: all cores).
func BenchmarkEmbed(b *testing.B) {
	path := os.Getenv("TANDEM_EMBED_BENCH_MODEL")
	if path == "" {
		cfg, err := synth.Preset("110m")
		if err != nil {
			b.Fatal(err)
		}
		cfg.Arch, cfg.RopeBase = "nomic-bert", 1000
		path = filepath.Join(b.TempDir(), "nomic-110m.gguf")
		if err := synth.WriteEncoder(path, synth.Options{Config: cfg, Type: tensor.F16, Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
	threads, _ := strconv.Atoi(os.Getenv("TANDEM_EMBED_BENCH_THREADS"))
	m, err := Open(path, threads, 0, 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	s := New(m.Runner, m.Info, Config{})
	defer s.Close()
	in := m.Tokenizer.Encode("Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her dog.", true, false)
	for _, batch := range []int{1, 32} {
		b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) {
			ins := make([][]int32, batch)
			for i := range ins {
				ins[i] = in
			}
			cpu0 := cpuTime()
			t0 := time.Now()
			for b.Loop() {
				if _, err := s.Embed(context.Background(), ins); err != nil {
					b.Fatal(err)
				}
			}
			n := float64(b.N * batch)
			b.ReportMetric(n/time.Since(t0).Seconds(), "inputs/s")
			b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/n, "cpu-ms/input")
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
