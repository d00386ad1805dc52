package kernels

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"tandem/internal/engine/tensor"
)

// q8PanelF16 returns a random f16 scale: mostly normal, with zeros of both
// signs, negative values and subnormals mixed in.
func q8PanelF16(rng *rand.Rand) uint16 {
	switch rng.IntN(8) {
	case 0:
		return uint16(rng.IntN(2)) << 15 // ±0
	case 1:
		return uint16(rng.IntN(2))<<15 | uint16(1+rng.IntN(0x3ff)) // subnormal
	case 2:
		return 0x8000 | tensor.FP32ToFP16(float32(1e-3+0.1*rng.Float64())) // negative
	}
	return tensor.FP32ToFP16(float32(1e-4 + 0.1*rng.Float64()))
}

// q8PanelRandRows returns n random Q8_0 rows of nb blocks (wrb bytes apart,
// wrb >= nb·34, the gap random): random f16 scales (see q8PanelF16) and
// random quant bytes, with runs of -128 and 127 quants.
func q8PanelRandRows(rng *rand.Rand, n, nb, wrb int) []byte {
	w := make([]byte, n*wrb)
	for i := range w {
		w[i] = byte(rng.Uint32())
	}
	for r := range n {
		for b := range nb {
			blk := w[r*wrb+b*sizeQ8_0:]
			binary.LittleEndian.PutUint16(blk, q8PanelF16(rng))
			switch rng.IntN(6) {
			case 0:
				for i := 2; i < sizeQ8_0; i++ {
					blk[i] = 0x80 // -128
				}
			case 1:
				for i := 2; i < sizeQ8_0; i++ {
					blk[i] = 127
				}
			}
		}
	}
	return w
}

// q8RowsA computes arithmetic A (see q8PanelRef) straight from the Q8_0
// weight rows (row r at w[r·wrb:]) and the Q8_0 activation rows (token t
// at act[t·arb:]), without the +128 trick: the definition the packed
// paths must reproduce bit for bit.
func q8RowsA(w []byte, wrb, nrows, nb int, act []byte, arb, ntok int, y []float32, ystride int) {
	for t := range ntok {
		for r := range nrows {
			acc := float32(0)
			for b := range nb {
				wb := w[r*wrb+b*sizeQ8_0:]
				ab := act[t*arb+b*sizeQ8_0:]
				var isum int32
				for i := 2; i < sizeQ8_0; i++ {
					isum += int32(int8(wb[i])) * int32(int8(ab[i]))
				}
				dw := tensor.FP16ToFP32(binary.LittleEndian.Uint16(wb))
				da := tensor.FP16ToFP32(binary.LittleEndian.Uint16(ab))
				s := float32(dw * da)
				acc += float32(float32(isum) * s)
			}
			y[t*ystride+r] = acc
		}
	}
}

// TestQ8PanelPackRoundTrip checks that unpacking a packed panel gives the
// rows back byte for byte, for 1 to 16 rows and odd and even block counts,
// and that the padding rows are zero quants (0x80 bytes, w+128 of 0) and
// zero scales.
func TestQ8PanelPackRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(81, 1))
	for _, nb := range []int{1, 2, 3, 7, 64} {
		for nrows := 1; nrows <= q8PanelRows; nrows++ {
			wrb := nb*sizeQ8_0 + rng.IntN(3)
			w := q8PanelRandRows(rng, nrows, nb, wrb)
			panel := make([]byte, q8PanelBytes(nb))
			for i := range panel {
				panel[i] = 0x5a // packing must overwrite every byte
			}
			packQ8_0Panel(w, wrb, nrows, nb, panel)
			got := make([]byte, len(w))
			copy(got, w) // the gaps between rows are not packed
			for r := range nrows {
				clear(got[r*wrb : r*wrb+nb*sizeQ8_0])
			}
			unpackQ8_0Panel(panel, nb, nrows, got, wrb)
			if !bytes.Equal(got, w) {
				t.Fatalf("nb %d, %d rows: unpacked panel differs from the rows", nb, nrows)
			}
			for b := range nb {
				blk := panel[b*q8PanelBlockBytes:]
				for r := nrows; r < q8PanelRows; r++ {
					for j := range 8 {
						if v := binary.LittleEndian.Uint32(blk[64*j+4*r:]); v != 0x80808080 {
							t.Fatalf("nb %d, %d rows: padding row %d block %d group %d = %#x, want 0x80808080", nb, nrows, r, b, j, v)
						}
					}
					if s := binary.LittleEndian.Uint16(blk[512+2*r:]); s != 0 {
						t.Fatalf("nb %d, %d rows: padding row %d block %d scale %#x, want 0", nb, nrows, r, b, s)
					}
				}
			}
		}
	}
}

