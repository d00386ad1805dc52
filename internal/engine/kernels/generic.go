package kernels

import (
	"encoding/binary"
	"math"
	"unsafe"

	"tandem/internal/engine/tensor"
)

// Block byte sizes (tensor's type table is the source of truth; the tests
// check these agree with it).
const (
	qk  = tensor.QK  // elements per legacy block
	qkk = tensor.QKK // elements per K-quant super-block

	sizeQ4_0 = 2 + qk/2
	sizeQ4_1 = 4 + qk/2
	sizeQ5_0 = 2 + 4 + qk/2
	sizeQ5_1 = 4 + 4 + qk/2
	sizeQ8_0 = 2 + qk
	sizeQ8_1 = 4 + qk
	sizeQ4_K = 4 + 12 + qkk/2
	sizeQ5_K = 4 + 12 + qkk/8 + qkk/2
	sizeQ6_K = qkk/2 + qkk/4 + qkk/16 + 2
	sizeQ8_K = 4 + qkk + qkk/16*2
)

// f16Table maps every half-precision bit pattern to its float32 value.
var f16Table = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = tensor.FP16ToFP32(uint16(i))
	}
	return &t
}()

// half decodes the little-endian half-precision value at b[0:2].
func half(b []byte) float32 { return f16Table[binary.LittleEndian.Uint16(b)] }

// f32At decodes the little-endian float32 at b[0:4].
func f32At(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) }

// genericSet returns the portable Go kernels.
func genericSet() *kernelSet {
	k := &kernelSet{
		level:    Generic,
		dotF32:   dotF32Go,
		dotF16:   dotF16Go,
		axpyF32:  axpyF32Go,
		axpyF16:  axpyF16Go,
		f32ToF16: f32ToF16Go,
		f16ToF32: f16ToF32Go,
		expShift: expShiftGo,
		swiglu:   swigluGo,
	}
	k.vecDot[tensor.BF16] = dotBF16Go
	k.vecDot[tensor.Q8_0] = dotQ8_0Go
	k.vecDot[tensor.Q4_0] = dotQ4_0Go
	k.vecDot[tensor.Q5_0] = dotQ5_0Go
	k.vecDot[tensor.Q4_1] = dotQ4_1Go
	k.vecDot[tensor.Q5_1] = dotQ5_1Go
	k.vecDot[tensor.Q4_K] = dotQ4_KGo
	k.vecDot[tensor.Q5_K] = dotQ5_KGo
	k.vecDot[tensor.Q6_K] = dotQ6_KGo
	k.vecDot[tensor.Q2_K] = dotQ2_KGo
	k.vecDot[tensor.Q3_K] = dotQ3_KGo
	k.vecDot[tensor.IQ4_NL] = dotIQ4_NLGo
	k.vecDot[tensor.IQ4_XS] = dotIQ4_XSGo
	k.vecDot[tensor.MXFP4] = dotMXFP4Go

	k.quantize[tensor.F32] = quantizeF32
	k.quantize[tensor.BF16] = quantizeBF16
	k.quantize[tensor.Q8_0] = quantizeQ8_0
	k.quantize[tensor.Q8_1] = quantizeQ8_1
	k.quantize[tensor.Q8_K] = quantizeQ8_K
	bindFloat(k)
	return k
}

// bindFloat points k's F32 and F16 row entries at k's own float kernels
// (called again after a level replaces them).
func bindFloat(k *kernelSet) {
	k.vecDot[tensor.F32] = func(n int, w, a []byte) float32 { return vecDotF32(k.dotF32, n, w, a) }
	k.vecDot[tensor.F16] = func(n int, w, a []byte) float32 { return vecDotF16(k.dotF16, n, w, a) }
	k.quantize[tensor.F16] = func(src []float32, dst []byte) { quantizeF16(k.f32ToF16, src, dst) }
	bindRows(k)
}

// aligned reports whether b starts at a multiple of n bytes (n a power of 2).
func aligned(b []byte, n uintptr) bool {
	return len(b) == 0 || uintptr(unsafe.Pointer(unsafe.SliceData(b)))&(n-1) == 0
}

// f32View reinterprets 4-aligned little-endian bytes as float32s
// (big-endian builds are refused by bigendian.go).
func f32View(b []byte) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}

// u16View reinterprets 2-aligned little-endian bytes as uint16s.
func u16View(b []byte) []uint16 {
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/2)
}

// f32Bytes is the inverse of f32View.
func f32Bytes(f []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(f))), 4*len(f))
}

