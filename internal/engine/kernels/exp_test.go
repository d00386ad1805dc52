package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExpShiftMatchesReference checks ExpShiftF32 against ExpF32 bit for
// bit at every level, over the whole softmax range, the cutoff, rounding
// boundaries of k, and lengths with tails.
func TestExpShiftMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	var xs []float32
	for range 5000 {
		xs = append(xs, -float32(rng.ExpFloat64()*10))
	}
	for k := -130; k <= 0; k++ { // values where x·log2e + 0.5 is near an integer
		v := (float32(k) - 0.5) / 1.44269504088896341
		xs = append(xs, v, math.Nextafter32(v, 0), math.Nextafter32(v, -100))
	}
	xs = append(xs, 0, -87.3, math.Nextafter32(-87.3, 0), math.Nextafter32(-87.3, -100), -1000, float32(math.Inf(-1)))
	const m = 1.5
	forEachLevel(t, func(t *testing.T) {
		for _, n := range []int{len(xs), 1, 7, 9, 64} {
			got := make([]float32, n)
			for i := range got {
				got[i] = xs[i] + m
			}
			in := append([]float32(nil), got...)
			ExpShiftF32(got, m)
			for i := range got {
				if want := ExpF32(in[i] - m); math.Float32bits(got[i]) != math.Float32bits(want) {
					t.Fatalf("n=%d: ExpShiftF32 at %v = %v (%#x), ExpF32 gives %v (%#x)", n, in[i]-m, got[i], math.Float32bits(got[i]), want, math.Float32bits(want))
				}
			}
		}
	})
}

// TestExpF32Accuracy bounds ExpF32's error against math.Exp on [-87, 0].
func TestExpF32Accuracy(t *testing.T) {
	worst := 0.0
	for x := float32(-87); x <= 0; x += 0.001 {
		want := math.Exp(float64(x))
		got := float64(ExpF32(x))
		if rel := math.Abs(got-want) / want; rel > worst {
			worst = rel
		}
	}
	if ExpF32(-100) != 0 || ExpF32(0) != 1 {
		t.Errorf("ExpF32(-100) = %v, ExpF32(0) = %v; want 0 and 1", ExpF32(-100), ExpF32(0))
	}
	if worst > 2.5e-7 { // 2 ulp of float32
		t.Fatalf("ExpF32 relative error up to %g on [-87, 0], want < 2.5e-7", worst)
	}
}

func BenchmarkExpShift(b *testing.B) {
	x := make([]float32, 512)
	benchLevels(b, func(b *testing.B) {
		for b.Loop() {
			for i := range x {
				x[i] = -float32(i) / 16
			}
			ExpShiftF32(x, 0)
		}
	})
}

// TestSwiGLUMatchesReference checks SwiGLU against swigluGo bit for bit at
// every level (large gates of both signs, the clamp, NaN, tails), and
// swigluGo against silu in float64.
func TestSwiGLUMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 10))
	var g, u []float32
	for range 3000 {
		g = append(g, float32(rng.NormFloat64()*4))
		u = append(u, float32(rng.NormFloat64()))
	}
	g = append(g, 0, 87, 88, 89, 200, -87, -88, -89, -200, -1e30, 1e30, float32(math.NaN()))
	u = append(u, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)
	ref := append([]float32(nil), g...)
	swigluGo(ref, u)
	for i, v := range g {
		want := float64(v) / (1 + math.Exp(-float64(v))) * float64(u[i])
		if d := math.Abs(float64(ref[i]) - want); !(d <= 1e-6*math.Abs(want)+1e-36) && !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) {
			t.Errorf("swigluGo(%v, %v) = %v, silu gives %v", v, u[i], ref[i], want)
		}
	}
	forEachLevel(t, func(t *testing.T) {
		for _, n := range []int{len(g), 1, 7, 9, 64} {
			got := append([]float32(nil), g[len(g)-n:]...)
			SwiGLU(got, u[len(u)-n:])
			for i := range got {
				if want := ref[len(g)-n+i]; math.Float32bits(got[i]) != math.Float32bits(want) && !(math.IsNaN(float64(got[i])) && math.IsNaN(float64(want))) {
					t.Fatalf("n=%d: SwiGLU(%v) = %v, reference %v", n, g[len(g)-n+i], got[i], want)
				}
			}
		}
	})
}
