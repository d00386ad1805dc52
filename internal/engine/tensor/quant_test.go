package tensor

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// These tests need no shared data: round trips on synthetic data with
// analytic error bounds, hand-made blocks that pin ggml's rounding rules, and
// error cases. The byte-for-byte comparison with ggml is in vectors_test.go.

// allQuantTypes are the types Quantize accepts.
var allQuantTypes = []Type{F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_NL, IQ4_XS, MXFP4}

// roundTrip quantizes x to typ and decodes it again.
func roundTrip(t *testing.T, typ Type, x []float32) []float32 {
	t.Helper()
	rb, err := typ.RowBytes(len(x))
	if err != nil {
		t.Fatalf("%s.RowBytes(%d): %v", typ, len(x), err)
	}
	q := make([]byte, rb)
	if err := Quantize(typ, x, q); err != nil {
		t.Fatalf("Quantize(%s, %d elements): %v", typ, len(x), err)
	}
	y := make([]float32, len(x))
	if err := Dequantize(typ, q, y); err != nil {
		t.Fatalf("Dequantize(%s, %d elements): %v", typ, len(x), err)
	}
	return y
}

// gaussian returns n seeded standard normal values.
func gaussian(seed uint64, n int) []float32 {
	r := rand.New(rand.NewPCG(seed, seed+1))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

func TestQuantizeRoundTripRMS(t *testing.T) {
	// Ceilings about 3% above what these quantizers (and so ggml's, whose
	// bytes they reproduce) reach on this fixed N(0,1) sample. The margin
	// is small enough to catch a K-quant search that stops searching: with
	// the candidate scan disabled Q4_K reaches 0.0784 and Q5_K 0.0382.
	ceiling := map[Type]float64{
		F32: 0, F16: 0.000216, BF16: 0.00171,
		Q8_0: 0.00552, Q8_1: 0.00552, Q8_K: 0.00716,
		Q4_0: 0.0885, Q4_1: 0.0807, Q5_0: 0.0438, Q5_1: 0.0391,
		Q4_K: 0.0733, Q5_K: 0.0374, Q6_K: 0.0180,
		Q2_K: 0.305, Q3_K: 0.156, IQ4_NL: 0.0785, IQ4_XS: 0.0791, MXFP4: 0.119,
	}
	x := gaussian(5, 1<<14)
	for _, typ := range allQuantTypes {
		y := roundTrip(t, typ, x)
		if got := rms(x, y); got > ceiling[typ] {
			t.Errorf("RMS error of %s round trip on N(0,1) data = %.5f, want <= %.5f", typ, got, ceiling[typ])
		}
	}
}

// legacyBound returns the largest error a legacy (32-element) quantizer may
// make on block x: half a quantization step, a whole step on the side that
// the symmetric types clamp, plus the f16 rounding of scale and minimum.
func legacyBound(typ Type, x []float32) float64 {
	var amax, lo, hi float64 = 0, math.Inf(1), math.Inf(-1)
	for _, v := range x {
		amax = math.Max(amax, math.Abs(float64(v)))
		lo = math.Min(lo, float64(v))
		hi = math.Max(hi, float64(v))
	}
	// h is the largest f16 rounding error for a value of magnitude v:
	// half a unit in the last place, 2^-11 relative for normals and 2^-25
	// absolute for subnormals.
	h := func(v float64) float64 { return math.Max(v*0x1p-11, 0x1p-25) }
	switch typ {
	case Q8_0, Q8_1:
		return amax*0.5/127 + 127*h(amax/127)
	case Q4_0:
		return amax/8 + 8*h(amax/8)
	case Q5_0:
		return amax/16 + 16*h(amax/16)
	case Q4_1:
		return (hi-lo)/30 + 15*h((hi-lo)/15) + h(math.Abs(lo))
	case Q5_1:
		return (hi-lo)/62 + 31*h((hi-lo)/31) + h(math.Abs(lo))
	}
	panic("no bound for " + typ.String())
}

func TestQuantizeLegacyErrorBound(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	x := make([]float32, 32*256)
	for i := range x {
		switch block := i / 32; block % 4 {
		case 0:
			x[i] = float32(r.NormFloat64())
		case 1:
			x[i] = float32(r.Float64()*100 - 10) // shifted uniform
		case 2:
			x[i] = float32(-r.ExpFloat64() * 1e-3) // one-signed, small
		default:
			x[i] = float32(r.NormFloat64() * 1e4)
		}
	}
	for _, typ := range []Type{Q8_0, Q8_1, Q4_0, Q4_1, Q5_0, Q5_1} {
		y := roundTrip(t, typ, x)
		for b := 0; b < len(x)/32; b++ {
			bound := legacyBound(typ, x[32*b:32*b+32]) * 1.001
			for i := 32 * b; i < 32*b+32; i++ {
				if e := math.Abs(float64(x[i]) - float64(y[i])); e > bound {
					t.Errorf("%s round trip of block %d: element %d: |%g - %g| = %g, want <= %g", typ, b, i, x[i], y[i], e, bound)
				}
			}
		}
	}
}

func TestQuantizeSpecialBlocks(t *testing.T) {
	n := 512
	fill := func(f func(i int) float32) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = f(i)
		}
		return x
	}
	inputs := []struct {
		name string
		x    []float32
		// exact: the round trip must reproduce x exactly for these types.
		exact []Type
	}{
		{"zeros", fill(func(int) float32 { return 0 }), allQuantTypes},
		{"negative zeros", fill(func(int) float32 { return float32(math.Copysign(0, -1)) }), nil},
		// Q4_0 and Q5_0 store d = max/-8 (-16), exact for these values.
		{"constant 1", fill(func(int) float32 { return 1 }), []Type{F32, F16, BF16, Q4_0, Q5_0}},
		{"constant -4", fill(func(int) float32 { return -4 }), []Type{F32, F16, BF16, Q4_0, Q5_0}},
		{"one outlier", fill(func(i int) float32 {
			if i == 77 {
				return 1000
			}
			return float32(i%7) * 1e-3
		}), nil},
		{"tiny", fill(func(i int) float32 { return float32(i%5-2) * 1e-30 }), nil},
		{"huge", fill(func(i int) float32 { return float32(i%5-2) * 1e5 }), []Type{F32}},
		{"alternating signs", fill(func(i int) float32 { return float32(1 - 2*(i%2)) }), []Type{F32, F16, BF16}},
	}
	for _, in := range inputs {
		for _, typ := range allQuantTypes {
			if in.name == "huge" && (typ == Q4_1 || typ == Q5_1 || typ == F16) {
				continue // minimum or values beyond f16; see TestQuantizeErrors
			}
			y := roundTrip(t, typ, in.x)
			for i, v := range y {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Errorf("%s round trip of %s: element %d = %g, want a finite value", typ, in.name, i, v)
					break
				}
			}
			for _, e := range in.exact {
				if e != typ {
					continue
				}
				for i := range y {
					if y[i] != in.x[i] {
						t.Errorf("%s round trip of %s: element %d = %g, want %g exactly", typ, in.name, i, y[i], in.x[i])
						break
					}
				}
			}
		}
	}
}