// vecDotF32 is VecDot for F32 rows: the float kernel when both rows are
// aligned (tensor data and the package's buffers always are), else a
// byte-wise loop.
func vecDotF32(dot func(a, b []float32) float32, n int, w, a []byte) float32 {
	if aligned(w, 4) && aligned(a, 4) {
		return dot(f32View(w[:4*n]), f32View(a[:4*n]))
	}
	var s float32
	for i := 0; i < n; i++ {
		s += f32At(w[4*i:]) * f32At(a[4*i:])
	}
	return s
}

// vecDotF16 is VecDot for F16 rows, like vecDotF32.
func vecDotF16(dot func(a, b []uint16) float32, n int, w, a []byte) float32 {
	if aligned(w, 2) && aligned(a, 2) {
		return dot(u16View(w[:2*n]), u16View(a[:2*n]))
	}
	var s float32
	for i := 0; i < n; i++ {
		s += half(w[2*i:]) * half(a[2*i:])
	}
	return s
}

func dotF32Go(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		x, y := a[i:i+8:i+8], b[i:i+8:i+8]
		s0 += x[0] * y[0]
		s1 += x[1] * y[1]
		s2 += x[2] * y[2]
		s3 += x[3] * y[3]
		s4 += x[4] * y[4]
		s5 += x[5] * y[5]
		s6 += x[6] * y[6]
		s7 += x[7] * y[7]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
}

func dotF16Go(a, b []uint16) float32 {
	b = b[:len(a)]
	t := f16Table
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		x, y := a[i:i+4:i+4], b[i:i+4:i+4]
		s0 += t[x[0]] * t[y[0]]
		s1 += t[x[1]] * t[y[1]]
		s2 += t[x[2]] * t[y[2]]
		s3 += t[x[3]] * t[y[3]]
	}
	for ; i < len(a); i++ {
		s0 += t[a[i]] * t[b[i]]
	}
	return (s0 + s1) + (s2 + s3)
}

func axpyF32Go(alpha float32, x, y []float32) {
	y = y[:len(x)]
	i := 0
	for ; i+4 <= len(x); i += 4 {
		xs, ys := x[i:i+4:i+4], y[i:i+4:i+4]
		ys[0] += alpha * xs[0]
		ys[1] += alpha * xs[1]
		ys[2] += alpha * xs[2]
		ys[3] += alpha * xs[3]
	}
	for ; i < len(x); i++ {
		y[i] += alpha * x[i]
	}
}

func axpyF16Go(alpha float32, x []uint16, y []float32) {
	y = y[:len(x)]
	t := f16Table
	for i, h := range x {
		y[i] += alpha * t[h]
	}
}

func f32ToF16Go(src []float32, dst []uint16) {
	dst = dst[:len(src)]
	for i, f := range src {
		dst[i] = tensor.FP32ToFP16(f)
	}
}

func f16ToF32Go(src []uint16, dst []float32) {
	dst = dst[:len(src)]
	t := f16Table
	for i, h := range src {
		dst[i] = t[h]
	}
}

func dotBF16Go(n int, w, a []byte) float32 {
	w, a = w[:2*n], a[:2*n]
	var s0, s1 float32
	i := 0
	for ; i+4 <= 2*n; i += 4 {
		x, y := w[i:i+4:i+4], a[i:i+4:i+4]
		s0 += bf16(x[0:]) * bf16(y[0:])
		s1 += bf16(x[2:]) * bf16(y[2:])
	}
	for ; i < 2*n; i += 2 {
		s0 += bf16(w[i:]) * bf16(a[i:])
	}
	return s0 + s1
}

// bf16 decodes the little-endian bfloat16 at b[0:2].
func bf16(b []byte) float32 {
	return math.Float32frombits(uint32(binary.LittleEndian.Uint16(b)) << 16)
}

// dot32 returns the integer dot product of 32 signed bytes of w and a.
func dot32(w, a []byte) int32 {
	w, a = w[:32:32], a[:32:32]
	var s0, s1, s2, s3 int32
	for j := 0; j < 32; j += 4 {
		s0 += int32(int8(w[j])) * int32(int8(a[j]))
		s1 += int32(int8(w[j+1])) * int32(int8(a[j+1]))
		s2 += int32(int8(w[j+2])) * int32(int8(a[j+2]))
		s3 += int32(int8(w[j+3])) * int32(int8(a[j+3]))
	}
	return (s0 + s1) + (s2 + s3)
}

