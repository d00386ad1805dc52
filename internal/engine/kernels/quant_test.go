package kernels

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"tandem/internal/engine/tensor"
)

// refQuantQ8 is a plain restatement of ggml's quantize_row_q8_0_ref (and,
// with sums, q8_1): d = amax/127, id = 1/d, q = roundf(x·id).
func refQuantQ8(x []float32, withSum bool) []byte {
	var out []byte
	for b := 0; b < len(x)/32; b++ {
		blk := x[32*b : 32*b+32]
		var amax float32
		for _, v := range blk {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := amax / 127
		id := float32(0)
		if d != 0 {
			id = 1 / d
		}
		q := make([]byte, 32)
		sum := 0
		for j, v := range blk {
			r := int(math.Round(float64(v * id)))
			q[j] = byte(int8(r))
			sum += r
		}
		out = binary.LittleEndian.AppendUint16(out, tensor.FP32ToFP16(d))
		if withSum {
			out = binary.LittleEndian.AppendUint16(out, tensor.FP32ToFP16(float32(sum)*d))
		}
		out = append(out, q...)
	}
	return out
}

// nearestIntGGML is ggml's nearest_int, bit trick and all.
func nearestIntGGML(f float32) int {
	v := f + 12582912
	return int(int32(math.Float32bits(v)&0x007fffff) - 0x00400000)
}

// refQuantQ8K restates ggml's quantize_row_q8_K_ref.
func refQuantQ8K(x []float32) []byte {
	var out []byte
	for b := 0; b < len(x)/256; b++ {
		blk := x[256*b : 256*b+256]
		var amax, mx float32
		for _, v := range blk {
			if a := float32(math.Abs(float64(v))); a > amax {
				amax, mx = a, v
			}
		}
		block := make([]byte, sizeQ8_K)
		if amax != 0 {
			iscale := -127 / mx
			for j, v := range blk {
				block[4+j] = byte(int8(min(127, nearestIntGGML(iscale*v))))
			}
			for g := range 16 {
				var s int16
				for j := range 16 {
					s += int16(int8(block[4+16*g+j]))
				}
				binary.LittleEndian.PutUint16(block[260+2*g:], uint16(s))
			}
			binary.LittleEndian.PutUint32(block, math.Float32bits(1/iscale))
		}
		out = append(out, block...)
	}
	return out
}

func TestQuantizeActivationVsReference(t *testing.T) {
	forEachLevel(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(21, 22))
		for _, n := range []int{256, 512, 4096} {
			x := randActivations(rng, n)
			// Exact ties: values that land on k+0.5 after scaling.
			for i := 0; i < n; i += 37 {
				x[i] = float32(int(x[i]*4)) / 4
			}
			x[3] = 0 // a zero inside a non-zero block
			for _, c := range []struct {
				vt   tensor.Type
				want []byte
			}{
				{tensor.Q8_0, refQuantQ8(x, false)},
				{tensor.Q8_1, refQuantQ8(x, true)},
				{tensor.Q8_K, refQuantQ8K(x)},
			} {
				got := make([]byte, len(c.want))
				QuantizeActivation(c.vt, x, got)
				if !bytes.Equal(got, c.want) {
					i := 0
					for got[i] == c.want[i] {
						i++
					}
					t.Errorf("QuantizeActivation(%s, n=%d): byte %d = %#x, reference %#x", c.vt, n, i, got[i], c.want[i])
				}
			}
		}
	})
}

// TestQuantizeQ8_0MatchesGGML compares with ggml's own Q8_0 quantization of
// the shared vectors' src tensor (ggml uses the same rule for weights).
func TestQuantizeQ8_0MatchesGGML(t *testing.T) {
	vecs := loadVectors(t)
	src, q := vecs["src"], vecs["q8_0.q"]
	if src.typ != tensor.F32 || q.typ != tensor.Q8_0 || src.n != q.n {
		t.Fatalf("test vectors: src is %s×%d, q8_0.q is %s×%d", src.typ, src.n, q.typ, q.n)
	}
	x := make([]float32, src.n)
	for i := range x {
		x[i] = math.Float32frombits(binary.LittleEndian.Uint32(src.data[4*i:]))
	}
	forEachLevel(t, func(t *testing.T) {
		got := make([]byte, len(q.data))
		QuantizeActivation(tensor.Q8_0, x, got)
		if !bytes.Equal(got, q.data) {
			bad := 0
			for i := range got {
				if got[i] != q.data[i] {
					bad++
				}
			}
			t.Errorf("QuantizeActivation(q8_0, src) differs from ggml's q8_0.q in %d of %d bytes", bad, len(got))
		}
	})
}

