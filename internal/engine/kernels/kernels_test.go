package kernels

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"tandem/internal/engine/tensor"
)

func TestBlockSizesMatchTensor(t *testing.T) {
	for _, c := range []struct {
		typ  tensor.Type
		size int
	}{
		{tensor.Q4_0, sizeQ4_0}, {tensor.Q4_1, sizeQ4_1}, {tensor.Q5_0, sizeQ5_0},
		{tensor.Q5_1, sizeQ5_1}, {tensor.Q8_0, sizeQ8_0}, {tensor.Q8_1, sizeQ8_1},
		{tensor.Q4_K, sizeQ4_K}, {tensor.Q5_K, sizeQ5_K}, {tensor.Q6_K, sizeQ6_K},
		{tensor.Q8_K, sizeQ8_K}, {tensor.Q2_K, sizeQ2_K}, {tensor.Q3_K, sizeQ3_K},
		{tensor.IQ4_NL, sizeIQ4_NL}, {tensor.IQ4_XS, sizeIQ4_XS}, {tensor.MXFP4, sizeMXFP4},
	} {
		if got := c.typ.TypeSize(); got != c.size {
			t.Errorf("%s.TypeSize() = %d, want the kernels' %d", c.typ, got, c.size)
		}
	}
}

func TestVecDotTypeAndRowBytes(t *testing.T) {
	for _, c := range []struct {
		wt, vt tensor.Type
		n      int
		bytes  int
	}{
		{tensor.F32, tensor.F32, 64, 256},
		{tensor.F16, tensor.F16, 64, 128},
		{tensor.BF16, tensor.BF16, 64, 128},
		{tensor.Q8_0, tensor.Q8_0, 64, 68},
		{tensor.Q4_0, tensor.Q8_0, 64, 68},
		{tensor.Q5_0, tensor.Q8_0, 64, 68},
		{tensor.Q4_1, tensor.Q8_1, 64, 72},
		{tensor.Q5_1, tensor.Q8_1, 64, 72},
		{tensor.Q4_K, tensor.Q8_K, 512, 584},
		{tensor.Q5_K, tensor.Q8_K, 512, 584},
		{tensor.Q6_K, tensor.Q8_K, 512, 584},
		{tensor.Q2_K, tensor.Q8_K, 512, 584},
		{tensor.Q3_K, tensor.Q8_K, 512, 584},
		{tensor.IQ4_XS, tensor.Q8_K, 512, 584},
		{tensor.IQ4_NL, tensor.Q8_0, 64, 68},
		{tensor.MXFP4, tensor.Q8_0, 64, 68},
		{tensor.Q4_K, tensor.Q8_K, 64, 0},         // not a whole super-block
		{tensor.Q8_0, tensor.Q8_0, 33, 0},         // not a whole block
		{tensor.I32, tensor.I32, 256, 0},          // unsupported
		{tensor.Type(99), tensor.Type(99), 32, 0}, // unknown
	} {
		if got := VecDotType(c.wt); got != c.vt {
			t.Errorf("VecDotType(%s) = %s, want %s", c.wt, got, c.vt)
		}
		if got := ActivationRowBytes(c.wt, c.n); got != c.bytes {
			t.Errorf("ActivationRowBytes(%s, %d) = %d, want %d", c.wt, c.n, got, c.bytes)
		}
	}
	for _, wt := range weightTypes {
		if !Supported(wt) {
			t.Errorf("Supported(%s) = false, want true", wt)
		}
	}
	for _, wt := range []tensor.Type{tensor.Q8_1, tensor.Q8_K, tensor.IQ2_XXS, tensor.I32, tensor.I8, tensor.Type(1000)} {
		if Supported(wt) {
			t.Errorf("Supported(%s) = true, want false", wt)
		}
	}
}