func dotQ8_0Go(n int, w, a []byte) float32 {
	nb := n / qk
	w, a = w[:nb*sizeQ8_0], a[:nb*sizeQ8_0]
	var sum float32
	for b := 0; b < nb; b++ {
		x, y := w[b*sizeQ8_0:(b+1)*sizeQ8_0], a[b*sizeQ8_0:(b+1)*sizeQ8_0]
		sum += half(x) * half(y) * float32(dot32(x[2:], y[2:]))
	}
	return sum
}

// nib16 returns Σ (lo(q[j]) + off)·a[j] + Σ (hi(q[j]) + off)·a[j+16] for
// the 16 packed nibble pairs q, with the 5th bits from qh (bit j for element
// j, bit j+16 for element j+16) when qh is given.
func nib16(q, a []byte, qh uint32, off int32) int32 {
	q, a = q[:16:16], a[:32:32]
	var s0, s1 int32
	for j := 0; j < 16; j++ {
		lo := int32(q[j]&0xF) | int32((qh>>j)&1)<<4
		hi := int32(q[j]>>4) | int32((qh>>(j+16))&1)<<4
		s0 += (lo + off) * int32(int8(a[j]))
		s1 += (hi + off) * int32(int8(a[j+16]))
	}
	return s0 + s1
}

func dotQ4_0Go(n int, w, a []byte) float32 {
	nb := n / qk
	w, a = w[:nb*sizeQ4_0], a[:nb*sizeQ8_0]
	var sum float32
	for b := 0; b < nb; b++ {
		x, y := w[b*sizeQ4_0:(b+1)*sizeQ4_0], a[b*sizeQ8_0:(b+1)*sizeQ8_0]
		sum += half(x) * half(y) * float32(nib16(x[2:], y[2:], 0, -8))
	}
	return sum
}

func dotQ5_0Go(n int, w, a []byte) float32 {
	nb := n / qk
	w, a = w[:nb*sizeQ5_0], a[:nb*sizeQ8_0]
	var sum float32
	for b := 0; b < nb; b++ {
		x, y := w[b*sizeQ5_0:(b+1)*sizeQ5_0], a[b*sizeQ8_0:(b+1)*sizeQ8_0]
		qh := binary.LittleEndian.Uint32(x[2:])
		sum += half(x) * half(y) * float32(nib16(x[6:], y[2:], qh, -16))
	}
	return sum
}

// Q4_1 and Q5_1 dot against Q8_1: d_w·d_a·Σ q·a + m_w·s_a, where s_a =
// d_a·Σ a is stored in the Q8_1 block.
func dotQ4_1Go(n int, w, a []byte) float32 {
	nb := n / qk
	w, a = w[:nb*sizeQ4_1], a[:nb*sizeQ8_1]
	var sum float32
	for b := 0; b < nb; b++ {
		x, y := w[b*sizeQ4_1:(b+1)*sizeQ4_1], a[b*sizeQ8_1:(b+1)*sizeQ8_1]
		sum += half(x)*half(y)*float32(nib16(x[4:], y[4:], 0, 0)) + half(x[2:])*half(y[2:])
	}
	return sum
}

func dotQ5_1Go(n int, w, a []byte) float32 {
	nb := n / qk
	w, a = w[:nb*sizeQ5_1], a[:nb*sizeQ8_1]
	var sum float32
	for b := 0; b < nb; b++ {
		x, y := w[b*sizeQ5_1:(b+1)*sizeQ5_1], a[b*sizeQ8_1:(b+1)*sizeQ8_1]
		qh := binary.LittleEndian.Uint32(x[4:])
		sum += half(x)*half(y)*float32(nib16(x[8:], y[4:], qh, 0)) + half(x[2:])*half(y[2:])
	}
	return sum
}

// scalesK4 unpacks the 12 packed bytes of a Q4_K/Q5_K super-block into the
// eight 6-bit sub-block scales and eight 6-bit mins.
func scalesK4(s []byte) (sc, m [8]uint8) {
	s = s[:12:12]
	for j := 0; j < 4; j++ {
		sc[j] = s[j] & 63
		m[j] = s[j+4] & 63
		sc[j+4] = s[j+8]&0xF | (s[j]>>6)<<4
		m[j+4] = s[j+8]>>4 | (s[j+4]>>6)<<4
	}
	return sc, m
}