// TestQ8PanelRefExact checks that the Go reference on the packed panel and
// prepared activation (the +128 trick, the stored correction) equals
// arithmetic A computed from the rows bit for bit, for every byte pattern:
// random bytes, all -128 and all 127 blocks on both sides (the activation
// quantizer never makes -128, but the integer sums are exact for it too).
// q8PanelCase makes nrows random Q8_0 weight rows and ntok random
// activation rows of nb blocks (both nb·34 bytes a row), the panel of the
// weights and the prepared activation.
func q8PanelCase(rng *rand.Rand, nrows, ntok, nb int) (w, act, panel, prep []byte) {
	wrb := nb * sizeQ8_0
	w = q8PanelRandRows(rng, nrows, nb, wrb)
	act = q8PanelRandRows(rng, ntok, nb, wrb)
	panel = make([]byte, q8PanelBytes(nb))
	packQ8_0Panel(w, wrb, nrows, nb, panel)
	prep = make([]byte, q8ActBytes(nb, ntok))
	prepareQ8PanelAct(act, wrb, ntok, nb, prep)
	return w, act, panel, prep
}

func TestQ8PanelRefExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(81, 2))
	for _, nb := range []int{1, 2, 5, 33} {
		for ntok := 1; ntok <= q8PanelMaxTok; ntok++ {
			nrows := 1 + rng.IntN(q8PanelRows)
			w, act, panel, prep := q8PanelCase(rng, nrows, ntok, nb)
			wrb := nb * sizeQ8_0
			got := make([]float32, ntok*q8PanelRows)
			want := make([]float32, ntok*q8PanelRows)
			q8PanelRef(panel, nb, prep, ntok, nrows, got, q8PanelRows)
			q8RowsA(w, wrb, nrows, nb, act, wrb, ntok, want, q8PanelRows)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("nb %d, ntok %d, %d rows: output %d (token %d, row %d) = %g, arithmetic A from the rows %g",
						nb, ntok, nrows, i, i/q8PanelRows, i%q8PanelRows, got[i], want[i])
				}
			}
		}
	}
}

// TestQ8PanelNearVecDot checks that arithmetic A, a different rounding of
// the same sum, stays within a tight bound of VecDot's Q8_0 dot at every
// level, on random weights and quantized random activations. Both are
// Σ_b dw_b·da_b·isum_b with exact isum_b: A rounds dw·da, the product with
// isum and each of its nb sums (at most (nb+1)·u of Σ|terms|, u = 2^-24);
// VecDot rounds the same products per lane, its fused multiply-adds and a
// reduction tree of a few levels (at most about (nb/2+8)·u of the same sum
// of elementwise magnitudes). The bound used is their sum rounded up,
// (2·nb+16)·u·S with S = Σ_b |dw_b·da_b|·Σ_i |w_i·a_i| (the magnitudes of
// the element products, which bound every partial sum's); the largest
// ratio seen is logged.
func TestQ8PanelNearVecDot(t *testing.T) {
	forEachLevel(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(81, 3))
		worst := 0.0
		for _, nIn := range []int{32, 96, 768, 2048, 5632} {
			nb := nIn / qk
			const nrows, ntok = q8PanelRows, 3
			w := randWeights(rng, tensor.Q8_0, nrows*nIn)
			wrb := nb * sizeQ8_0
			x := randActivations(rng, ntok*nIn)
			act := make([]byte, ntok*wrb)
			QuantizeActivation(tensor.Q8_0, x, act)
			panel := make([]byte, q8PanelBytes(nb))
			packQ8_0Panel(w, wrb, nrows, nb, panel)
			prep := make([]byte, q8ActBytes(nb, ntok))
			prepareQ8PanelAct(act, wrb, ntok, nb, prep)
			y := make([]float32, ntok*nrows)
			q8PanelRef(panel, nb, prep, ntok, nrows, y, nrows)
			for tk := range ntok {
				a := act[tk*wrb : (tk+1)*wrb]
				for r := range nrows {
					row := w[r*wrb : (r+1)*wrb]
					v := VecDot(tensor.Q8_0, nIn, row, a)
					var s float64
					for b := range nb {
						wb, ab := row[b*sizeQ8_0:], a[b*sizeQ8_0:]
						var m float64
						for i := 2; i < sizeQ8_0; i++ {
							m += math.Abs(float64(int8(wb[i])) * float64(int8(ab[i])))
						}
						s += m * math.Abs(float64(tensor.FP16ToFP32(binary.LittleEndian.Uint16(wb)))*
							float64(tensor.FP16ToFP32(binary.LittleEndian.Uint16(ab))))
					}
					diff := math.Abs(float64(y[tk*nrows+r]) - float64(v))
					tol := float64(2*nb+16) * 0x1p-24 * s
					if diff > tol {
						t.Fatalf("%d wide, token %d, row %d: arithmetic A %g, VecDot %g: |diff| %g > %g", nIn, tk, r, y[tk*nrows+r], v, diff, tol)
					}
					if s > 0 {
						worst = max(worst, diff/(0x1p-24*s))
					}
				}
			}
		}
		t.Logf("largest |A - VecDot| seen: %.2f·2^-24 of Σ|terms|", worst)
	})
}
