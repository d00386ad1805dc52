package engine

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestCostModelRecovers: exact linear step costs over varied steps give
// back their coefficients, and a cost that falls with a feature (which no
// real step does) is fitted with that coefficient at zero, not negative.
func TestCostModelRecovers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	want := [costFeatures]float64{2e-3, 40e-6, 300e-6, 15e-9 * attnScale}
	var m costModel
	for range 200 {
		var f stepFeatures
		for range 1 + rng.IntN(8) {
			f.add(rng.IntN(2000), 1+rng.IntN(300))
		}
		x := f.vec()
		y := 0.0
		for i := range costFeatures {
			y += want[i] * x[i]
		}
		m.observe(f, time.Duration(y*float64(time.Second)))
	}
	for i := range costFeatures {
		if math.Abs(m.theta[i]-want[i]) > 0.01*want[i] {
			t.Errorf("coefficient %d = %g, want %g", i, m.theta[i], want[i])
		}
	}

	var neg costModel
	for i := range 50 {
		f := stepFeatures{tokens: 10 + i*10, seqs: 1 + i%5}
		// 5 ms + 20 µs/token − 100 µs/sequence
		y := 5e-3 + 20e-6*float64(f.tokens) - 100e-6*float64(f.seqs)
		neg.observe(f, time.Duration(y*float64(time.Second)))
	}
	for i, c := range neg.theta {
		if c < 0 {
			t.Errorf("coefficient %d = %g: the fit must not go negative", i, c)
		}
	}
	if neg.theta[2] != 0 {
		t.Errorf("per-sequence coefficient %g, want 0 (clamped)", neg.theta[2])
	}
}