// minsK returns Σ_j m[j]·(Σ of the activations of 32-element sub-block j),
// taking the sub-block sums from the Q8_K block's bsums.
func minsK(m *[8]uint8, bsums []byte) int32 {
	bsums = bsums[:32:32]
	var s int32
	for j := 0; j < 8; j++ {
		b := int32(int16(binary.LittleEndian.Uint16(bsums[4*j:]))) +
			int32(int16(binary.LittleEndian.Uint16(bsums[4*j+2:])))
		s += int32(m[j]) * b
	}
	return s
}

func dotQ4_KGo(n int, w, a []byte) float32 {
	nb := n / qkk
	w, a = w[:nb*sizeQ4_K], a[:nb*sizeQ8_K]
	var sum float32
	for b := 0; b < nb; b++ {
		x, y := w[b*sizeQ4_K:(b+1)*sizeQ4_K], a[b*sizeQ8_K:(b+1)*sizeQ8_K]
		sc, m := scalesK4(x[4:16])
		qs, q8 := x[16:16+qkk/2], y[4:4+qkk]
		var sumi int32
		for c := 0; c < 4; c++ {
			q, lo, hi := qs[32*c:32*c+32], q8[64*c:64*c+32], q8[64*c+32:64*c+64]
			var slo, shi int32
			for l := 0; l < 32; l++ {
				slo += int32(q[l]&0xF) * int32(int8(lo[l]))
				shi += int32(q[l]>>4) * int32(int8(hi[l]))
			}
			sumi += int32(sc[2*c])*slo + int32(sc[2*c+1])*shi
		}
		da := f32At(y)
		sum += da*half(x)*float32(sumi) - da*half(x[2:])*float32(minsK(&m, y[4+qkk:]))
	}
	return sum
}

func dotQ5_KGo(n int, w, a []byte) float32 {
	nb := n / qkk
	w, a = w[:nb*sizeQ5_K], a[:nb*sizeQ8_K]
	var sum float32
	for b := 0; b < nb; b++ {
		x, y := w[b*sizeQ5_K:(b+1)*sizeQ5_K], a[b*sizeQ8_K:(b+1)*sizeQ8_K]
		sc, m := scalesK4(x[4:16])
		qh, qs, q8 := x[16:48], x[48:48+qkk/2], y[4:4+qkk]
		var sumi int32
		for c := 0; c < 4; c++ {
			q, lo, hi := qs[32*c:32*c+32], q8[64*c:64*c+32], q8[64*c+32:64*c+64]
			var slo, shi int32
			for l := 0; l < 32; l++ {
				h := qh[l] >> (2 * c)
				slo += (int32(q[l]&0xF) | int32(h&1)<<4) * int32(int8(lo[l]))
				shi += (int32(q[l]>>4) | int32(h&2)<<3) * int32(int8(hi[l]))
			}
			sumi += int32(sc[2*c])*slo + int32(sc[2*c+1])*shi
		}
		da := f32At(y)
		sum += da*half(x)*float32(sumi) - da*half(x[2:])*float32(minsK(&m, y[4+qkk:]))
	}
	return sum
}

func dotQ6_KGo(n int, w, a []byte) float32 {
	nb := n / qkk
	w, a = w[:nb*sizeQ6_K], a[:nb*sizeQ8_K]
	var sum float32
	for b := 0; b < nb; b++ {
		x, y := w[b*sizeQ6_K:(b+1)*sizeQ6_K], a[b*sizeQ8_K:(b+1)*sizeQ8_K]
		q8 := y[4 : 4+qkk]
		var isum [16]int32 // per 16-element sub-block
		for h := 0; h < 2; h++ {
			ql, qh, y8 := x[64*h:64*h+64], x[128+32*h:128+32*h+32], q8[128*h:128*h+128]
			for l := 0; l < 32; l++ {
				q1 := int32(ql[l]&0xF|(qh[l]&3)<<4) - 32
				q2 := int32(ql[l+32]&0xF|(qh[l]>>2&3)<<4) - 32
				q3 := int32(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
				q4 := int32(ql[l+32]>>4|(qh[l]>>6)<<4) - 32
				is := 8*h + l/16
				isum[is] += q1 * int32(int8(y8[l]))
				isum[is+2] += q2 * int32(int8(y8[l+32]))
				isum[is+4] += q3 * int32(int8(y8[l+64]))
				isum[is+6] += q4 * int32(int8(y8[l+96]))
			}
		}
		var sumi int32
		for i, s := range isum {
			sumi += int32(int8(x[192+i])) * s
		}
		sum += f32At(y) * half(x[208:]) * float32(sumi)
	}
	return sum
}
