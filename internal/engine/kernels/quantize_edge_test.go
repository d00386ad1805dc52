package kernels

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"tandem/internal/engine/tensor"
)

// TestQuantizeActivationEdgeBlocks checks every level against the Go
// references on the blocks where vector code can differ: the largest
// magnitude present with both signs (either first), all-zero blocks, NaNs,
// values that scale to exact halves, and a lone maximum at either end.
func TestQuantizeActivationEdgeBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const n = 256
	var blocks [][]float32
	add := func(f func(x []float32)) {
		x := randActivations(rng, n)
		f(x)
		blocks = append(blocks, x)
	}
	add(func(x []float32) { x[10], x[200] = -9, 9 })
	add(func(x []float32) { x[10], x[200] = 9, -9 })
	add(func(x []float32) { x[0], x[255] = -9, 9 })
	add(func(x []float32) { clear(x) })
	add(func(x []float32) { clear(x); x[77] = -1e-3 })
	add(func(x []float32) { x[5] = float32(math.NaN()); x[40] = float32(math.NaN()) })
	add(func(x []float32) { x[31] = 12; x[32] = -12 })
	add(func(x []float32) {
		for i := range x {
			x[i] = float32(i%64-32) / 4 // many exact halves after scaling
		}
	})
	add(func(x []float32) {
		for i := range x {
			x[i] = -x[i] * 1e6
		}
	})
	var row []float32
	for _, b := range blocks {
		row = append(row, b...)
	}
	forEachLevel(t, func(t *testing.T) {
		for bi, b := range append(blocks, row) {
			for _, c := range []struct {
				vt  tensor.Type
				ref func([]float32, []byte)
			}{{tensor.Q8_0, quantizeQ8_0}, {tensor.Q8_K, quantizeQ8_K}} {
				rb, _ := c.vt.RowBytes(len(b))
				want, got := make([]byte, rb), make([]byte, rb)
				c.ref(b, want)
				QuantizeActivation(c.vt, b, got)
				if !bytes.Equal(got, want) {
					i := 0
					for got[i] == want[i] {
						i++
					}
					t.Errorf("block set %d, %s: byte %d = %#x, reference %#x", bi, c.vt, i, got[i], want[i])
				}
			}
		}
	})
}
