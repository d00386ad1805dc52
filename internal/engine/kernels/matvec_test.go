package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"tandem/internal/engine/tensor"
)

// TestMatVecsEqualsVecDot: at every level and thread count, every output
// of MatVecs (several products of one input, mixed weight types) and of
// MatMul with one token equals VecDot of its row bit for bit.
func TestMatVecsEqualsVecDot(t *testing.T) {
	forEachLevel(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(11, 11))
		for _, nIn := range []int{256, 768, 2048 + 256} {
			x := randActivations(rng, nIn)
			for _, types := range [][]tensor.Type{
				{tensor.Q8_0, tensor.Q8_0, tensor.Q8_0},
				{tensor.Q4_K, tensor.Q6_K},
				{tensor.Q8_0, tensor.Q4_0, tensor.F16, tensor.Q5_1},
				{tensor.F32, tensor.BF16, tensor.Q5_K},
			} {
				ops := make([]MatVec, len(types))
				for i, wt := range types {
					out := []int{1, 7, 130, 500}[i]
					ops[i] = MatVec{Type: wt, W: randWeights(rng, wt, out*nIn), Out: out, Y: make([]float32, out)}
				}
				for _, threads := range []int{1, 2, 3} {
					p := NewPool(threads)
					p.MatVecs(nIn, x, ops...)
					for _, op := range ops {
						a := quantized(op.Type, x)
						wrb, _ := op.Type.RowBytes(nIn)
						y1 := make([]float32, op.Out)
						p.MatMul(op.Type, op.W, op.Out, nIn, x, 1, y1)
						for o := range op.Out {
							want := VecDot(op.Type, nIn, op.W[o*wrb:(o+1)*wrb], a)
							if math.Float32bits(op.Y[o]) != math.Float32bits(want) || math.Float32bits(y1[o]) != math.Float32bits(want) {
								t.Fatalf("%s %d wide, %d threads, row %d: MatVecs %v, MatMul %v, VecDot %v",
									op.Type, nIn, threads, o, op.Y[o], y1[o], want)
							}
						}
					}
					p.Close()
				}
			}
		}
	})
}

// TestMatvecQ8_0Kernel checks the many-row Q8_0 assembly against its Go
// reference (to float32 rounding) and against the level's VecDot (bit for
// bit), for odd and even block counts, row counts 1 to 9, every weight
// byte pattern (random bytes include -128) and activations at the quant
// range's ends.
func TestMatvecQ8_0Kernel(t *testing.T) {
	forEachLevel(t, func(t *testing.T) {
		f, ok := matvecFormFor(active.Load().level, tensor.Q8_0)
		if !ok {
			t.Skip("no many-row Q8_0 kernel at this level")
		}
		rng := rand.New(rand.NewPCG(12, 12))
		for _, nb := range []int{1, 2, 3, 5, 24, 64, 65} {
			n := nb * qk
			for _, nrows := range []int{1, 2, 4, 9} {
				w := randWeights(rng, tensor.Q8_0, nrows*n)
				x := randActivations(rng, n)
				if nrows == 4 {
					for i := range x { // every quant ±127
						x[i] = float32(1 - 2*(i%2))
					}
				}
				a := quantized(tensor.Q8_0, x)
				prep := make([]byte, f.prepBytes(nb)+7)
				for i := range prep {
					prep[i] = 0xAA // the kernel must not depend on stale bytes
				}
				f.prepare(a, nb, prep)
				got := make([]float32, nrows+1)
				f.rows(w, n/qk*sizeQ8_0, nrows, prep, nb, got[:nrows])
				ref := make([]float32, nrows)
				matvecQ8_0Ref(w, nb*sizeQ8_0, nrows, prep, nb, ref)
				if got[nrows] != 0 {
					t.Fatalf("nb %d: the kernel wrote past its %d rows", nb, nrows)
				}
				for r := range nrows {
					row := w[r*nb*sizeQ8_0 : (r+1)*nb*sizeQ8_0]
					want := VecDot(tensor.Q8_0, n, row, a)
					if math.Float32bits(got[r]) != math.Float32bits(want) {
						t.Fatalf("nb %d, %d rows, row %d: kernel %v, VecDot %v", nb, nrows, r, got[r], want)
					}
					_, abs := refDot(tensor.Q8_0, n, row, a)
					if !closeTo(got[r], float64(ref[r]), abs) {
						t.Fatalf("nb %d, %d rows, row %d: kernel %v, Go reference %v", nb, nrows, r, got[r], ref[r])
					}
				}
			}
		}
	})
}

