package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"tandem/internal/engine/tensor"
)

// avx2TileTypes are the weight types with eight-token tiles at AVX2.
var avx2TileTypes = []tensor.Type{tensor.Q8_0, tensor.Q4_K, tensor.Q5_K, tensor.Q6_K, tensor.IQ4_XS, tensor.Q3_K, tensor.Q2_K}

// withoutTiles8 makes the kernels run at level l without its eight-token
// tiles (the path MatMul took before they existed: four tokens at a time,
// then one) and returns a function that restores the previous level.
func withoutTiles8(l Level) (restore func()) {
	k := new(kernelSet)
	*k = *sets[l]
	k.dot8 = [numTypes]dot4RowsFunc{}
	setLevelMu.Lock()
	defer setLevelMu.Unlock()
	prev := active.Swap(k)
	return func() {
		setLevelMu.Lock()
		defer setLevelMu.Unlock()
		active.Store(prev)
	}
}

// TestAVX2Tiles checks that the AVX2 level has its eight-token tiles (so
// TestTileK8, TestMatMul and TestMatMulBatchInvariant run them there) and
// that MatMul through them gives, bit for bit, what the four-token and
// one-token kernels give, for batches of one or two eight-token tiles
// followed by four-token and single ones, with 1 and 3 threads.
func TestAVX2Tiles(t *testing.T) {
	if err := CheckLevel(AVX2); err != nil {
		t.Skip(err)
	}
	for _, wt := range avx2TileTypes {
		if sets[AVX2].dot8[wt] == nil {
			t.Fatalf("no eight-token %s tile at AVX2", wt)
		}
	}
	rng := rand.New(rand.NewPCG(71, 72))
	for _, wt := range avx2TileTypes {
		for _, nIn := range []int{256, 768, 2048} {
			for _, nTok := range []int{8, 13, 21} {
				const nOut = 150
				w := randWeights(rng, wt, nOut*nIn)
				x := randActivations(rng, nTok*nIn)
				run := func(threads int) []float32 {
					p := NewPool(threads)
					defer p.Close()
					y := make([]float32, nTok*nOut)
					p.MatMul(wt, w, nOut, nIn, x, nTok, y)
					return y
				}
				restore := withoutTiles8(AVX2)
				want := run(1)
				restore()
				restore = SetLevel(AVX2)
				got1, got3 := run(1), run(3)
				restore()
				for i := range want {
					if math.Float32bits(got1[i]) != math.Float32bits(want[i]) || math.Float32bits(got3[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s %dx%d, %d tokens: y[%d] = %v (1 thread), %v (3 threads) with the tiles, %v without",
							wt, nOut, nIn, nTok, i, got1[i], got3[i], want[i])
					}
				}
			}
		}
	}
}

// TestTileQ8_0 checks the eight-token Q8_0 tiles, at every level that has
// them, on random blocks, ggml-quantized and random-byte blocks from the
// shared vectors, and extreme blocks (every quant -128, 127 or 0x80
// patterns, unit scales) against ±127 activations, for even block counts
// 2 to 22 and several row counts.
func TestTileQ8_0(t *testing.T) {
	vecs := loadVectors(t)
	tested := 0
	forEachLevel(t, func(t *testing.T) {
		ks := active.Load()
		if ks.dot8[tensor.Q8_0] == nil {
			return
		}
		tested++
		rng := rand.New(rand.NewPCG(93, 94))
		for _, nb := range []int{2, 4, 6, 16, 22} {
			n := nb * qk
			for _, nrows := range []int{1, 2, 5} {
				w := randWeights(rng, tensor.Q8_0, nrows*n)
				a := quantized(tensor.Q8_0, randActivations(rng, 8*n))
				checkTile8(t, "random", tensor.Q8_0, w, nrows, nb, a)
			}
			w := randWeights(rng, tensor.Q8_0, 3*n)
			wrb, _ := tensor.Q8_0.RowBytes(n)
			for r := 0; r < 3; r++ {
				for b := 0; b < nb; b++ {
					blk := w[r*wrb+b*sizeQ8_0 : r*wrb+(b+1)*sizeQ8_0]
					binary.LittleEndian.PutUint16(blk, 0x3c00) // 1.0
					for i := 2; i < sizeQ8_0; i++ {
						blk[i] = []byte{0x80, 0x7f, byte(0x80 ^ i)}[r]
					}
				}
			}
			q := make([]int8, 8*n)
			for i := range q {
				q[i] = []int8{127, -127}[(i/qk+i/n)%2]
			}
			checkTile8(t, "extreme", tensor.Q8_0, w, 3, nb, intActivations(tensor.Q8_0, q))
		}
		for _, name := range []string{"q8_0.q", "rnd.q8_0.q"} {
			v, ok := vecs[name]
			if !ok {
				t.Fatalf("no %s in the shared vectors", name)
			}
			const n = 512 // the vectors are [512, 4]
			a := quantized(tensor.Q8_0, randActivations(rng, 8*n))
			checkTile8(t, name, tensor.Q8_0, v.data, v.n/n, n/qk, a)
		}
	})
	if MaxLevel() >= AVX2 && tested == 0 {
		t.Error("no eight-token Q8_0 kernel at AVX2 or AVX512")
	}
}

