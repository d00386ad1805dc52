package tensor

import (
	"math"
	"math/rand/v2"
	"tandem/internal/testenv"
	"testing"
)

// The tests in this file use shared/testdata/quant/ggml-quant-vectors.gguf
// (skipped, saying so, where the shared data lacks it), made by ggml itself (the libraries node-llama-cpp
// 3.21.1 ships; scripts/quantvectors): for each type T below, T.q is
// ggml_quantize_chunk of src ([512, 8]: normal values, sparse and zero
// blocks, ties, largest magnitudes at and just below powers of two, tiny
// and large magnitudes down to subnormals), T.deq its to_float, rnd.T.q
// random blocks ([512, 16], sane scales; MXFP4's last row has the extreme
// exponents) and rnd.T.deq their to_float. They need no network and no C.

// newVectorTypes are the types of ggml-quant-vectors.gguf.
var newVectorTypes = []Type{MXFP4, IQ4_NL, IQ4_XS, Q3_K, Q2_K}

// ggmlVectorsRel is the vector file's path in the shared data folder.
const ggmlVectorsRel = "testdata/quant/ggml-quant-vectors.gguf"

func loadGGMLVectors(t *testing.T) *testGGUF {
	t.Helper()
	g, err := readTestGGUF(testenv.Shared(t, ggmlVectorsRel))
	if err != nil {
		t.Fatalf("readTestGGUF: %v", err)
	}
	return g
}

func TestDequantizeMatchesGGMLNewTypes(t *testing.T) {
	if n := dequantizeMatches(t, loadGGMLVectors(t), newVectorTypes); n != 2*len(newVectorTypes) {
		t.Errorf("checked %d tensors, want %d", n, 2*len(newVectorTypes))
	}
}

func TestQuantizeMatchesGGMLNewTypes(t *testing.T) {
	quantizeMatches(t, loadGGMLVectors(t), newVectorTypes)
}

// TestLog2FloorMatchesGlibc: log2f.up lists, for every power of two 2^k
// that glibc's log2f reaches from below, the smallest float x < 2^k with
// floorf(log2f(x)) = k (gen.c checked that every float from there to 2^k
// rounds up and no other float does). log2Floor must round up exactly
// there: at x, not at the float below it, and never elsewhere (the binary
// exponent, checked at each power of two and its neighbours).
func TestLog2FloorMatchesGlibc(t *testing.T) {
	g := loadGGMLVectors(t)
	ups, err := vectorTensor(t, g, "log2f.up").f32s()
	if err != nil {
		t.Fatal(err)
	}
	if len(ups) < 200 {
		t.Fatalf("log2f.up has %d entries; the file looks wrong", len(ups))
	}
	below := func(x float32) float32 { return math.Float32frombits(math.Float32bits(x) - 1) }
	exp := func(x float32) int32 {
		_, e := math.Frexp(float64(x))
		return int32(e - 1)
	}
	for _, x := range ups {
		if got, want := log2Floor(x), exp(x)+1; got != want {
			t.Errorf("log2Floor(%g = %#08x) = %d, glibc %d", x, math.Float32bits(x), got, want)
		}
		if got, want := log2Floor(below(x)), exp(x); got != want {
			t.Errorf("log2Floor(%g = %#08x) = %d, glibc %d", below(x), math.Float32bits(below(x)), got, want)
		}
	}
	for k := -149; k <= 127; k++ {
		p := float32(math.Ldexp(1, k))
		for _, x := range []float32{p, math.Nextafter32(p, float32(math.Inf(1)))} {
			if got := log2Floor(x); got != exp(x) {
				t.Errorf("log2Floor(2^%d, %#08x) = %d", k, math.Float32bits(x), got)
			}
		}
	}
}

// TestMXFP4TinyExponentWraps pins ggml's behaviour for blocks whose largest
// magnitude is below 2^-125: the exponent floor(log2)−2+127 is negative and
// C's conversion wraps it into a byte (ggml's own vectors cover 1e-40 and
// 1e-44; this names the rule).
func TestMXFP4TinyExponentWraps(t *testing.T) {
	x := make([]float32, QK)
	x[3] = float32(math.Ldexp(1, -130)) // floor(log2) = -130: e = -5 -> 251
	b := make([]byte, blockMXFP4)
	if err := Quantize(MXFP4, x, b); err != nil {
		t.Fatal(err)
	}
	if b[0] != 251 {
		t.Errorf("exponent byte %d, want 251 (ggml's wrapped -5)", b[0])
	}
	for i, q := range b[1:] {
		if q&0x7 != 0 || q>>4&0x7 != 0 {
			t.Errorf("qs[%d] = %#02x, want zeros (±0 nibbles)", i, q)
		}
	}
}

// bisectIQ4 is ggml's best_index_int8 as written there: bisection, then
// the nearer of the two neighbours (the upper one on a tie).
func bisectIQ4(x float32) uint8 {
	v := &KValuesIQ4NL
	if x <= float32(v[0]) {
		return 0
	}
	if x >= float32(v[15]) {
		return 15
	}
	lo, hi := 0, 15
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if x < float32(v[mid]) {
			hi = mid
		} else {
			lo = mid
		}
	}
	if x-float32(v[hi-1]) < float32(v[hi])-x {
		return uint8(hi - 1)
	}
	return uint8(hi)
}

// TestBestIndexIQ4MatchesBisection: the midpoint count equals ggml's
// bisection on every float within 2^16 ulps of each grid value and each
// midpoint, at ±0, ±Inf, the extremes, and a million random floats of
// every magnitude. (Run once over all 2^32 bit patterns but NaNs, too: no
// difference.)
func TestBestIndexIQ4MatchesBisection(t *testing.T) {
	check := func(x float32) {
		if got, want := bestIndexIQ4(x), bisectIQ4(x); got != want {
			t.Fatalf("bestIndexIQ4(%g = %#08x) = %d, bisection %d", x, math.Float32bits(x), got, want)
		}
	}
	var centres []float32
	for k, v := range KValuesIQ4NL {
		centres = append(centres, float32(v))
		if k < 15 {
			centres = append(centres, iq4Mids[k])
		}
	}
	for _, c := range centres {
		for d := -1 << 16; d <= 1<<16; d++ {
			check(math.Float32frombits(uint32(int64(math.Float32bits(c)) + int64(d))))
		}
	}
	for _, x := range []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32} {
		check(x)
	}
	r := rand.New(rand.NewPCG(7, 8))
	for range 1 << 20 {
		if x := math.Float32frombits(r.Uint32()); !math.IsNaN(float64(x)) {
			check(x)
		}
	}
}