func TestLevels(t *testing.T) {
	if got := CurrentLevel(); got != MaxLevel() {
		t.Errorf("CurrentLevel() = %s at start, want MaxLevel() = %s", got, MaxLevel())
	}
	for _, c := range []struct {
		l    Level
		name string
	}{{Generic, "generic"}, {AVX2, "avx2"}, {AVX512, "avx512"}, {Level(7), "level(7)"}} {
		if got := c.l.String(); got != c.name {
			t.Errorf("Level(%d).String() = %q, want %q", int(c.l), got, c.name)
		}
	}
	if err := CheckLevel(Generic); err != nil {
		t.Errorf("CheckLevel(generic) = %v, want nil", err)
	}
	if err := CheckLevel(Level(7)); err == nil {
		t.Errorf("CheckLevel(level(7)) = nil, want an error")
	}
	// A CPU without some feature must be refused, naming it.
	noVNNI := cpuFeatures{hasAMD64: true, avx2: true, fma: true, f16c: true,
		avx512f: true, avx512bw: true, avx512vl: true, avx512dq: true}
	if m := noVNNI.missing(AVX512); strings.Join(m, ",") != "avx512vnni" {
		t.Errorf("missing(avx512) without VNNI = %v, want [avx512vnni]", m)
	}
	if m := (cpuFeatures{}).missing(AVX2); len(m) == 0 {
		t.Errorf("missing(avx2) on a bare CPU = %v, want the AVX2 features", m)
	}
	for _, l := range levels {
		if CheckLevel(l) != nil {
			continue
		}
		restore := SetLevel(l)
		if got := CurrentLevel(); got != l {
			t.Errorf("after SetLevel(%s): CurrentLevel() = %s", l, got)
		}
		restore()
	}
	if got := CurrentLevel(); got != MaxLevel() {
		t.Errorf("after restores: CurrentLevel() = %s, want %s", got, MaxLevel())
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Errorf("SetLevel(level(7)) did not panic")
			}
		}()
		SetLevel(Level(7))
	}()
}

// lengthsFor returns row lengths to test for wt: the smallest, odd block
// counts, and a long row.
func lengthsFor(wt tensor.Type) []int {
	bs := wt.BlockSize()
	if bs == 1 {
		return []int{1, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 100, 255, 256, 1000, 4099}
	}
	var ns []int
	for _, k := range []int{1, 2, 3, 5, 8, 17, 64} {
		ns = append(ns, k*bs)
	}
	return ns
}

func TestVecDotRandom(t *testing.T) {
	forEachLevel(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		for _, wt := range weightTypes {
			for _, n := range lengthsFor(wt) {
				for rep := 0; rep < 3; rep++ {
					w := randWeights(rng, wt, n)
					a := quantized(wt, randActivations(rng, n))
					want, abs := refDot(wt, n, w, a)
					if got := VecDot(wt, n, w, a); !closeTo(got, want, abs) {
						t.Errorf("VecDot(%s, %d, rep %d) = %g, want %g (abs sum %g)", wt, n, rep, got, want, abs)
					}
				}
			}
		}
	})
}

// TestVecDotGGMLWeights dots ggml-quantized weights (T.q of the shared
// vectors) and the random-byte blocks (rnd.T.q) with random activations.
func TestVecDotGGMLWeights(t *testing.T) {
	vecDotGGMLWeights(t, loadVectors(t))
}

// TestVecDotGGMLWeightsNewTypes is TestVecDotGGMLWeights on the committed
// vectors of MXFP4, IQ4_NL, IQ4_XS, Q3_K and Q2_K.
func TestVecDotGGMLWeightsNewTypes(t *testing.T) {
	vecDotGGMLWeights(t, loadGGMLVectors(t))
}

func vecDotGGMLWeights(t *testing.T, vecs map[string]vecTensor) {
	forEachLevel(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(3, 4))
		for _, wt := range weightTypes {
			for _, name := range []string{wt.String() + ".q", "rnd." + wt.String() + ".q"} {
				v, ok := vecs[name]
				if !ok {
					continue
				}
				const n = 512 // the vectors are [512, rows]
				rb, _ := wt.RowBytes(n)
				for r := 0; r < v.n/n; r++ {
					w := v.data[r*rb : (r+1)*rb]
					a := quantized(wt, randActivations(rng, n))
					want, abs := refDot(wt, n, w, a)
					if abs > math.MaxFloat32 {
						continue // MXFP4's extreme exponents: terms beyond float32
					}
					if got := VecDot(wt, n, w, a); !closeTo(got, want, abs) {
						t.Errorf("VecDot(%s row %d) = %g, want %g (abs sum %g)", name, r, got, want, abs)
					}
				}
			}
		}
	})
}

// setHalf writes the f16 of v at b.
func setHalf(b []byte, v float32) { binary.LittleEndian.PutUint16(b, tensor.FP32ToFP16(v)) }

