package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"tandem/internal/engine/tensor"
)

// benchLevels runs f as a sub-benchmark per level the CPU has.
func benchLevels(b *testing.B, f func(b *testing.B)) {
	for _, l := range levels {
		b.Run(l.String(), func(b *testing.B) {
			if err := CheckLevel(l); err != nil {
				b.Skip(err)
			}
			defer SetLevel(l)()
			f(b)
		})
	}
}

// BenchmarkVecDot measures one 4096-element row dot per type and level;
// the byte rate is of weight bytes, cpu-ns/op the thread's CPU time.
func BenchmarkVecDot(b *testing.B) {
	const n = 4096
	for _, wt := range weightTypes {
		b.Run(wt.String(), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 1))
			w := randWeights(rng, wt, n)
			x := randActivations(rng, n)
			benchLevels(b, func(b *testing.B) {
				a := quantized(wt, x)
				b.SetBytes(int64(len(w)))
				loopCPU(b, func() { VecDot(wt, n, w, a) })
			})
		})
	}
}

func BenchmarkQuantizeActivation(b *testing.B) {
	const n = 4096
	x := randActivations(rand.New(rand.NewPCG(2, 2)), n)
	for _, vt := range []tensor.Type{tensor.Q8_0, tensor.Q8_1, tensor.Q8_K, tensor.F16} {
		b.Run(vt.String(), func(b *testing.B) {
			benchLevels(b, func(b *testing.B) {
				rb, _ := vt.RowBytes(n)
				dst := make([]byte, rb)
				b.SetBytes(4 * n)
				for b.Loop() {
					QuantizeActivation(vt, x, dst)
				}
			})
		})
	}
}

func BenchmarkFloat(b *testing.B) {
	const n = 128 // a typical head dimension
	rng := rand.New(rand.NewPCG(3, 3))
	x, y := randActivations(rng, n), randActivations(rng, n)
	hx, hy := make([]uint16, n), make([]uint16, n)
	ConvertF32ToF16(x, hx)
	ConvertF32ToF16(y, hy)
	b.Run("DotF32", func(b *testing.B) {
		benchLevels(b, func(b *testing.B) {
			for b.Loop() {
				DotF32(x, y)
			}
		})
	})
	b.Run("DotF16", func(b *testing.B) {
		benchLevels(b, func(b *testing.B) {
			for b.Loop() {
				DotF16(hx, hy)
			}
		})
	})
	b.Run("AxpyF32", func(b *testing.B) {
		benchLevels(b, func(b *testing.B) {
			for b.Loop() {
				AxpyF32(0.5, x, y)
			}
		})
	})
	b.Run("AxpyF16", func(b *testing.B) {
		benchLevels(b, func(b *testing.B) {
			for b.Loop() {
				AxpyF16(0.5, hx, y)
			}
		})
	})
}

// BenchmarkMatMul measures whole matrix products at the best level; the
// byte rate is of weight bytes per call (for nTok > 1 each weight byte
// serves nTok tokens).
func BenchmarkMatMul(b *testing.B) {
	cases := []struct {
		wt              tensor.Type
		nOut, nIn, nTok int
	}{
		{tensor.Q8_0, 2048, 2048, 1},
		{tensor.Q8_0, 2048, 2048, 32},
		{tensor.Q8_0, 5632, 2048, 1},
		{tensor.Q4_K, 5632, 2048, 1},
		{tensor.Q6_K, 5632, 2048, 1},
		{tensor.F16, 2048, 2048, 1},
		{tensor.Q4_K, 2048, 2048, 32},
	}
	for _, c := range cases {
		rng := rand.New(rand.NewPCG(4, 4))
		w := randWeights(rng, c.wt, c.nOut*c.nIn)
		x := randActivations(rng, c.nTok*c.nIn)
		y := make([]float32, c.nTok*c.nOut)
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/%dx%d/tok%d/th%d", c.wt, c.nOut, c.nIn, c.nTok, threads), func(b *testing.B) {
				p := NewPool(threads)
				defer p.Close()
				b.SetBytes(int64(len(w)))
				for b.Loop() {
					p.MatMul(c.wt, w, c.nOut, c.nIn, x, c.nTok, y)
				}
			})
		}
	}
}

// BenchmarkParallel measures a round of Parallel with trivial work: the
// cost of waking the helpers and waiting for them.
func BenchmarkParallel(b *testing.B) {
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("th%d", threads), func(b *testing.B) {
			p := NewPool(threads)
			defer p.Close()
			var sink [64]int
			fn := func(lo, hi int) { sink[lo%64] += hi }
			for b.Loop() {
				p.Parallel(64, fn)
			}
		})
	}
}

// BenchmarkDot4 compares four one-token dots with one four-token call on a
// 4096-element row (weight bytes counted once per token).
func BenchmarkDot4(b *testing.B) {
	const n = 4096
	for _, wt := range []tensor.Type{tensor.Q8_0, tensor.Q4_0, tensor.Q5_0, tensor.Q4_K, tensor.Q5_K, tensor.Q6_K, tensor.F16} {
		rng := rand.New(rand.NewPCG(5, 5))
		w := randWeights(rng, wt, n)
		x := randActivations(rng, 4*n)
		b.Run(wt.String(), func(b *testing.B) {
			benchLevels(b, func(b *testing.B) {
				ks := active.Load()
				vt := VecDotType(wt)
				arb, _ := vt.RowBytes(n)
				a := make([]byte, 4*arb)
				QuantizeActivation(vt, x, a)
				var m matmulState
				m.act, m.arb, m.nIn, m.nTok = a, arb, n, 4
				m.sizeTiles(vt)
				prepareTile(vt, a, arb, m.nb, m.prep)
				y := make([]float32, 4)
				b.SetBytes(int64(4 * len(w)))
				if ks.dot4[wt] == nil {
					for b.Loop() {
						for t := range 4 {
							y[t] = ks.vecDot[wt](n, w, a[t*arb:(t+1)*arb])
						}
					}
					return
				}
				for b.Loop() {
					ks.dot4[wt](w, a, arb, m.prep, m.nb, y, 1)
				}
			})
		})
	}
}

// BenchmarkParallelAfterWork measures a round of Parallel that follows a
// few µs of work on the caller alone (as between the steps of a forward
// pass), when the helpers may have gone idle.
func BenchmarkParallelAfterWork(b *testing.B) {
	x := randActivations(rand.New(rand.NewPCG(6, 6)), 4096)
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("th%d", threads), func(b *testing.B) {
			p := NewPool(threads)
			defer p.Close()
			var sink float32
			fn := func(lo, hi int) {
				for i := lo; i < hi; i++ {
					sink += DotF32(x[:256], x[256:512])
				}
			}
			for b.Loop() {
				for range 40 {
					sink += DotF32(x[:2048], x[2048:])
				}
				p.Parallel(64, fn)
			}
		})
	}
}