// BenchmarkAVX2Tiles compares at AVX2, on one group of weight rows (about
// groupBytes) 512, 2048 and 5632 wide, the four-token kernel row by row
// (twice: the path before the eight-token tiles) and the eight-token tile
// over the group, for the same eight tokens.
func BenchmarkAVX2Tiles(b *testing.B) {
	if err := CheckLevel(AVX2); err != nil {
		b.Skip(err)
	}
	const nTok = 8
	ks := sets[AVX2]
	for _, wt := range avx2TileTypes {
		for _, nIn := range []int{512, 2048, 5632} {
			b.Run(fmt.Sprintf("%s/%d", wt, nIn), func(b *testing.B) {
				wrb, _ := wt.RowBytes(nIn)
				nOut := groupBytes / wrb
				rng := rand.New(rand.NewPCG(5, 5))
				w := randWeights(rng, wt, nOut*nIn)
				vt := VecDotType(wt)
				arb, _ := vt.RowBytes(nIn)
				act := make([]byte, nTok*arb)
				QuantizeActivation(vt, randActivations(rng, nTok*nIn), act)
				nb := nIn / vt.BlockSize()
				prep4 := make([]byte, 2*prepTileBytes(vt, nb))
				if len(prep4) > 0 {
					prepareTile(vt, act[:4*arb], arb, nb, prep4[:len(prep4)/2])
					prepareTile(vt, act[4*arb:], arb, nb, prep4[len(prep4)/2:])
				}
				prep8 := make([]byte, prep8Bytes(vt, nb))
				prepareTile8At(ks.signedQ8Tile8, vt, act, arb, nb, prep8)
				y := make([]float32, nTok*nOut)
				b.Run("x4/row", func(b *testing.B) {
					loopCPU(b, func() {
						for t := 0; t < nTok; t += 4 {
							p := prep4[t/4*len(prep4)/2:]
							for o := range nOut {
								ks.dot4[wt](w[o*wrb:(o+1)*wrb], act[t*arb:], arb, p, nb, y[t*nOut+o:], nOut)
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

// BenchmarkAVX2MatMul measures whole prefill-shaped products (512 tokens,
// one thread) at AVX2 with the eight-token tiles ("x8") and without them
// ("x4": four tokens at a time, the path before them).
func BenchmarkAVX2MatMul(b *testing.B) {
	if err := CheckLevel(AVX2); err != nil {
		b.Skip(err)
	}
	const nTok = 512
	shapes := []struct{ nOut, nIn int }{{768, 768}, {2048, 2048}, {5632, 2048}}
	for _, wt := range avx2TileTypes {
		for _, sh := range shapes {
			rng := rand.New(rand.NewPCG(6, 6))
			w := randWeights(rng, wt, sh.nOut*sh.nIn)
			x := randActivations(rng, nTok*sh.nIn)
			y := make([]float32, nTok*sh.nOut)
			for _, mode := range []string{"x4", "x8"} {
				b.Run(fmt.Sprintf("%s/%dx%d/%s", wt, sh.nOut, sh.nIn, mode), func(b *testing.B) {
					restore := SetLevel(AVX2)
					if mode == "x4" {
						restore()
						restore = withoutTiles8(AVX2)
					}
					defer restore()
					p := NewPool(1)
					defer p.Close()
					loopCPU(b, func() {
						p.MatMul(wt, w, sh.nOut, sh.nIn, x, nTok, y)
					})
				})
			}
		}
	}
}
