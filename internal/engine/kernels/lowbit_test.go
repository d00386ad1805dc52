package kernels

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"tandem/internal/engine/tensor"
)

// lowbitTypes are the weight types of the committed ggml vectors.
var lowbitTypes = []tensor.Type{tensor.MXFP4, tensor.IQ4_NL, tensor.IQ4_XS, tensor.Q3_K, tensor.Q2_K}

// ggmlDotLevels says which of ggml's CPU builds a level's kernels repeat
// the float operations of (gen.c's variants: generic = libggml-cpu-x64,
// avx2 = -haswell, avx512 = -zen4).
var ggmlDotLevels = map[Level]string{Generic: "generic", AVX2: "avx2", AVX512: "avx512"}

// f32s decodes a vector tensor of float32s.
func (v vecTensor) f32s() []float32 {
	out := make([]float32, v.n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(v.data[4*i:]))
	}
	return out
}

// TestVecDotMatchesGGMLDots: VecDot of ggml-quantized (T.q) and random
// (rnd.T.q) weight rows with ggml's quantized activation rows returns, bit
// for bit, what ggml's vec_dot returned for the same rows in the CPU build
// whose operations the level repeats, over whole rows (512 elements) and
// over a prefix (256 for the super-block types, 480 = 15 blocks for the
// others: an odd block count, ggml's scalar tail).
func TestVecDotMatchesGGMLDots(t *testing.T) {
	vecs := loadGGMLVectors(t)
	forEachLevel(t, func(t *testing.T) {
		variant := ggmlDotLevels[CurrentLevel()]
		for _, wt := range lowbitTypes {
			vt := VecDotType(wt)
			act := vecs["act."+vt.String()]
			arb, _ := vt.RowBytes(512)
			wrb, _ := wt.RowBytes(512)
			part := 480
			if wt.BlockSize() == qkk {
				part = 256
			}
			for _, prefix := range []string{"", "rnd."} {
				w := vecs[prefix+wt.String()+".q"]
				for _, c := range []struct {
					kind string
					n    int
				}{{"dot", 512}, {"dotp", part}} {
					name := prefix + wt.String() + "." + c.kind + "." + variant
					want, ok := vecs[name]
					if !ok {
						t.Fatalf("vector file has no %s", name)
					}
					wantF := want.f32s()
					bad := 0
					for i, ggml := range wantF {
						r, tok := i/4, i%4
						got := VecDot(wt, c.n, w.data[r*wrb:(r+1)*wrb], act.data[tok*arb:(tok+1)*arb])
						same := math.Float32bits(got) == math.Float32bits(ggml) ||
							math.IsNaN(float64(got)) && math.IsNaN(float64(ggml))
						if !same {
							if bad < 3 {
								t.Errorf("VecDot(%s row %d, act %d, n %d) = %g (%#08x), ggml %g (%#08x)",
									prefix+wt.String(), r, tok, c.n, got, math.Float32bits(got), ggml, math.Float32bits(ggml))
							}
							bad++
						}
					}
					if bad > 0 {
						t.Errorf("%s: %d of %d dot products differ from ggml's", name, bad, len(wantF))
					}
				}
			}
		}
	})
}

// TestQuantizeActivationMatchesGGMLVectors: the activation rows ggml's CPU
// traits quantized (the same bytes in all three builds) come out of
// QuantizeActivation byte for byte at every level.
func TestQuantizeActivationMatchesGGMLVectors(t *testing.T) {
	vecs := loadGGMLVectors(t)
	x := vecs["act"].f32s()
	forEachLevel(t, func(t *testing.T) {
		for _, vt := range []tensor.Type{tensor.Q8_0, tensor.Q8_K} {
			want := vecs["act."+vt.String()]
			got := make([]byte, len(want.data))
			QuantizeActivation(vt, x, got)
			for i := range got {
				if got[i] != want.data[i] {
					t.Errorf("QuantizeActivation(%s) byte %d = %#02x, ggml %#02x", vt, i, got[i], want.data[i])
					break
				}
			}
		}
	})
}