// TestMatvecQ8_0RefExact checks the Go reference itself against the
// float64 dot of the test's own dequantizers.
func TestMatvecQ8_0RefExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 13))
	for _, nb := range []int{1, 4, 7} {
		n := nb * qk
		w := randWeights(rng, tensor.Q8_0, 3*n)
		a := quantized(tensor.Q8_0, randActivations(rng, n))
		prep := make([]byte, matvecQ8_0PrepBytes(nb))
		prepareMatvecQ8_0(a, nb, prep)
		y := make([]float32, 3)
		matvecQ8_0Ref(w, nb*sizeQ8_0, 3, prep, nb, y)
		for r := range 3 {
			want, abs := refDot(tensor.Q8_0, n, w[r*nb*sizeQ8_0:(r+1)*nb*sizeQ8_0], a)
			if !closeTo(y[r], want, abs) {
				t.Fatalf("nb %d row %d: reference %v, float64 dot %v", nb, r, y[r], want)
			}
		}
	}
}

// TestMatVecsAllocs: MatVecs allocates nothing once its scratch is grown.
func TestMatVecsAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 14))
	const nIn = 768
	x := randActivations(rng, nIn)
	ops := []MatVec{
		{Type: tensor.Q8_0, W: randWeights(rng, tensor.Q8_0, 300*nIn), Out: 300, Y: make([]float32, 300)},
		{Type: tensor.Q6_K, W: randWeights(rng, tensor.Q6_K, 200*nIn), Out: 200, Y: make([]float32, 200)},
	}
	p := NewPool(2)
	defer p.Close()
	p.MatVecs(nIn, x, ops...)
	if n := testing.AllocsPerRun(20, func() { p.MatVecs(nIn, x, ops...) }); n != 0 {
		t.Errorf("MatVecs allocates %v times per call, want 0", n)
	}
}