// unitScales sets every scale field of the weight row to 1 (mins of the _1
// types to 0), so dot products are integers.
func unitScales(wt tensor.Type, w []byte) {
	ts := wt.TypeSize()
	for blk := 0; blk < len(w)/ts; blk++ {
		x := w[blk*ts:]
		switch wt {
		case tensor.Q8_0, tensor.Q4_0, tensor.Q5_0:
			setHalf(x, 1)
		case tensor.Q4_1, tensor.Q5_1:
			setHalf(x, 1)
			setHalf(x[2:], 0)
		case tensor.Q4_K, tensor.Q5_K:
			setHalf(x, 1)
			setHalf(x[2:], 1)
		case tensor.Q6_K:
			setHalf(x[208:], 1)
		case tensor.Q2_K:
			setHalf(x[80:], 1)
			setHalf(x[82:], 1)
		case tensor.Q3_K:
			setHalf(x[108:], 1)
		case tensor.IQ4_NL, tensor.IQ4_XS:
			setHalf(x, 1)
		case tensor.MXFP4:
			x[0] = 128 // 2^(128-128) = 1 times the doubled FP4 values
		}
	}
}

// intActivations returns a row of the vec dot type of wt with unit scales
// and the given quants (each in [-127, 127]), with consistent sums.
func intActivations(wt tensor.Type, q []int8) []byte {
	vt := VecDotType(wt)
	rb, _ := vt.RowBytes(len(q))
	a := make([]byte, rb)
	bs, ts := vt.BlockSize(), vt.TypeSize()
	for blk := 0; blk < len(q)/bs; blk++ {
		x, qs := a[blk*ts:], q[blk*bs:(blk+1)*bs]
		var sum int
		for _, v := range qs {
			sum += int(v)
		}
		switch vt {
		case tensor.Q8_0:
			setHalf(x, 1)
			for j, v := range qs {
				x[2+j] = byte(v)
			}
		case tensor.Q8_1:
			setHalf(x, 1)
			setHalf(x[2:], float32(sum))
			for j, v := range qs {
				x[4+j] = byte(v)
			}
		case tensor.Q8_K:
			binary.LittleEndian.PutUint32(x, math.Float32bits(1))
			for j, v := range qs {
				x[4+j] = byte(v)
			}
			for g := range 16 {
				var s int16
				for _, v := range qs[16*g : 16*g+16] {
					s += int16(v)
				}
				binary.LittleEndian.PutUint16(x[4+256+2*g:], uint16(s))
			}
		}
	}
	return a
}

// TestVecDotExactIntegers checks that the integer part of every quantized
// kernel is exact: with unit scales the dot is an integer below 2^24, which
// float32 holds exactly whatever the summation order.
func TestVecDotExactIntegers(t *testing.T) {
	forEachLevel(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(5, 6))
		checked := 0
		for _, wt := range weightTypes {
			if wt.BlockSize() == 1 {
				continue
			}
			for _, k := range []int{1, 2, 3, 4} {
				n := k * wt.BlockSize()
				for rep := 0; rep < 20; rep++ {
					w := randWeights(rng, wt, n)
					unitScales(wt, w)
					// Full-range quants, and small ones so that Q6_K's
					// large scales still give sums below 2^24.
					lim := 127
					if rep%2 == 1 {
						lim = 7
					}
					q := make([]int8, n)
					for i := range q {
						q[i] = int8(rng.IntN(2*lim+1) - lim)
					}
					a := intActivations(wt, q)
					want, abs := refDot(wt, n, w, a)
					if abs >= 1<<24 {
						continue
					}
					checked++
					if got := VecDot(wt, n, w, a); float64(got) != want {
						t.Errorf("VecDot(%s, %d, unit scales, rep %d) = %v, want exactly %v", wt, n, rep, got, want)
					}
				}
			}
		}
		if checked < 300 {
			t.Errorf("only %d exact cases were small enough to check", checked)
		}
	})
}

