package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"tandem/internal/engine/tensor"
)

// BenchmarkQ8Tiles compares, on one 768-row group of Q8_0 weights 768
// wide, the AVX-512 four-token kernel row by row, over the whole group in
// one call, and the eight-token kernel, for the same eight tokens.
func BenchmarkQ8Tiles(b *testing.B) {
	if MaxLevel() < AVX512 {
		b.Skip("needs AVX-512")
	}
	const nOut, nIn, nTok = 768, 768, 8
	rng := rand.New(rand.NewPCG(3, 3))
	w := randWeights(rng, tensor.Q8_0, nOut*nIn)
	x := randActivations(rng, nTok*nIn)
	arb, _ := tensor.Q8_0.RowBytes(nIn)
	wrb := arb
	act := make([]byte, nTok*arb)
	QuantizeActivation(tensor.Q8_0, x, act)
	nb := nIn / 32
	prep4 := make([]byte, 2*nb*prepQ8_0)
	prepareTile(tensor.Q8_0, act[:4*arb], arb, nb, prep4[:nb*prepQ8_0])
	prepareTile(tensor.Q8_0, act[4*arb:], arb, nb, prep4[nb*prepQ8_0:])
	prep8 := make([]byte, nb/2*prep8PairBytes)
	prepareTile8(act, arb, nb, prep8)
	y := make([]float32, nTok*nOut)
	ks := sets[AVX512]
	b.Run("x4/row", func(b *testing.B) {
		loopCPU(b, func() {
			for t := 0; t < 8; t += 4 {
				for o := range nOut {
					ks.dot4[tensor.Q8_0](w[o*wrb:(o+1)*wrb], act[t*arb:], arb, prep4[t/4*nb*prepQ8_0:], nb, y[t*nOut+o:], nOut)
				}
			}
		})
	})
	b.Run("x4/rows", func(b *testing.B) {
		loopCPU(b, func() {
			for t := 0; t < 8; t += 4 {
				ks.dot4Rows[tensor.Q8_0](w, wrb, nOut, prep4[t/4*nb*prepQ8_0:], nb, y[t*nOut:], nOut)
			}
		})
	})
	b.Run("x8/rows", func(b *testing.B) {
		loopCPU(b, func() {
			ks.dot8[tensor.Q8_0](w, wrb, nOut, prep8, nb, y, nOut)
		})
	})
}

// BenchmarkKTiles compares, on one group of K-quant weight rows (about
// groupBytes) 512, 2048 and 5632 wide, the four-token kernel row by row
// (twice) and the eight-token kernel over the group, for the same eight
// tokens.
func BenchmarkKTiles(b *testing.B) {
	if MaxLevel() < AVX512 {
		b.Skip("needs AVX-512")
	}
	const nTok = 8
	ks := sets[AVX512]
	for _, wt := range kTileTypes {
		if ks.dot8[wt] == nil {
			continue
		}
		for _, nIn := range []int{512, 2048, 5632} {
			b.Run(fmt.Sprintf("%s/%d", wt, nIn), func(b *testing.B) {
				wrb, _ := wt.RowBytes(nIn)
				nOut := groupBytes / wrb
				rng := rand.New(rand.NewPCG(5, 5))
				w := randWeights(rng, wt, nOut*nIn)
				arb, _ := tensor.Q8_K.RowBytes(nIn)
				act := make([]byte, nTok*arb)
				QuantizeActivation(tensor.Q8_K, randActivations(rng, nTok*nIn), act)
				nb := nIn / qkk
				prep8 := make([]byte, prep8Bytes(tensor.Q8_K, nb))
				prepareTileK8(act, arb, nb, prep8)
				y := make([]float32, nTok*nOut)
				b.Run("x4/row", func(b *testing.B) {
					loopCPU(b, func() {
						for t := 0; t < nTok; t += 4 {
							for o := range nOut {
								ks.dot4[wt](w[o*wrb:(o+1)*wrb], act[t*arb:], arb, nil, nb, y[t*nOut+o:], nOut)
							}
						}
					})
				})
				b.Run("x8/rows", func(b *testing.B) {
					loopCPU(b, func() {
						ks.dot8[wt](w, wrb, nOut, prep8, nb, y, nOut)
					})
				})
			})
		}
	}
}

// BenchmarkQTiles compares MatMul of 512 tokens on one thread, for Q4_0,
// Q5_0, Q4_1, Q5_1, F16, BF16 and the low-bit types that have tiles
// (IQ4_XS, Q3_K, Q2_K), without the eight-token AVX-512 tile (the old
// path: four-token kernels for Q4_0, Q5_0 and F16, one token at a time for
// the others) and with it, at the model shapes 768x768, 2048x2048 and
// 5632x2048 (rows x inputs).
func BenchmarkQTiles(b *testing.B) {
	if MaxLevel() < AVX512 {
		b.Skip("needs AVX-512")
	}
	defer SetLevel(AVX512)()
	const nTok = 512
	p := NewPool(1)
	defer p.Close()
	types := append(qTileTypes[:len(qTileTypes):len(qTileTypes)], tensor.F16, tensor.BF16)
	for _, wt := range append(types, lowbitTypes...) {
		if sets[AVX512].dot8[wt] == nil {
			continue
		}
		old := *sets[AVX512]
		old.dot8[wt] = nil
		for _, sh := range []struct{ nOut, nIn int }{{768, 768}, {2048, 2048}, {5632, 2048}} {
			rng := rand.New(rand.NewPCG(7, 7))
			w := randWeights(rng, wt, sh.nOut*sh.nIn)
			x := randActivations(rng, nTok*sh.nIn)
			y := make([]float32, nTok*sh.nOut)
			for _, c := range []struct {
				name string
				ks   *kernelSet
			}{{"old", &old}, {"x8", sets[AVX512]}} {
				b.Run(fmt.Sprintf("%s/%dx%d/%s", wt, sh.nOut, sh.nIn, c.name), func(b *testing.B) {
					active.Store(c.ks)
					defer active.Store(sets[AVX512])
					loopCPU(b, func() { p.MatMul(wt, w, sh.nOut, sh.nIn, x, nTok, y) })
				})
			}
		}
	}
}
