package model

import (
	"math"
	"testing"
)

func TestExpf(t *testing.T) {
	worst := 0.0
	for i := 0; i <= 2_000_000; i++ {
		x := float32(-87.0 * float64(i) / 2_000_000)
		got := float64(expf(x))
		want := math.Exp(float64(x))
		rel := math.Abs(got-want) / want
		worst = max(worst, rel)
		if rel > 3e-7 {
			t.Fatalf("expf(%v) = %v, want %v (relative error %.3g)", x, got, want, rel)
		}
	}
	t.Logf("worst relative error %.3g", worst)
	if expf(-100) != 0 || expf(0) != 1 {
		t.Errorf("expf(-100) = %v, expf(0) = %v", expf(-100), expf(0))
	}
}