// quantizeBlock quantizes one block of typ, failing the test on error.
func quantizeBlock(t *testing.T, typ Type, x []float32) []byte {
	t.Helper()
	rb, err := typ.RowBytes(len(x))
	if err != nil {
		t.Fatalf("%s.RowBytes(%d): %v", typ, len(x), err)
	}
	q := make([]byte, rb)
	if err := Quantize(typ, x, q); err != nil {
		t.Fatalf("Quantize(%s): %v", typ, err)
	}
	return q
}

// TestQuantizeRoundingRules pins the three rounding rules of ggml's
// quantizers on blocks whose scale is exactly 1: roundf (halves away from
// zero) for Q8_0/Q8_1, truncation of x/d + 8.5 for Q4_0 (halves up, clamp at
// 15), and nearest_int (halves to even) for Q8_K.
func TestQuantizeRoundingRules(t *testing.T) {
	block := func(n int, head ...float32) []float32 {
		x := make([]float32, n)
		copy(x, head)
		return x
	}
	tests := []struct {
		typ  Type
		x    []float32
		want []int // expected quants of the first len(want) elements
	}{
		// amax 127 → d = 1.
		{Q8_0, block(32, 127, 0.5, -0.5, 1.5, 2.5, -2.5, 126.5), []int{127, 1, -1, 2, 3, -3, 127}},
		{Q8_1, block(32, -127, 0.5, -0.5, 1.5, 2.5, -2.5), []int{-127, 1, -1, 2, 3, -3}},
		// max -8 → d = 1; stored q = trunc(x + 8.5), capped at 15.
		{Q4_0, block(32, -8, 8, 0.5, -0.5, 7.4, 1.5, -7.5), []int{0, 15, 9, 8, 15, 10, 1}},
		// max -127 → iscale = 1; nearest_int rounds halves to even.
		{Q8_K, block(256, -127, 0.5, 1.5, 2.5, -0.5, -1.5, 127), []int{-127, 0, 2, 2, 0, -2, 127}},
	}
	for _, tt := range tests {
		q := quantizeBlock(t, tt.typ, tt.x)
		for i, want := range tt.want {
			var got int
			switch tt.typ {
			case Q8_0:
				got = int(int8(q[2+i]))
			case Q8_1:
				got = int(int8(q[4+i]))
			case Q4_0:
				got = int(q[2+i%16] >> (4 * (i / 16)) & 0xF)
			case Q8_K:
				got = int(int8(q[4+i]))
			}
			if got != want {
				t.Errorf("Quantize(%s) of %g: quant %d, want %d", tt.typ, tt.x[i], got, want)
			}
		}
	}
}