// BenchmarkMatVec compares the one-token products of a decode step's shapes
// (110m and 1b, Q8_0, and the 1b Q4_K model's Q4_K and Q6_K tensors)
// between MatMul one row per call (the old path: VecDot per row, one round
// per product) and MatVecs (many-row kernel, one round for the products of
// one input). Weights are cycled through 256 MiB so they come from memory
// as in decode, except in the L2 cases; the byte rate is of weight bytes.
// cpu-ns/op is the calling thread's CPU time (all of the work at th1).
func BenchmarkMatVec(b *testing.B) {
	for _, c := range []struct {
		name    string
		wt      tensor.Type
		nIn     int
		outs    []int
		inCache bool // one copy of the weights (in L2): the kernels' compute rate
	}{
		{"110m-q-L2", tensor.Q8_0, 768, []int{768}, true},
		{"110m-qkv", tensor.Q8_0, 768, []int{768, 768, 768}, false},
		{"110m-gateup", tensor.Q8_0, 768, []int{2048, 2048}, false},
		{"110m-down", tensor.Q8_0, 2048, []int{768}, false},
		{"1b-gateup", tensor.Q8_0, 2048, []int{5632, 5632}, false},
		{"1b-down", tensor.Q8_0, 5632, []int{2048}, false},
		{"1b-q-q4k-L2", tensor.Q4_K, 2048, []int{256}, true},
		{"1b-q-q4k", tensor.Q4_K, 2048, []int{2048}, false},
		{"1b-kv-q4k", tensor.Q4_K, 2048, []int{256}, false},
		{"1b-gateup-q4k", tensor.Q4_K, 2048, []int{5632, 5632}, false},
		{"1b-down-q4k", tensor.Q4_K, 5632, []int{2048}, false},
		{"1b-v-q6k-L2", tensor.Q6_K, 2048, []int{256}, true},
		{"1b-v-q6k", tensor.Q6_K, 2048, []int{256}, false},
		{"1b-down-q6k", tensor.Q6_K, 5632, []int{2048}, false},
		{"1b-output-q6k", tensor.Q6_K, 2048, []int{32000}, false},
		{"1b-q-iq4xs-L2", tensor.IQ4_XS, 2048, []int{256}, true},
		{"1b-gateup-iq4xs", tensor.IQ4_XS, 2048, []int{5632, 5632}, false},
		{"1b-down-iq4xs", tensor.IQ4_XS, 5632, []int{2048}, false},
		{"1b-q-q3k-L2", tensor.Q3_K, 2048, []int{256}, true},
		{"1b-gateup-q3k", tensor.Q3_K, 2048, []int{5632, 5632}, false},
		{"1b-q-q2k-L2", tensor.Q2_K, 2048, []int{256}, true},
		{"1b-gateup-q2k", tensor.Q2_K, 2048, []int{5632, 5632}, false},
	} {
		rng := rand.New(rand.NewPCG(15, 15))
		x := randActivations(rng, c.nIn)
		rows := 0
		for _, o := range c.outs {
			rows += o
		}
		wrb, _ := c.wt.RowBytes(c.nIn)
		copies := max(1, (256<<20)/(rows*wrb))
		if c.inCache {
			copies = 1
		}
		one := randWeights(rng, c.wt, rows*c.nIn)
		ws := make([][]byte, copies)
		for i := range ws {
			ws[i] = append([]byte(nil), one...)
		}
		y := make([]float32, rows)
		for _, threads := range []int{1, 2} {
			p := NewPool(threads)
			b.Run(fmt.Sprintf("%s/th%d/rowbyrow", c.name, threads), func(b *testing.B) {
				b.SetBytes(int64(rows * wrb))
				i := 0
				loopCPU(b, func() {
					w := ws[i%copies]
					i++
					o := 0
					for _, out := range c.outs {
						p.matMulRowByRow(c.wt, w[o*wrb:(o+out)*wrb], out, c.nIn, x, y[o:o+out])
						o += out
					}
				})
			})
			b.Run(fmt.Sprintf("%s/th%d/matvecs", c.name, threads), func(b *testing.B) {
				b.SetBytes(int64(rows * wrb))
				var ops [MaxMatVecs]MatVec
				i := 0
				loopCPU(b, func() {
					w := ws[i%copies]
					i++
					o := 0
					for k, out := range c.outs {
						ops[k] = MatVec{Type: c.wt, W: w[o*wrb : (o+out)*wrb], Out: out, Y: y[o : o+out]}
						o += out
					}
					p.MatVecs(c.nIn, x, ops[:len(c.outs)]...)
				})
			})
			p.Close()
		}
	}
}

// matMulRowByRow is MatMul's one-token path before MatVecs, for the
// benchmark: VecDot per row, rows in chunks of whole 24 KiB groups, about
// four chunks per thread, one round per product.
func (p *Pool) matMulRowByRow(wt tensor.Type, w []byte, nOut, nIn int, x []float32, y []float32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ks := active.Load()
	vt := VecDotType(wt)
	arb, _ := vt.RowBytes(nIn)
	wrb, _ := wt.RowBytes(nIn)
	if cap(p.mm.actStore) < arb {
		p.mm.actStore = make([]byte, arb)
	}
	a := p.mm.actStore[:arb]
	ks.quantize[vt](x[:nIn], a)
	dot := ks.vecDot[wt]
	fn := func(lo, hi int) {
		for o := lo; o < hi; o++ {
			y[o] = dot(nIn, w[o*wrb:(o+1)*wrb], a)
		}
	}
	group := max(1, groupBytes/wrb)
	if nOut*wrb < serialBytes {
		fn(0, nOut)
		return
	}
	groups := (nOut + group - 1) / group
	perChunk := max(1, groups/(p.threads*chunksPerThread))
	p.run(nOut, perChunk*group, fn)
}
