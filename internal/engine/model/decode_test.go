//go:build !race

// The race detector instruments allocations and makes sync.Pool drop items
// at random, so allocation figures mean nothing under -race.

package model_test

import (
	"math"
	"testing"

	"tandem/internal/engine/kernels"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
	"tandem/internal/fixture"
	"tandem/internal/synth"
)

// decodeModel synthesizes the 110m shape (768 wide, FF 2048, 12 heads)
// with 2 layers and a 4096-token vocabulary: matrices big enough that a
// 2-thread pool shares them, small enough to write in a test.
func decodeModel(t *testing.T) *model.Model {
	t.Helper()
	cfg, err := synth.Preset("110m")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Layers, cfg.Vocab = 2, 4096
	return fixture.Synth(t, cfg, tensor.Q8_0, 3)
}

// TestDecodeStepRoundsAndAllocs counts what a one-token step costs besides
// the matrix-vector work on a 2-thread pool: pool rounds that involve the
// helpers (each one a wake-up or a barrier) and heap allocations. A layer
// needs five rounds (Q/K/V together, attention, O, gate/up together,
// down) and the output projection one; norms and SwiGLU of one token run
// on the caller without a closure. The logits equal those of a 1-thread pool bit for bit.
func TestDecodeStepRoundsAndAllocs(t *testing.T) {
	m := decodeModel(t)
	run := func(threads int) ([]float32, kernels.PoolStats, float64) {
		pool := kernels.NewPool(threads)
		defer pool.Close()
		r := model.NewRunner(m, pool)
		kv := newCache(t, m, 16, 8, tensor.F16)
		pages, err := kv.Alloc(8)
		if err != nil {
			t.Fatal(err)
		}
		prompt := []int32{1, 50, 300, 7, 9, 1000, 4000, 12}
		if _, err := r.Forward(kv, []model.Seq{{Tokens: prompt, Pages: pages}}); err != nil {
			t.Fatal(err)
		}
		pos := len(prompt)
		seqs := []model.Seq{{Tokens: []int32{0}, Pages: pages}}
		step := func() {
			seqs[0].Tokens[0], seqs[0].Pos = int32(5+pos), pos
			if _, err := r.Forward(kv, seqs); err != nil {
				t.Fatal(err)
			}
			pos++
		}
		step()
		before := pool.Stats()
		const steps = 10
		for range steps {
			step()
		}
		after := pool.Stats()
		d := kernels.PoolStats{Rounds: (after.Rounds - before.Rounds) / steps, Serial: (after.Serial - before.Serial) / steps,
			Wakes: (after.Wakes - before.Wakes) / steps}
		allocs := testing.AllocsPerRun(10, step)
		// the same step from a fresh position, for the comparison below
		kv2 := newCache(t, m, 16, 8, tensor.F16)
		pages2, _ := kv2.Alloc(8)
		if _, err := r.Forward(kv2, []model.Seq{{Tokens: prompt, Pages: pages2}}); err != nil {
			t.Fatal(err)
		}
		out, err := r.Forward(kv2, []model.Seq{{Tokens: []int32{77}, Pos: len(prompt), Pages: pages2}})
		if err != nil {
			t.Fatal(err)
		}
		return append([]float32(nil), out[0]...), d, allocs
	}
	one, _, _ := run(1)
	two, st, allocs := run(2)
	threaded := st.Rounds - st.Serial
	t.Logf("per decode step on 2 threads: %d rounds (%d threaded, %d serial), %d helper wake-ups, %.0f allocations",
		st.Rounds, threaded, st.Serial, st.Wakes, allocs)
	layers := uint64(len(m.Layers))
	if want := 5*layers + 1; threaded > want {
		t.Errorf("a decode step runs %d threaded pool rounds, want at most %d (5 per layer and the output)", threaded, want)
	}
	// Forward's result slice, and per layer the attention job's closure and
	// its copy of the Config (attention is not this test's subject).
	if want := 1 + 2*float64(layers); allocs > want {
		t.Errorf("a decode step allocates %.0f times, want at most %.0f", allocs, want)
	}
	for i := range one {
		if math.Float32bits(one[i]) != math.Float32bits(two[i]) {
			t.Fatalf("logit %d: %v on 1 thread, %v on 2", i, one[i], two[i])
		}
	}
}