func TestQuantizeCachedSums(t *testing.T) {
	x := gaussian(21, 512)
	q1 := quantizeBlock(t, Q8_1, x)
	for b := 0; b < len(x)/32; b++ {
		blk := q1[b*blockQ8_1:]
		// ggml multiplies by the unrounded d = amax/127.
		d := math.Float32frombits(absMaxBits(x[32*b:32*b+32])) / 127
		sum := 0
		for j := 0; j < 32; j++ {
			sum += int(int8(blk[4+j]))
		}
		want := FP32ToFP16(float32(sum) * d)
		if got := binary.LittleEndian.Uint16(blk[2:]); got != want {
			t.Errorf("Quantize(q8_1) block %d: s = %#04x, want %#04x (d·Σq with Σq = %d)", b, got, want, sum)
		}
	}
	qk := quantizeBlock(t, Q8_K, x)
	for b := 0; b < len(x)/256; b++ {
		blk := qk[b*blockQ8_K:]
		for g := 0; g < 16; g++ {
			sum := 0
			for j := 0; j < 16; j++ {
				sum += int(int8(blk[4+16*g+j]))
			}
			if got := int(int16(binary.LittleEndian.Uint16(blk[4+256+2*g:]))); got != sum {
				t.Errorf("Quantize(q8_k) block %d: bsums[%d] = %d, want %d", b, g, got, sum)
			}
		}
	}
}

func TestQuantizeErrors(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	with := func(n, at int, v float32) []float32 {
		x := gaussian(3, n)
		x[at] = v
		return x
	}
	constant := func(n int, v float32) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = v
		}
		return x
	}
	tests := []struct {
		name    string
		typ     Type
		src     []float32
		ndst    int // -1: the right size
		wantErr string
	}{
		{"unknown type", Type(99), make([]float32, 32), 4, "type(99): type not supported"},
		{"no quantizer", I16, make([]float32, 4), 8, "i16: type not supported"},
		{"partial block", Q8_0, make([]float32, 48), -1, "not a multiple of the q8_0 block size 32"},
		{"partial superblock", Q6_K, make([]float32, 300), -1, "not a multiple of the q6_k block size 256"},
		{"short destination", Q4_0, make([]float32, 64), 35, "got a 35-byte destination for 64 elements, want 36 bytes"},
		{"long destination", F16, make([]float32, 3), 7, "got a 7-byte destination for 3 elements, want 6 bytes"},
		{"NaN q8_0", Q8_0, with(64, 40, nan), -1, "element 40 is NaN"},
		{"Inf q4_0", Q4_0, with(64, 3, inf), -1, "element 3 is +Inf"},
		{"-Inf q4_1", Q4_1, with(64, 63, -inf), -1, "element 63 is -Inf"},
		{"NaN q5_0", Q5_0, with(32, 0, nan), -1, "element 0 is NaN"},
		{"NaN q5_1", Q5_1, with(32, 31, nan), -1, "element 31 is NaN"},
		{"NaN q8_1", Q8_1, with(32, 5, nan), -1, "element 5 is NaN"},
		{"NaN q4_k", Q4_K, with(512, 300, nan), -1, "element 300 is NaN"},
		{"Inf q5_k", Q5_K, with(256, 255, inf), -1, "element 255 is +Inf"},
		{"NaN q6_k", Q6_K, with(512, 511, nan), -1, "element 511 is NaN"},
		{"NaN q8_k", Q8_K, with(256, 1, nan), -1, "element 1 is NaN"},
		{"q8_0 scale overflow", Q8_0, with(64, 33, 1e7), -1, "elements 32..63 need a block scale of"},
		{"q4_0 scale overflow", Q4_0, with(32, 0, -6e5), -1, "elements 0..31 need a block scale of"},
		{"q4_1 minimum overflow", Q4_1, with(32, 9, -7e4), -1, "elements 0..31 need a block minimum of"},
		{"q4_k scale overflow", Q4_K, with(512, 300, 1e9), -1, "elements 256..511 need a block scale of"},
		{"q5_k minimum overflow", Q5_K, constant(256, -1e9), -1, "elements 0..255 need a block minimum scale of"},
		{"q8_k float32 limit", Q8_K, with(256, 200, -math.MaxFloat32), -1, "elements 0..255 reach -3.4028235e+38, too close to the float32 limit"},
		{"q6_k scale overflow", Q6_K, with(256, 9, 1e10), -1, "elements 0..255 need a block scale of"},
	}
	for _, tt := range tests {
		ndst := tt.ndst
		if ndst < 0 {
			// The right size, or for a partial block the size of the
			// whole blocks (the length check must fail first anyway).
			bs := max(tt.typ.BlockSize(), 1)
			ndst = len(tt.src) / bs * tt.typ.TypeSize()
		}
		err := Quantize(tt.typ, tt.src, make([]byte, ndst))
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("Quantize(%s) [%s] error = %v, want one containing %q", tt.typ, tt.name, err, tt.wantErr)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "quantize ") {
			t.Errorf("Quantize(%s) error %q does not start with \"quantize \"", tt.typ, err)
		}
	}
	if err := Quantize(Q4_K, nil, nil); err != nil {
		t.Errorf("Quantize(q4_k, empty, empty) = %v, want nil", err)
	}
	for _, typ := range allQuantTypes {
		if !CanQuantize(typ) {
			t.Errorf("CanQuantize(%s) = false, want true", typ)
		}
	}
	if CanQuantize(I8) || CanDequantize(I64) || CanQuantize(Type(1000)) {
		t.Errorf("CanQuantize/CanDequantize accept a type without a codec")
	}
}

