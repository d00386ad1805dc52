package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"tandem/internal/engine/tensor"
)

// actErrBound returns, per element of x, a bound on |x - decoded
// activation| for the vec dot type vt, derived from the quantizer's rule
// (not from its output).
func actErrBound(vt tensor.Type, x []float32) []float64 {
	e := make([]float64, len(x))
	bs := vt.BlockSize()
	for b := 0; b < len(x)/bs; b++ {
		var amax float64
		for _, v := range x[b*bs : (b+1)*bs] {
			amax = max(amax, math.Abs(float64(v)))
		}
		step := amax / 127
		for i := b * bs; i < (b+1)*bs; i++ {
			ax := math.Abs(float64(x[i]))
			switch vt {
			case tensor.F32:
				e[i] = 0
			case tensor.F16:
				e[i] = ax/2048 + 1.0/(1<<25)
			case tensor.BF16:
				e[i] = ax / 256
			case tensor.Q8_0, tensor.Q8_1:
				e[i] = step/2 + 127*max(step/2048, 1.0/(1<<25))
			case tensor.Q8_K:
				e[i] = step / 2 * (1 + 1e-6)
			}
		}
	}
	return e
}

// naiveBound returns Σ w·x in float64 with the decoded weights, and the
// largest difference MatMul may show from it: the activation quantization
// error weighted by |w|, the Q8_1 s rounding for the _1 types' mins, and
// float rounding (1e-5 of Σ|w·x|).
func naiveBound(wt tensor.Type, w []byte, x []float32) (want, bound float64) {
	n := len(x)
	wd := deq(wt, w, n)
	e := actErrBound(VecDotType(wt), x)
	var abs float64
	for i := range wd {
		mag := math.Abs(wd[i])
		if wt == tensor.Q4_1 || wt == tensor.Q5_1 {
			m := f16At(w[i/qk*wt.TypeSize()+2:])
			mag = math.Abs(wd[i]-m) + math.Abs(m)
			if i%qk == 0 { // s = f16(d·Σq) rounding, |d·Σq| <= Σ|x| + Σe
				var sx float64
				for _, v := range x[i : i+qk] {
					sx += math.Abs(float64(v))
				}
				bound += math.Abs(m) * ((sx+32*e[i])/2048 + 1.0/(1<<25))
			}
		}
		want += wd[i] * float64(x[i])
		bound += mag * e[i]
		abs += mag * math.Abs(float64(x[i]))
	}
	return want, bound + 1e-5*abs
}

func TestMatMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	shapes := []struct{ nOut, nTok int }{
		{37, 1}, {37, 7}, // below the serial threshold
		{300, 1}, {300, 7}, // split over the workers
		{64, 33},            // quantization split over the workers too
		{40, 20},            // eight- and four-token tiles, staged serially
		{300, 12}, {64, 44}, // eight- and four-token tiles, staged in parallel
	}
	forEachLevel(t, func(t *testing.T) {
		for _, wt := range weightTypes {
			nIn := 512
			for _, sh := range shapes {
				name := fmt.Sprintf("%s %dx%d tok %d", wt, sh.nOut, nIn, sh.nTok)
				w := randWeights(rng, wt, sh.nOut*nIn)
				x := randActivations(rng, sh.nTok*nIn)
				wrb, _ := wt.RowBytes(nIn)
				var first []float32
				for _, threads := range []int{1, 2, 3} {
					p := NewPool(threads)
					y := make([]float32, sh.nTok*sh.nOut+1)
					y[len(y)-1] = 42 // must stay untouched
					p.MatMul(wt, w, sh.nOut, nIn, x, sh.nTok, y[:sh.nTok*sh.nOut])
					p.Close()
					if y[len(y)-1] != 42 {
						t.Errorf("MatMul(%s) wrote past y", name)
					}
					y = y[:len(y)-1]
					if first == nil {
						first = y
						continue
					}
					for i := range y {
						if math.Float32bits(y[i]) != math.Float32bits(first[i]) {
							t.Errorf("MatMul(%s) with %d threads: y[%d] = %v, with 1 thread %v (must be bit-identical)",
								name, threads, i, y[i], first[i])
							break
						}
					}
				}
				bad := 0
				for tk := 0; tk < sh.nTok; tk++ {
					xt := x[tk*nIn : (tk+1)*nIn]
					a := quantized(wt, xt)
					for o := 0; o < sh.nOut; o++ {
						wr := w[o*wrb : (o+1)*wrb]
						got := first[tk*sh.nOut+o]
						want, abs := refDot(wt, nIn, wr, a)
						naive, bound := naiveBound(wt, wr, xt)
						if (!closeTo(got, want, abs) || math.Abs(float64(got)-naive) > bound) && bad < 3 {
							bad++
							t.Errorf("MatMul(%s) y[tok %d, row %d] = %g, want %g (abs %g); naive dequantized %g ± %g",
								name, tk, o, got, want, abs, naive, bound)
						}
					}
				}
			}
		}
	})
}