func TestQuantizeActivationProperties(t *testing.T) {
	forEachLevel(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(23, 24))
		for _, vt := range []tensor.Type{tensor.Q8_0, tensor.Q8_1, tensor.Q8_K} {
			for rep := 0; rep < 4; rep++ {
				const n = 1024
				x := randActivations(rng, n)
				switch rep {
				case 1:
					clear(x) // all zero
				case 2:
					clear(x[:256]) // first block(s) zero
				case 3:
					for i := range x {
						x[i] = -x[i] * 1e-30 // tiny magnitudes
					}
				}
				rb, _ := vt.RowBytes(n)
				a := make([]byte, rb)
				QuantizeActivation(vt, x, a)
				d := deq(vt, a, n)
				bs, ts := vt.BlockSize(), vt.TypeSize()
				for b := 0; b < n/bs; b++ {
					var amax float64
					for _, v := range x[b*bs : (b+1)*bs] {
						amax = max(amax, math.Abs(float64(v)))
					}
					// Step d = amax/127; rounding d to f16 moves it by up to
					// half an f16 ulp (relative 2^-11, absolute 2^-25 where
					// d is subnormal or underflows), times |q| <= 127.
					step := amax / 127
					tol := step*0.5 + 127*max(step/2048, 1.0/(1<<25)) + 1e-45
					if vt == tensor.Q8_K {
						tol = step*0.5*(1+1e-6) + 1e-45
					}
					for j := b * bs; j < (b+1)*bs; j++ {
						if math.IsNaN(d[j]) || math.Abs(d[j]-float64(x[j])) > tol {
							t.Errorf("QuantizeActivation(%s, rep %d)[%d]: %g decodes to %g, tolerance %g", vt, rep, j, x[j], d[j], tol)
							break
						}
					}
					blk := a[b*ts : (b+1)*ts]
					if amax == 0 && !bytes.Equal(blk, make([]byte, ts)) {
						t.Errorf("QuantizeActivation(%s) of a zero block = %x, want all zero bytes", vt, blk)
					}
					qoff := map[tensor.Type]int{tensor.Q8_0: 2, tensor.Q8_1: 4, tensor.Q8_K: 4}[vt]
					for _, q := range blk[qoff : qoff+bs] {
						if int8(q) == -128 {
							t.Errorf("QuantizeActivation(%s) made a -128 quant", vt)
						}
					}
				}
			}
		}
	})
}

func TestQuantizeActivationFloatTypes(t *testing.T) {
	forEachLevel(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(25, 26))
		x := randActivations(rng, 77)
		for _, vt := range []tensor.Type{tensor.F32, tensor.F16, tensor.BF16} {
			rb, _ := vt.RowBytes(len(x))
			a := make([]byte, rb)
			QuantizeActivation(vt, x, a)
			for i, v := range x {
				var got, want uint32
				switch vt {
				case tensor.F32:
					got, want = binary.LittleEndian.Uint32(a[4*i:]), math.Float32bits(v)
				case tensor.F16:
					got, want = uint32(binary.LittleEndian.Uint16(a[2*i:])), uint32(tensor.FP32ToFP16(v))
				case tensor.BF16:
					got, want = uint32(binary.LittleEndian.Uint16(a[2*i:])), uint32(tensor.FP32ToBF16(v))
				}
				if got != want {
					t.Errorf("QuantizeActivation(%s)[%d] of %g = %#x, want %#x", vt, i, v, got, want)
				}
			}
		}
	})
}

func TestQuantizeActivationPanicsOnBadArguments(t *testing.T) {
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"weight-only type", func() { QuantizeActivation(tensor.Q4_0, make([]float32, 32), make([]byte, 18)) }},
		{"partial block", func() { QuantizeActivation(tensor.Q8_0, make([]float32, 33), make([]byte, 100)) }},
		{"short dst", func() { QuantizeActivation(tensor.Q8_K, make([]float32, 256), make([]byte, 291)) }},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("QuantizeActivation with %s did not panic", c.name)
				}
			}()
			c.f()
		}()
	}
}

// TestQuantizeActivationNonFinite feeds NaN and ±Inf: the output is
// unspecified but the call must not panic.
func TestQuantizeActivationNonFinite(t *testing.T) {
	x := make([]float32, 512)
	for i := range x {
		switch i % 4 {
		case 0:
			x[i] = float32(math.NaN())
		case 1:
			x[i] = float32(math.Inf(1))
		case 2:
			x[i] = float32(math.Inf(-1))
		default:
			x[i] = float32(i)
		}
	}
	allNaN := make([]float32, 512)
	for i := range allNaN {
		allNaN[i] = float32(math.NaN())
	}
	forEachLevel(t, func(t *testing.T) {
		for _, vt := range []tensor.Type{tensor.Q8_0, tensor.Q8_1, tensor.Q8_K, tensor.F16, tensor.BF16, tensor.F32} {
			for _, in := range [][]float32{x, allNaN} {
				rb, _ := vt.RowBytes(len(in))
				QuantizeActivation(vt, in, make([]byte, rb))
			}
		}
	})
}
