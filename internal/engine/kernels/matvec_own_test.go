package kernels

import (
	"math/rand/v2"
	"testing"

	"tandem/internal/engine/tensor"
)

// TestMatVecsOwnInputs: ops with their own input (MatVec.X), mixed with ops
// of the shared input and of several weight types in one call, give every
// output equal to VecDot of its row and its own input, bit for bit, at every
// level and thread count. A MoE layer's down products run this way.
func TestMatVecsOwnInputs(t *testing.T) {
	forEachLevel(t, func(t *testing.T) {
		const nIn = 512
		rng := rand.New(rand.NewPCG(5, 6))
		shared := randActivations(rng, nIn)
		types := []tensor.Type{tensor.Q8_0, tensor.Q4_K, tensor.F32, tensor.Q6_K, tensor.MXFP4, tensor.Q8_0}
		for _, threads := range []int{1, 2, 3} {
			p := NewPool(threads)
			var ops []MatVec
			var ins [][]float32
			for i, wt := range types {
				out := 48 + 16*i
				rb, _ := wt.RowBytes(nIn)
				w := make([]byte, 0, out*rb)
				for range out {
					w = append(w, randWeights(rng, wt, nIn)...)
				}
				x := shared
				op := MatVec{Type: wt, W: w, Out: out, Y: make([]float32, out)}
				if i%2 == 0 {
					x = randActivations(rng, nIn)
					op.X = x
				}
				if i == 5 { // the same own input slice as op 2
					x = ins[2]
					op.X = x
				}
				ops, ins = append(ops, op), append(ins, x)
			}
			p.MatVecs(nIn, shared, ops...)
			p.Close()
			for i, op := range ops {
				a := quantized(op.Type, ins[i])
				rb, _ := op.Type.RowBytes(nIn)
				for o := range op.Out {
					if want := VecDot(op.Type, nIn, op.W[o*rb:(o+1)*rb], a); op.Y[o] != want {
						t.Fatalf("threads %d op %d (%s, own input %v) row %d: %v, VecDot %v", threads, i, op.Type, op.X != nil, o, op.Y[o], want)
					}
				}
			}
		}
	})
}
