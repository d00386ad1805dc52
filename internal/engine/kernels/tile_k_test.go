package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"tandem/internal/engine/tensor"
)

// kTileTypes are the weight types that may have eight-token K-quant tiles.
var kTileTypes = []tensor.Type{tensor.Q4_K, tensor.Q5_K, tensor.Q6_K}

// checkTile8 runs the level's eight-token kernel for wt over the nrows
// rows of w (nb blocks or super-blocks each) and eight activation rows a
// (of wt's vec dot type), prepared as MatMul prepares them at that level,
// and checks every output against the level's vecDot bit for bit and
// against the float64 reference within closeTo's bound, and that nothing
// past the rows is written.
func checkTile8(t *testing.T, name string, wt tensor.Type, w []byte, nrows, nb int, a []byte) {
	t.Helper()
	ks := active.Load()
	vt := VecDotType(wt)
	n := nb * wt.BlockSize()
	wrb, _ := wt.RowBytes(n)
	arb, _ := vt.RowBytes(n)
	size := prep8Bytes(vt, nb)
	if size == 0 {
		t.Fatalf("%s: no eight-token tile data for %d blocks", wt, nb)
	}
	prep := make([]byte, size)
	prepareTile8At(ks.signedQ8Tile8, vt, a, arb, nb, prep)
	// ystride > nrows with guard values, so a write to a wrong row or
	// token shows.
	ys := nrows + 3
	y := make([]float32, 8*ys)
	for i := range y {
		y[i] = -7
	}
	ks.dot8[wt](w[:nrows*wrb], wrb, nrows, prep, nb, y, ys)
	for tk := 0; tk < 8; tk++ {
		for r := 0; r < ys; r++ {
			got := y[tk*ys+r]
			if r >= nrows {
				if got != -7 {
					t.Fatalf("%s %s: wrote y[%d] beyond the rows", wt, name, tk*ys+r)
				}
				continue
			}
			wr, at := w[r*wrb:(r+1)*wrb], a[tk*arb:(tk+1)*arb]
			want := ks.vecDot[wt](n, wr, at)
			if math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("%s %s nb %d: row %d token %d = %v, vecDot %v", wt, name, nb, r, tk, got, want)
			}
			ref, abs := refDot(wt, n, wr, at)
			if !closeTo(got, ref, abs) {
				t.Fatalf("%s %s nb %d: row %d token %d = %v, reference %v (abs %g)", wt, name, nb, r, tk, got, ref, abs)
			}
		}
	}
}

// TestTileK8 checks the eight-token K-quant tiles, at every level that has
// them, on random blocks, ggml-quantized weights and random-byte blocks
// from the shared vectors, integer blocks with extreme quants and scales
// (negative Q6_K scales, -128 included) against ±127 activations, for
// every row length class and several row counts.
func TestTileK8(t *testing.T) {
	vecs := loadVectors(t)
	tested := 0
	forEachLevel(t, func(t *testing.T) {
		ks := active.Load()
		rng := rand.New(rand.NewPCG(91, 92))
		for _, wt := range kTileTypes {
			if ks.dot8[wt] == nil {
				continue
			}
			tested++
			for _, nb := range []int{1, 2, 3, 8, 22} {
				n := nb * qkk
				for _, nrows := range []int{1, 2, 5} {
					w := randWeights(rng, wt, nrows*n)
					a := quantized(wt, randActivations(rng, 8*n))
					checkTile8(t, "random", wt, w, nrows, nb, a)
				}
				// Extremes: all-ones quant bytes (largest quants and
				// scales; 0x80 Q6_K scales = -128), unit or random scales.
				w := randWeights(rng, wt, 3*n)
				wrb, _ := wt.RowBytes(n)
				for r := 0; r < 3; r++ {
					row := w[r*wrb : (r+1)*wrb]
					fill := []byte{0xFF, 0x80, 0x00}[r]
					for b := 0; b < nb; b++ {
						blk := row[b*wt.TypeSize() : (b+1)*wt.TypeSize()]
						switch wt {
						case tensor.Q4_K:
							for i := 4; i < sizeQ4_K; i++ {
								blk[i] = fill | 0x77&byte(r)
							}
						case tensor.Q5_K:
							for i := 4; i < sizeQ5_K; i++ {
								blk[i] = fill
							}
						case tensor.Q6_K:
							for i := 0; i < 208; i++ {
								blk[i] = fill
							}
						}
					}
				}
				unitScales(wt, w[:wrb])
				q := make([]int8, 8*n)
				for i := range q {
					q[i] = []int8{127, -127}[i/qkk%2]
				}
				checkTile8(t, "extreme", wt, w, 3, nb, intActivations(wt, q))
			}
			for _, name := range []string{wt.String() + ".q", "rnd." + wt.String() + ".q"} {
				v, ok := vecs[name]
				if !ok {
					t.Fatalf("no %s in the shared vectors", name)
				}
				const n = 512 // the vectors are [512, 4]
				a := quantized(wt, randActivations(rng, 8*n))
				checkTile8(t, name, wt, v.data, v.n/n, n/qkk, a)
			}
		}
	})
	if MaxLevel() >= AVX512 && tested == 0 {
		t.Error("no eight-token K-quant kernel at AVX512")
	}
}
