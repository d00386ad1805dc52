//go:build !race

// The race detector instruments allocations and makes sync.Pool drop items
// at random, so allocation figures mean nothing under -race.

package model_test

import (
	"runtime"
	"testing"

	"tandem/internal/engine/kernels"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
	"tandem/internal/fixture"
)

// TestDecodeStepMemory: a decode step late in a long sequence allocates
// about as little as one early in it: attention scratch is reused, not
// allocated per step and layer in proportion to the context.
func TestDecodeStepMemory(t *testing.T) {
	m := fixture.Tiny(t, tensor.Q8_0, 7)
	pool := kernels.NewPool(2)
	defer pool.Close()
	r := model.NewRunner(m, pool)
	kv := newCache(t, m, 16, 128, tensor.F16)
	pages, err := kv.Alloc(128)
	if err != nil {
		t.Fatal(err)
	}
	prompt := make([]int32, 1500)
	for i := range prompt {
		prompt[i] = int32(3 + i%400)
	}
	if _, err := r.Forward(kv, []model.Seq{{Tokens: prompt, Pages: pages}}); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	const steps = 20
	pos := len(prompt)
	step := func() {
		if _, err := r.Forward(kv, []model.Seq{{Tokens: []int32{5}, Pos: pos, Pages: pages}}); err != nil {
			t.Fatal(err)
		}
		pos++
	}
	// A garbage collection empties the sync.Pools the scratch comes from,
	// and the next step allocates it again: collect first, warm the scratch
	// for this length, and keep the least of three runs, so a collection
	// that falls inside one run (CI saw 4110 bytes a step once, 2703
	// otherwise) is not counted as per-step allocation.
	runtime.GC()
	step()
	perStep := uint64(1 << 62)
	for range 3 {
		runtime.ReadMemStats(&before)
		for range steps {
			step()
		}
		runtime.ReadMemStats(&after)
		perStep = min(perStep, (after.TotalAlloc-before.TotalAlloc)/steps)
	}
	// 1500 positions of f32 scores and f16 weights per job chunk would be
	// ~9 KB per chunk per layer; what remains is closures and the result slice.
	if perStep > 4<<10 {
		t.Errorf("a decode step at position %d allocates %d bytes, want under 4 KiB", pos, perStep)
	}
	t.Logf("%d bytes per decode step at position ~%d", perStep, pos)
}
