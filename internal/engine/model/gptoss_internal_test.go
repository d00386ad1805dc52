package model

import (
	"math"
	"testing"
)

// TestSwiGLUOAI: the clamped activation against the formula in float64:
// the gate is capped at 7 from above only, the up value clamped to ±7.
func TestSwiGLUOAI(t *testing.T) {
	ref := func(g, u float64) float64 {
		x, y := math.Min(g, 7), math.Max(-7, math.Min(u, 7))
		return x / (1 + math.Exp(-1.702*x)) * (y + 1)
	}
	for _, c := range [][2]float32{{0.5, 0.25}, {-3, 2}, {9, 8}, {9, -9}, {-12, 20}, {7, 7}, {6.9, -6.9}} {
		g, u := []float32{c[0]}, []float32{c[1]}
		swigluOAI(g, u)
		if want := ref(float64(c[0]), float64(c[1])); math.Abs(float64(g[0])-want) > 1e-5*math.Max(1, math.Abs(want)) {
			t.Errorf("swiglu_oai(%v, %v) = %v, want %v", c[0], c[1], g[0], want)
		}
	}
}

// TestSoftmaxSink: the sink takes its share of the denominator: with
// scores s and sink k, weights e^s/(Σe^s + e^k), summing to less than 1.
func TestSoftmaxSink(t *testing.T) {
	x := []float32{1, 2, 0.5}
	softmaxSink(x, 3)
	den := math.Exp(1) + math.Exp(2) + math.Exp(0.5) + math.Exp(3)
	for i, s := range []float64{1, 2, 0.5} {
		if want := math.Exp(s) / den; math.Abs(float64(x[i])-want) > 1e-6 {
			t.Errorf("weight %d: %v, want %v", i, x[i], want)
		}
	}
}

// TestYarnTable: YaRN's cos/sin against the formula in float64 for a
// gpt-oss-like RoPE (64 dims, base 150000, factor 32, original context
// 4096): the low pairs extrapolate (angle p·θ_i), the high pairs
// interpolate (p·θ_i/32), the ramp mixes between, and the magnitude is
// 1+0.1·ln 32 times the (cancelled) attention factor.
func TestYarnTable(t *testing.T) {
	c := Config{RopeDim: 64, HeadDim: 64, RopeOrigContext: 4096, RopeScale: 1.0 / 32, Yarn: YarnConfig{ExtFactor: 1, BetaFast: 32, BetaSlow: 1}}
	c.RopeAttnFactor = yarnAttnFactor(c.RopeScale, 1)
	r := &Runner{m: &Model{Config: c}, tokPos: []int{0, 37}}
	tab := make([]float32, 2*64)
	r.ropeYarnTable(tab, 0, 2, 150000, c.RopeScale)
	low, high := yarnCorrDims(64, 4096, 150000, 32, 1)
	if low != 8 || high != 18 {
		t.Fatalf("correction dims %v, %v: want 8, 18", low, high)
	}
	mag := 1 + 0.1*math.Log(32)
	for i := range 32 {
		theta := 37 * math.Pow(150000, -2*float64(i)/64)
		ramp := 1 - math.Min(1, math.Max(0, (float64(i)-8)/10))
		th := theta/32*(1-ramp) + theta*ramp
		cs, sn := tab[64+2*i], tab[64+2*i+1]
		if math.Abs(float64(cs)-math.Cos(th)*mag) > 2e-4 || math.Abs(float64(sn)-math.Sin(th)*mag) > 2e-4 {
			t.Errorf("pair %d: cos/sin %v, %v, want %v, %v", i, cs, sn, math.Cos(th)*mag, math.Sin(th)*mag)
		}
	}
	if math.Abs(float64(tab[0])-mag) > 1e-6 || tab[1] != 0 {
		t.Errorf("position 0: %v, %v, want %v, 0", tab[0], tab[1], mag)
	}
}