// TestQuantizeFloatTypesCarrySpecials checks that the plain float encodings
// keep NaN and infinities and saturate F16 as ggml does.
func TestQuantizeFloatTypesCarrySpecials(t *testing.T) {
	x := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 1e6, -1e-10, 3}
	for _, typ := range []Type{F32, F16, BF16} {
		y := roundTrip(t, typ, x)
		if !math.IsNaN(float64(y[0])) {
			t.Errorf("%s round trip of NaN = %g, want NaN", typ, y[0])
		}
		if !math.IsInf(float64(y[1]), 1) || !math.IsInf(float64(y[2]), -1) {
			t.Errorf("%s round trip of ±Inf = %g, %g, want +Inf, -Inf", typ, y[1], y[2])
		}
		if y[5] != 3 {
			t.Errorf("%s round trip of 3 = %g, want 3", typ, y[5])
		}
	}
	if y := roundTrip(t, F16, x); !math.IsInf(float64(y[3]), 1) || y[4] != 0 || !math.Signbit(float64(y[4])) {
		t.Errorf("F16 round trip of 1e6, -1e-10 = %g, %g, want +Inf, -0", y[3], y[4])
	}
}

// TestQuantizeExtremeValues feeds blocks mixing ordinary values with
// extreme finite ones (float32 limits, subnormals, values beyond f16) to
// every quantizer: each call must either fail with an error or produce data
// that decodes to finite values.
func TestQuantizeExtremeValues(t *testing.T) {
	extremes := []float32{0, 1, -1, 3e38, -3e38, math.MaxFloat32, -math.MaxFloat32,
		math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, 1e-38, 65504, 65520, 1e5, -1e10, 1e-8}
	r := rand.New(rand.NewPCG(13, 14))
	x := make([]float32, 512)
	y := make([]float32, 512)
	failures := 0
	for _, typ := range allQuantTypes {
		if typ == F32 || typ == F16 || typ == BF16 {
			continue // plain conversions: overflow to Inf is their defined result
		}
		rb, _ := typ.RowBytes(len(x))
		q := make([]byte, rb)
		for trial := 0; trial < 300; trial++ {
			mode := trial % 3
			for i := range x {
				switch {
				case mode == 0:
					x[i] = extremes[r.IntN(len(extremes))]
				case mode == 1:
					x[i] = float32(r.NormFloat64()) * extremes[r.IntN(len(extremes))]
				case r.IntN(50) == 0:
					x[i] = extremes[r.IntN(len(extremes))]
				default:
					x[i] = float32(r.NormFloat64())
				}
			}
			if err := Quantize(typ, x, q); err != nil {
				failures++
				continue
			}
			if err := Dequantize(typ, q, y); err != nil {
				t.Fatalf("Dequantize(%s) of Quantize's output: %v", typ, err)
			}
			for i, v := range y {
				if v-v != 0 {
					t.Errorf("%s round trip of extreme block (trial %d): element %d = %g from %g, want finite or an error", typ, trial, i, v, x[i])
					break
				}
			}
		}
	}
	if failures == 0 {
		t.Errorf("no extreme block was rejected; the inputs do not reach the f16 limits")
	}
}