func TestMatMulConcurrentCallers(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	const nOut, nIn, nTok = 200, 256, 3
	p := NewPool(2)
	defer p.Close()
	type job struct {
		wt   tensor.Type
		w    []byte
		x    []float32
		want []float32
	}
	var jobs []job
	for _, wt := range []tensor.Type{tensor.Q8_0, tensor.Q4_K, tensor.F16, tensor.Q6_K} {
		j := job{wt: wt, w: randWeights(rng, wt, nOut*nIn), x: randActivations(rng, nTok*nIn)}
		j.want = make([]float32, nOut*nTok)
		p.MatMul(wt, j.w, nOut, nIn, j.x, nTok, j.want)
		jobs = append(jobs, j)
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for rep := 0; rep < 5; rep++ {
				j := jobs[(g+rep)%len(jobs)]
				y := make([]float32, nOut*nTok)
				p.MatMul(j.wt, j.w, nOut, nIn, j.x, nTok, y)
				for i := range y {
					if y[i] != j.want[i] {
						t.Errorf("concurrent MatMul(%s) y[%d] = %v, alone %v", j.wt, i, y[i], j.want[i])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}

func TestMatMulAllocatesNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 36))
	const nOut, nIn, nTok = 256, 1024, 8
	p := NewPool(2)
	defer p.Close()
	for _, wt := range []tensor.Type{tensor.Q8_0, tensor.Q4_K, tensor.F32} {
		w := randWeights(rng, wt, nOut*nIn)
		x := randActivations(rng, nTok*nIn)
		y := make([]float32, nOut*nTok)
		p.MatMul(wt, w, nOut, nIn, x, nTok, y) // grow the scratch
		if allocs := testing.AllocsPerRun(20, func() { p.MatMul(wt, w, nOut, nIn, x, nTok, y) }); allocs != 0 {
			t.Errorf("MatMul(%s) allocates %v times per call in steady state, want 0", wt, allocs)
		}
	}
}

func TestMatMulPanics(t *testing.T) {
	p := NewPool(2)
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"unsupported type", func() { p.MatMul(tensor.I32, make([]byte, 1024), 1, 256, make([]float32, 256), 1, make([]float32, 1)) }},
		{"partial block", func() { p.MatMul(tensor.Q8_0, make([]byte, 68), 1, 48, make([]float32, 48), 1, make([]float32, 1)) }},
		{"short w", func() { p.MatMul(tensor.Q8_0, make([]byte, 67), 2, 32, make([]float32, 32), 1, make([]float32, 2)) }},
		{"short x", func() { p.MatMul(tensor.Q8_0, make([]byte, 68), 2, 32, make([]float32, 63), 2, make([]float32, 4)) }},
		{"short y", func() { p.MatMul(tensor.Q8_0, make([]byte, 68), 2, 32, make([]float32, 64), 2, make([]float32, 3)) }},
		{"closed pool", func() {
			p.Close()
			p.MatMul(tensor.Q8_0, make([]byte, 68), 2, 32, make([]float32, 64), 2, make([]float32, 4))
		}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("MatMul with %s did not panic", c.name)
				}
			}()
			c.f()
		}()
	}
}

// TestMatMulBatchInvariant checks that a token's outputs do not depend on
// the other tokens of the batch: MatMul of nTok tokens gives, bit for bit,
// what MatMul of each token alone gives (the engine's batched and solo
// generations must agree).
func TestMatMulBatchInvariant(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 38))
	forEachLevel(t, func(t *testing.T) {
		p := NewPool(2)
		defer p.Close()
		for _, wt := range weightTypes {
			// Row lengths for every loop shape: one block, even and odd block
			// counts, float rows below and between the vector widths.
			ins := []int{wt.BlockSize(), 2 * wt.BlockSize(), 3 * wt.BlockSize(), 512}
			if wt.BlockSize() == 1 {
				ins = []int{5, 37, 100, 200, 512}
			}
			for _, nIn := range ins {
				const nOut, nTok = 150, 21 // wide, four-token and single tiles
				w := randWeights(rng, wt, nOut*nIn)
				x := randActivations(rng, nTok*nIn)
				y := make([]float32, nTok*nOut)
				p.MatMul(wt, w, nOut, nIn, x, nTok, y)
				for tk := 0; tk < nTok; tk++ {
					alone := make([]float32, nOut)
					p.MatMul(wt, w, nOut, nIn, x[tk*nIn:(tk+1)*nIn], 1, alone)
					for o := range alone {
						if math.Float32bits(alone[o]) != math.Float32bits(y[tk*nOut+o]) {
							t.Errorf("MatMul(%s, nIn %d): token %d row %d = %v in a batch of %d, %v alone",
								wt, nIn, tk, o, y[tk*nOut+o], nTok, alone[o])
							break
						}
					}
				}
			}
		}
	})
}