// TestTileLowbit8 checks the eight-token tiles of the types of the
// committed ggml vectors, at every level that has them, as TestTileK8 does
// for Q4_K-Q6_K: random blocks, blocks whose quant bytes are all 0xFF,
// 0x80 or 0x00 (largest and smallest quants and scales) with unit scales
// against ±127 activations, and ggml's T.q and rnd.T.q rows, for 1 to 22
// super-blocks (2 to 44 blocks for MXFP4 and IQ4_NL, whose tiles take
// block pairs) and several row counts, bit for bit the row kernel.
func TestTileLowbit8(t *testing.T) {
	vecs := loadGGMLVectors(t)
	tested := 0
	forEachLevel(t, func(t *testing.T) {
		ks := active.Load()
		rng := rand.New(rand.NewPCG(93, 94))
		for _, wt := range lowbitTypes {
			if ks.dot8[wt] == nil {
				continue
			}
			tested++
			bs, ts := wt.BlockSize(), wt.TypeSize()
			nbs := []int{1, 2, 3, 8, 22}
			if bs == qk {
				nbs = []int{2, 4, 6, 16, 44} // block pairs: even counts only
			}
			for _, nb := range nbs {
				n := nb * bs
				for _, nrows := range []int{1, 2, 5} {
					w := randWeights(rng, wt, nrows*n)
					a := quantized(wt, randActivations(rng, 8*n))
					checkTile8(t, "random", wt, w, nrows, nb, a)
				}
				w := randWeights(rng, wt, 3*n)
				wrb, _ := wt.RowBytes(n)
				for r := 0; r < 3; r++ {
					fill := []byte{0xFF, 0x80, 0x00}[r]
					for b := 0; b < nb; b++ {
						blk := w[r*wrb+b*ts : r*wrb+(b+1)*ts]
						for i := range blk {
							blk[i] = fill
						}
					}
					unitScales(wt, w[r*wrb:(r+1)*wrb])
				}
				q := make([]int8, 8*n)
				for i := range q {
					q[i] = []int8{127, -127}[i/bs%2]
				}
				checkTile8(t, "extreme", wt, w, 3, nb, intActivations(wt, q))
			}
			for _, name := range []string{wt.String() + ".q", "rnd." + wt.String() + ".q"} {
				v := vecs[name]
				const n = 512
				rows := v.n / n
				if name == "rnd.mxfp4.q" {
					rows-- // the last row's extreme exponents overflow float32
				}
				a := quantized(wt, randActivations(rng, 8*n))
				checkTile8(t, name, wt, v.data, rows, n/bs, a)
			}
		}
	})
	if MaxLevel() >= AVX512 && tested < 5 {
		t.Errorf("%d eight-token kernels of these types at AVX512, want 5", tested)
	}
}

// TestMatvecLowbitKernel checks the many-row kernels of the Q8_K types of
// the committed ggml vectors, at every level that has them, as
// TestMatvecKKernel does for Q4_K-Q6_K: random blocks, blocks whose quant
// bytes are all 0xFF, 0x80 or 0x00 with unit scales against ±127
// activations, and ggml's T.q and rnd.T.q rows, 1 to 22 super-blocks and 1
// to 9 rows (odd counts run a row pair on one row).
func TestMatvecLowbitKernel(t *testing.T) {
	vecs := loadGGMLVectors(t)
	tested := 0
	forEachLevel(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(95, 96))
		for _, wt := range lowbitTypes {
			f, ok := matvecFormFor(active.Load().level, wt)
			if !ok {
				continue
			}
			tested++
			ts := wt.TypeSize()
			for _, nb := range []int{1, 2, 3, 8, 22} {
				n := nb * qkk
				for nrows := 1; nrows <= 9; nrows++ {
					w := randWeights(rng, wt, nrows*n)
					a := quantized(wt, randActivations(rng, n))
					checkMatvecK(t, "random", f, wt, w, nrows, nb, a)
				}
				w := randWeights(rng, wt, 4*n)
				wrb, _ := wt.RowBytes(n)
				for r := range 3 {
					fill := []byte{0xFF, 0x80, 0x00}[r]
					for b := range nb {
						blk := w[r*wrb+b*ts : r*wrb+(b+1)*ts]
						for i := range blk {
							blk[i] = fill
						}
					}
					unitScales(wt, w[r*wrb:(r+1)*wrb])
				}
				for _, sign := range []int8{1, -1} {
					q := make([]int8, n)
					for i := range q {
						q[i] = sign * []int8{127, -127}[i/32%2]
					}
					checkMatvecK(t, "extreme", f, wt, w, 4, nb, intActivations(wt, q))
				}
			}
			for _, name := range []string{wt.String() + ".q", "rnd." + wt.String() + ".q"} {
				v := vecs[name]
				const n = 512
				a := quantized(wt, randActivations(rng, n))
				checkMatvecK(t, name, f, wt, v.data, v.n/n, n/qkk, a)
				checkMatvecK(t, name+" 3 rows", f, wt, v.data, 3, n/qkk, a)
			}
		}
	})
	if MaxLevel() >= AVX512 && tested < 3 {
		t.Errorf("%d many-row kernels of these types at AVX512, want at least 3", tested)
	}
}