// TestVecDotMinus128 checks weights of -128 (legal in a file, never made by
// ggml's quantizer) against activations at the ±127 extremes.
func TestVecDotMinus128(t *testing.T) {
	forEachLevel(t, func(t *testing.T) {
		for _, av := range []int8{127, -127, 1, -1, 0} {
			const n = 96
			w := make([]byte, 3*sizeQ8_0)
			for b := 0; b < 3; b++ {
				setHalf(w[b*sizeQ8_0:], 1)
				for j := 0; j < 32; j++ {
					w[b*sizeQ8_0+2+j] = 0x80
				}
			}
			q := make([]int8, n)
			for i := range q {
				q[i] = av
			}
			a := intActivations(tensor.Q8_0, q)
			want := float32(-128 * int(av) * n)
			if got := VecDot(tensor.Q8_0, n, w, a); got != want {
				t.Errorf("VecDot(q8_0 all -128 · all %d) = %v, want %v", av, got, want)
			}
		}
		// Q6_K scales of -128 with extreme quants.
		w := make([]byte, sizeQ6_K)
		for i := 0; i < 192; i++ {
			w[i] = 0xFF // every 6-bit quant = 63 → q = 31
		}
		for i := 192; i < 208; i++ {
			w[i] = 0x80
		}
		setHalf(w[208:], 1)
		q := make([]int8, 256)
		for i := range q {
			q[i] = -127
		}
		want := float32(-128 * 31 * -127 * 256)
		if got := VecDot(tensor.Q6_K, 256, w, intActivations(tensor.Q6_K, q)); got != want {
			t.Errorf("VecDot(q6_k extremes) = %v, want %v", got, want)
		}
	})
}

func TestVecDotPanicsOnBadShape(t *testing.T) {
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"unsupported type", func() { VecDot(tensor.I32, 256, make([]byte, 1024), make([]byte, 1024)) }},
		{"partial block", func() { VecDot(tensor.Q8_0, 40, make([]byte, 68), make([]byte, 68)) }},
		{"short weight row", func() { VecDot(tensor.Q8_0, 64, make([]byte, 34), make([]byte, 68)) }},
		{"short activation row", func() { VecDot(tensor.Q4_K, 256, make([]byte, 144), make([]byte, 100)) }},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("VecDot with %s did not panic", c.name)
				}
			}()
			c.f()
		}()
	}
	if got := VecDot(tensor.Q8_0, 0, nil, nil); got != 0 {
		t.Errorf("VecDot(q8_0, 0, nil, nil) = %v, want 0", got)
	}
}

// TestVecDotUnalignedFloatRows covers F32/F16 rows that do not start on an
// element boundary (the byte-wise path).
func TestVecDotUnalignedFloatRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, wt := range []tensor.Type{tensor.F32, tensor.F16} {
		const n = 37
		w := randWeights(rng, wt, n)
		a := quantized(wt, randActivations(rng, n))
		want, abs := refDot(wt, n, w, a)
		wu := append(make([]byte, 1, 1+len(w)), w...)[1:]
		au := append(make([]byte, 1, 1+len(a)), a...)[1:]
		if got := VecDot(wt, n, wu, au); !closeTo(got, want, abs) {
			t.Errorf("VecDot(%s, unaligned) = %g, want %g", wt, got, want)
		}
	}
}

// TestDequantizerMatchesGGML checks the test's own dequantizer (the basis of
// every reference here) against ggml's dequantized vectors, exactly.
func TestDequantizerMatchesGGML(t *testing.T) {
	if n := dequantizerMatches(t, loadVectors(t)); n < 9 {
		t.Errorf("only %d type vectors found in the test file, want at least 9", n)
	}
}

// TestDequantizerMatchesGGMLNewTypes is TestDequantizerMatchesGGML on the
// committed vectors of MXFP4, IQ4_NL, IQ4_XS, Q3_K and Q2_K.
func TestDequantizerMatchesGGMLNewTypes(t *testing.T) {
	if n := dequantizerMatches(t, loadGGMLVectors(t)); n != 10 {
		t.Errorf("%d type vectors found in the test file, want 10", n)
	}
}

// dequantizerMatches compares deq of every T.q and rnd.T.q in vecs with
// ggml's T.deq and returns how many it checked.
func dequantizerMatches(t *testing.T, vecs map[string]vecTensor) int {
	t.Helper()
	checked := 0
	for _, wt := range weightTypes {
		for _, prefix := range []string{"", "rnd."} {
			q, okq := vecs[prefix+wt.String()+".q"]
			d, okd := vecs[prefix+wt.String()+".deq"]
			if !okq || !okd {
				continue
			}
			checked++
			got := deq(wt, q.data, q.n)
			want := deq(tensor.F32, d.data, d.n)
			bad := 0
			for i := range want {
				if float32(got[i]) != float32(want[i]) {
					if bad < 3 {
						t.Errorf("deq(%s%s)[%d] = %v, ggml %v", prefix, wt, i, got[i], want[i])
					}
					bad++
				}
			}
			if bad > 0 {
				t.Errorf("deq(%s%s): %d of %d values differ from ggml", prefix, wt, bad, len(want))
			}
		}
	}
	return checked
}

