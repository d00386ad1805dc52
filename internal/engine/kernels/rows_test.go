package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"tandem/internal/engine/tensor"
)

// TestRowsMatchSingle checks, at every level, that AxpyF16Rows equals
// AxpyF16 called row by row bit for bit, and that DotF16Rows gives each row
// the value it gives that row alone, within float32 rounding of DotF16, for
// row lengths the assembly takes and ones it leaves to Go.
func TestRowsMatchSingle(t *testing.T) {
	forEachLevel(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(7, 8))
		for _, m := range []int{16, 24, 64, 80, 96, 128, 256} {
			for _, n := range []int{1, 2, 7, 16, 33} {
				stride := m * (1 + rng.IntN(3))
				rows := make([]uint16, (n-1)*stride+m)
				for i := range rows {
					rows[i] = tensor.FP32ToFP16(float32(rng.NormFloat64()))
				}
				q := make([]uint16, m)
				for i := range q {
					q[i] = tensor.FP32ToFP16(float32(rng.NormFloat64()))
				}
				const scale = 0.125
				got := make([]float32, n)
				DotF16Rows(q, rows, stride, scale, got)
				for i := range n {
					// A row's score does not depend on the rows around it.
					var alone [1]float32
					DotF16Rows(q, rows[i*stride:i*stride+m], stride, scale, alone[:])
					if math.Float32bits(got[i]) != math.Float32bits(alone[0]) {
						t.Fatalf("DotF16Rows m=%d n=%d row %d = %v among %d rows, %v alone", m, n, i, got[i], n, alone[0])
					}
					// It is DotF16's value up to float32 rounding in another order.
					want := DotF16(q, rows[i*stride:i*stride+m]) * scale
					var abs float64
					for j := range m {
						abs += math.Abs(float64(f16Table[q[j]]) * float64(f16Table[rows[i*stride+j]]))
					}
					if d := math.Abs(float64(got[i] - want)); d > 1e-6*abs*scale+1e-30 {
						t.Fatalf("DotF16Rows m=%d n=%d row %d = %v, DotF16 gives %v (sum |terms| %v)", m, n, i, got[i], want, abs)
					}
				}
				w := make([]float32, n)
				for i := range w {
					w[i] = float32(rng.Float64())
				}
				y0 := make([]float32, m)
				for i := range y0 {
					y0[i] = float32(rng.NormFloat64())
				}
				gotY, wantY := append([]float32(nil), y0...), append([]float32(nil), y0...)
				AxpyF16Rows(w, rows, stride, gotY)
				for i := range n {
					AxpyF16(w[i], rows[i*stride:i*stride+m], wantY)
				}
				for j := range m {
					if math.Float32bits(gotY[j]) != math.Float32bits(wantY[j]) {
						t.Fatalf("AxpyF16Rows m=%d n=%d element %d = %v, AxpyF16 row by row gives %v", m, n, j, gotY[j], wantY[j])
					}
				}
			}
		}
	})
}

// TestRowsBounds checks that short row buffers are refused.
func TestRowsBounds(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("DotF16Rows with too few row elements did not panic")
		}
	}()
	DotF16Rows(make([]uint16, 16), make([]uint16, 31), 16, 1, make([]float32, 2))
}

func BenchmarkAttentionRows(b *testing.B) {
	const m, n, stride = 64, 256, 64 * 4
	rng := rand.New(rand.NewPCG(1, 1))
	rows := make([]uint16, (n-1)*stride+m)
	for i := range rows {
		rows[i] = tensor.FP32ToFP16(float32(rng.NormFloat64()))
	}
	q := rows[:m]
	sc := make([]float32, n)
	y := make([]float32, m)
	benchLevels(b, func(b *testing.B) {
		b.Run("rows", func(b *testing.B) {
			for b.Loop() {
				DotF16Rows(q, rows, stride, 0.125, sc)
				AxpyF16Rows(sc, rows, stride, y)
			}
		})
		b.Run("single", func(b *testing.B) {
			for b.Loop() {
				for i := range n {
					sc[i] = DotF16(q, rows[i*stride:i*stride+m]) * 0.125
				}
				for i := range n {
					AxpyF16(sc[i], rows[i*stride:i*stride+m], y)
				}
			}
		})
	})
}
