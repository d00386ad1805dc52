package kernels

import (
	"math/rand/v2"
	"testing"

	"tandem/internal/engine/tensor"
)

// qTileTypes are the 32-element quant types that may have eight-token
// tiles besides Q8_0.
var qTileTypes = []tensor.Type{tensor.Q4_0, tensor.Q5_0, tensor.Q4_1, tensor.Q5_1}

// TestTileQ8 checks the eight-token Q4_0, Q5_0, Q4_1 and Q5_1 tiles, at
// every level that has them, on random blocks, ggml-quantized weights and
// random-byte blocks from the shared vectors, and integer blocks with
// extreme quants (all-ones, 0x80 and zero bytes, so every 5th bit set or
// clear) against ±127 activations, for several block and row counts (the
// Q8_0 block-pair tiles take even block counts only, as MatMul gives them).
func TestTileQ8(t *testing.T) {
	vecs := loadVectors(t)
	tested, withVectors := 0, 0
	forEachLevel(t, func(t *testing.T) {
		ks := active.Load()
		rng := rand.New(rand.NewPCG(93, 94))
		for _, wt := range qTileTypes {
			if ks.dot8[wt] == nil {
				continue
			}
			tested++
			nbs := []int{1, 2, 3, 8, 22}
			if VecDotType(wt) == tensor.Q8_0 {
				nbs = []int{2, 4, 6, 16, 44}
			}
			for _, nb := range nbs {
				n := nb * qk
				for _, nrows := range []int{1, 2, 5} {
					w := randWeights(rng, wt, nrows*n)
					a := quantized(wt, randActivations(rng, 8*n))
					checkTile8(t, "random", wt, w, nrows, nb, a)
				}
				w := randWeights(rng, wt, 3*n)
				wrb, _ := wt.RowBytes(n)
				for r := 0; r < 3; r++ {
					row := w[r*wrb : (r+1)*wrb]
					fill := []byte{0xFF, 0x80, 0x00}[r]
					for b := 0; b < nb; b++ {
						blk := row[b*wt.TypeSize() : (b+1)*wt.TypeSize()]
						for i := 2; i < len(blk); i++ {
							blk[i] = fill
						}
					}
				}
				unitScales(wt, w)
				q := make([]int8, 8*n)
				for i := range q {
					q[i] = []int8{127, -127}[i/qk%2]
				}
				checkTile8(t, "extreme", wt, w, 3, nb, intActivations(wt, q))
			}
			for _, name := range []string{wt.String() + ".q", "rnd." + wt.String() + ".q"} {
				v, ok := vecs[name]
				if !ok {
					// The shared vectors have no Q5_1 weights.
					t.Logf("no %s in the shared vectors", name)
					continue
				}
				withVectors++
				const n = 512 // the vectors are [512, 4]
				a := quantized(wt, randActivations(rng, 8*n))
				checkTile8(t, name, wt, v.data, v.n/n, n/qk, a)
			}
		}
	})
	if MaxLevel() >= AVX512 && tested < len(qTileTypes) {
		t.Errorf("%d of %d eight-token tiles at AVX512", tested, len(qTileTypes))
	}
	if tested > 0 && withVectors == 0 {
		t.Error("no tile checked on the shared vectors")
	}
}

// TestTileF8 checks the eight-token F16 and BF16 tiles, at every level
// that has them, against the level's vecDot bit for bit and the float64
// reference, for row lengths with and without elements after the last
// 16-element group and after the last 64-element chunk, several row
// counts, and that nothing past the rows is written.
func TestTileF8(t *testing.T) {
	tested := 0
	forEachLevel(t, func(t *testing.T) {
		ks := active.Load()
		rng := rand.New(rand.NewPCG(95, 96))
		for _, wt := range []tensor.Type{tensor.F16, tensor.BF16} {
			if ks.dot8[wt] == nil {
				continue
			}
			tested++
			for _, n := range []int{16, 17, 48, 64, 80, 100, 128, 200, 512, 1000} {
				for _, nrows := range []int{1, 2, 5} {
					w := randWeights(rng, wt, nrows*n)
					a := quantized(wt, randActivations(rng, 8*n))
					checkTile8(t, "random", wt, w, nrows, n, a) // F16, BF16: blocks of one element
				}
			}
		}
	})
	if MaxLevel() >= AVX512 && tested < 2 {
		t.Errorf("%d of 2 eight-token float tiles at AVX512", tested)
	}
}