func TestFloatKernels(t *testing.T) {
	forEachLevel(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(9, 10))
		for _, n := range lengthsFor(tensor.F32) {
			a, b := randActivations(rng, n), randActivations(rng, n)
			ha, hb := make([]uint16, n), make([]uint16, n)
			for i := range a {
				ha[i], hb[i] = tensor.FP32ToFP16(a[i]), tensor.FP32ToFP16(b[i])
			}
			var want, abs, want16, abs16 float64
			for i := range a {
				p := float64(a[i]) * float64(b[i])
				want, abs = want+p, abs+math.Abs(p)
				p = float64(tensor.FP16ToFP32(ha[i])) * float64(tensor.FP16ToFP32(hb[i]))
				want16, abs16 = want16+p, abs16+math.Abs(p)
			}
			if got := DotF32(a, b); !closeTo(got, want, abs) {
				t.Errorf("DotF32(n=%d) = %g, want %g", n, got, want)
			}
			if got := DotF16(ha, hb); !closeTo(got, want16, abs16) {
				t.Errorf("DotF16(n=%d) = %g, want %g", n, got, want16)
			}

			const alpha = 0.37
			y, y16 := append([]float32(nil), b...), append([]float32(nil), b...)
			AxpyF32(alpha, a, y)
			AxpyF16(alpha, ha, y16)
			for i := range a {
				// FMA or not, the error is at most one rounding of each step.
				w := float64(b[i]) + alpha*float64(a[i])
				tol := 2.5e-7 * (math.Abs(float64(b[i])) + math.Abs(alpha*float64(a[i])))
				if math.Abs(float64(y[i])-w) > tol {
					t.Errorf("AxpyF32(n=%d)[%d] = %g, want %g", n, i, y[i], w)
					break
				}
				w = float64(b[i]) + alpha*float64(tensor.FP16ToFP32(ha[i]))
				if math.Abs(float64(y16[i])-w) > tol*2 {
					t.Errorf("AxpyF16(n=%d)[%d] = %g, want %g", n, i, y16[i], w)
					break
				}
			}
		}
	})
}

func TestAxpyKeepsTail(t *testing.T) {
	forEachLevel(t, func(t *testing.T) {
		x := make([]float32, 20)
		y := make([]float32, 24)
		for i := range x {
			x[i] = 1
		}
		for i := range y {
			y[i] = 5
		}
		AxpyF32(2, x, y)
		hx := make([]uint16, 20)
		ConvertF32ToF16(x, hx)
		AxpyF16(1, hx, y)
		for i, v := range y {
			want := float32(8)
			if i >= 20 {
				want = 5
			}
			if v != want {
				t.Errorf("y[%d] = %v after axpys, want %v", i, v, want)
			}
		}
	})
}

func TestConvertF16(t *testing.T) {
	forEachLevel(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(11, 12))
		special := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 65504, 65520, 1e6, -1e6, 6e-8, 3e-8, 2.9e-8,
			6.1e-5, 6.09e-5, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1.0009765625, 1.00048828125}
		for _, n := range []int{0, 1, 7, 8, 9, 16, 33, 1000} {
			src := make([]float32, n)
			for i := range src {
				if i < len(special) && n > 8 {
					src[i] = special[i]
				} else {
					src[i] = float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(40)-25)))
				}
			}
			h := make([]uint16, n)
			ConvertF32ToF16(src, h)
			back := make([]float32, n)
			ConvertF16ToF32(h, back)
			for i, f := range src {
				want := tensor.FP32ToFP16(f)
				if f != f {
					if h[i]&0x7c00 != 0x7c00 || h[i]&0x3ff == 0 {
						t.Errorf("ConvertF32ToF16(NaN) = %#04x, want a NaN", h[i])
					}
					continue
				}
				if h[i] != want {
					t.Errorf("ConvertF32ToF16(%g) = %#04x, want %#04x", f, h[i], want)
				}
				if wb := tensor.FP16ToFP32(h[i]); math.Float32bits(back[i]) != math.Float32bits(wb) {
					t.Errorf("ConvertF16ToF32(%#04x) = %g, want %g", h[i], back[i], wb)
				}
			}
		}
	})
}
