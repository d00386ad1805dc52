package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"tandem/internal/engine/tensor"
)

// TestMatMulQ8Panels: at the AVX512 level, MatMulQ8Panels of every token
// count and thread count, and MatVecs with the panels (alone and beside
// other products, sliced by PanelRows), give every (row, token) output
// q8PanelRef's value for that row and token alone, bit for bit (so the
// results depend on nothing but the row and the token); below AVX512 they
// equal MatMul of the rows.
func TestMatMulQ8Panels(t *testing.T) {
	forEachLevel(t, func(t *testing.T) {
		if !PanelsUsable() {
			t.Skip("this CPU runs no packed panels (needs AVX-512 VNNI)")
		}
		onPanels := CurrentLevel() == AVX512
		rng := rand.New(rand.NewPCG(31, 31))
		for _, shape := range []struct{ out, in int }{{40, 64}, {16, 256}, {100, 768}, {35, 2048 + 32}} {
			nb := shape.in / qk
			wrb := nb * sizeQ8_0
			w := randWeights(rng, tensor.Q8_0, shape.out*shape.in)
			panels := PackQ8_0(w, shape.out, shape.in)
			for _, nTok := range []int{1, 2, 7, 8, 9, 17} {
				x := randActivations(rng, nTok*shape.in)
				want := make([]float32, nTok*shape.out)
				if onPanels {
					// each (row, token) alone: a one-row panel, a one-token tile
					for tk := range nTok {
						a := quantized(tensor.Q8_0, x[tk*shape.in:(tk+1)*shape.in])
						prep := make([]byte, q8ActBytes(nb, 1))
						prepareQ8PanelAct(a, wrb, 1, nb, prep)
						for o := range shape.out {
							one := make([]byte, q8PanelBytes(nb))
							packQ8_0Panel(w[o*wrb:], wrb, 1, nb, one)
							q8PanelRef(one, nb, prep, 1, 1, want[tk*shape.out+o:], 1)
						}
					}
				} else {
					p := NewPool(1)
					p.MatMul(tensor.Q8_0, w, shape.out, shape.in, x, nTok, want)
					p.Close()
				}
				for _, threads := range []int{1, 2, 3} {
					p := NewPool(threads)
					got := make([]float32, nTok*shape.out+1)
					p.MatMulQ8Panels(w, panels, shape.out, shape.in, x, nTok, got[:nTok*shape.out])
					if got[nTok*shape.out] != 0 {
						t.Fatalf("%v, %d tokens: wrote past the outputs", shape, nTok)
					}
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%v, %d tokens, %d threads, row %d token %d: %v, want %v",
								shape, nTok, threads, i%shape.out, i/shape.out, got[i], want[i])
						}
					}
					// MatVecs, token by token: the whole product beside an
					// unpacked one, and the rows split at a panel boundary.
					cut := shape.out / 32 * 16
					for tk := range nTok {
						xt := x[tk*shape.in : (tk+1)*shape.in]
						y, lo, hi, other := make([]float32, shape.out), make([]float32, cut), make([]float32, shape.out-cut), make([]float32, 3)
						p.MatVecs(shape.in, xt,
							MatVec{Type: tensor.Q8_0, W: w, Panels: panels, Out: shape.out, Y: y},
							MatVec{Type: tensor.Q8_0, W: w, Out: 3, Y: other})
						ops := []MatVec{{Type: tensor.Q8_0, W: w[cut*wrb:], Panels: PanelRows(panels, shape.in, cut, shape.out, shape.out), Out: shape.out - cut, Y: hi}}
						if cut > 0 {
							ops = append(ops, MatVec{Type: tensor.Q8_0, W: w, Panels: PanelRows(panels, shape.in, 0, cut, shape.out), Out: cut, Y: lo})
						}
						p.MatVecs(shape.in, xt, ops...)
						for o := range shape.out {
							wt := want[tk*shape.out+o]
							split := hi[max(o-cut, 0)]
							if o < cut {
								split = lo[o]
							}
							if math.Float32bits(y[o]) != math.Float32bits(wt) || math.Float32bits(split) != math.Float32bits(wt) {
								t.Fatalf("%v token %d row %d: MatVecs %v, split %v, want %v", shape, tk, o, y[o], split, wt)
							}
						}
					}
					p.Close()
				}
			}
		}
	})
}

// TestPanelRows: PanelRows slices only at panel boundaries (or the end).
func TestPanelRows(t *testing.T) {
	p := make([]byte, 3*q8PanelBytes(2))
	if got := PanelRows(p, 64, 16, 40, 40); len(got) != 2*q8PanelBytes(2) {
		t.Errorf("rows 16..40 of 40: %d bytes, want two panels", len(got))
	}
	if PanelRows(p, 64, 8, 40, 40) != nil || PanelRows(p, 64, 0, 20, 40) != nil || PanelRows(nil, 64, 0, 16, 40) != nil {
		t.Error("PanelRows cut through a panel, or sliced nil")
	}
}
