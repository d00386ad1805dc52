package tensor

import (
	"encoding/binary"
	"fmt"
	"math"
)

// quantizers holds the row encoder of every type Quantize accepts. Each
// encoder may assume len(dst) == RowBytes(len(src)).
var quantizers = map[Type]func(src []float32, dst []byte) error{
	F32:    quantizeF32,
	F16:    quantizeF16,
	BF16:   quantizeBF16,
	Q4_0:   quantizeQ4_0,
	Q4_1:   quantizeQ4_1,
	Q5_0:   quantizeQ5_0,
	Q5_1:   quantizeQ5_1,
	Q8_0:   quantizeQ8_0,
	Q8_1:   quantizeQ8_1,
	Q4_K:   quantizeQ4_K,
	Q5_K:   quantizeQ5_K,
	Q6_K:   quantizeQ6_K,
	Q8_K:   quantizeQ8_K,
	Q2_K:   quantizeQ2_K,
	Q3_K:   quantizeQ3_K,
	IQ4_NL: quantizeIQ4_NL,
	IQ4_XS: quantizeIQ4_XS,
	MXFP4:  quantizeMXFP4,
}

// CanQuantize reports whether Quantize can encode type t.
func CanQuantize(t Type) bool { return quantizers[t] != nil }

// Quantize encodes src into dst (len RowBytes(len(src))) with ggml's
// reference quantizer for t (quantize_row_*_ref, which is what
// ggml_quantize_chunk uses without an importance matrix). The output is
// ggml's, byte for byte, for every type; for the K-quants, whose quantizers
// are searches, that holds as long as the float operations are done in
// ggml's order, which this code keeps (see the package comment).
//
// It fails when t cannot be encoded, len(src) is not a multiple of t's block
// size, or dst has the wrong length. For the quantized types it also fails,
// with dst partly written, when src holds a NaN or an infinity, or a block
// needs a scale (or minimum) beyond the f16 range (|x| about 65504 times the
// largest quant, e.g. 8.3e6 for Q8_0, 5.2e5 for Q4_0), where ggml would store
// an infinite scale. F32, F16 and BF16 are plain conversions that carry NaN
// and infinities through and, for F16, round values beyond its range to ±Inf
// as ggml does.
func Quantize(t Type, src []float32, dst []byte) error {
	enc := quantizers[t]
	if enc == nil {
		return fmt.Errorf("quantize %s: type not supported (want f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q8_1, q2_k, q3_k, q4_k, q5_k, q6_k, q8_k, iq4_nl, iq4_xs or mxfp4)", t)
	}
	want, err := t.RowBytes(len(src))
	if err != nil {
		return fmt.Errorf("quantize %s: %w", t, err)
	}
	if len(dst) != want {
		return fmt.Errorf("quantize %s: got a %d-byte destination for %d elements, want %d bytes", t, len(dst), len(src), want)
	}
	if err := enc(src, dst); err != nil {
		return fmt.Errorf("quantize %s: %w", t, err)
	}
	return nil
}

// checkFinite fails when block x, which starts at element off of the row,
// holds a NaN or an infinity.
func checkFinite(x []float32, off int) error {
	var acc float32
	for _, v := range x {
		acc += v - v // NaN for NaN and ±Inf, 0 otherwise
	}
	if acc == 0 {
		return nil
	}
	for i, v := range x {
		if v-v != 0 {
			return fmt.Errorf("element %d is %g, which has no quantized form", off+i, v)
		}
	}
	return nil
}

// putScale stores f as the little-endian f16 at b[0:2]. It fails when f
// rounds to an infinity: the block of n elements at element off needs a
// scale (what names it) that f16 cannot hold.
func putScale(b []byte, f float32, what string, off, n int) error {
	h := FP32ToFP16(f)
	binary.LittleEndian.PutUint16(b, h)
	if h&0x7fff >= 0x7c00 {
		return fmt.Errorf("elements %d..%d need a block %s of %g, beyond the f16 range (±65504)", off, off+n-1, what, f)
	}
	return nil
}

// putHalf stores f as a little-endian f16 at b[0:2].
func putHalf(b []byte, f float32) { binary.LittleEndian.PutUint16(b, FP32ToFP16(f)) }

// roundHalfAway rounds v to the nearest integer, halfway cases away from
// zero, like C's roundf. The float64 addition is exact for any float32.
func roundHalfAway(v float32) int32 {
	return int32(float64(v) + math.Copysign(0.5, float64(v)))
}

func quantizeF32(src []float32, dst []byte) error {
	dst = dst[:4*len(src)]
	for i, v := range src {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
	}
	return nil
}

func quantizeF16(src []float32, dst []byte) error {
	dst = dst[:2*len(src)]
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], FP32ToFP16(v))
	}
	return nil
}

func quantizeBF16(src []float32, dst []byte) error {
	dst = dst[:2*len(src)]
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], FP32ToBF16(v))
	}
	return nil
}

// In the encoders below every product that feeds an addition is wrapped in
// float32(), which forbids the compiler from fusing the two into one FMA
// (allowed by the Go spec otherwise) and keeps ggml's rounding.

// quantizeQ8_0 is quantize_row_q8_0_ref: d = amax/127, q = roundf(x/d).
func quantizeQ8_0(src []float32, dst []byte) error {
	for i := 0; i < len(src)/QK; i++ {
		x := src[i*QK : (i+1)*QK]
		b := dst[i*blockQ8_0 : (i+1)*blockQ8_0]
		if err := checkFinite(x, i*QK); err != nil {
			return err
		}
		d := math.Float32frombits(absMaxBits(x)) / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		if err := putScale(b, d, "scale", i*QK, QK); err != nil {
			return err
		}
		qs := b[2 : 2+QK]
		for j, v := range x {
			qs[j] = byte(int8(roundHalfAway(v * id)))
		}
	}
	return nil
}

// quantizeQ8_1 is quantize_row_q8_1_ref: Q8_0's scale plus s = d·Σq.
func quantizeQ8_1(src []float32, dst []byte) error {
	for i := 0; i < len(src)/QK; i++ {
		x := src[i*QK : (i+1)*QK]
		b := dst[i*blockQ8_1 : (i+1)*blockQ8_1]
		if err := checkFinite(x, i*QK); err != nil {
			return err
		}
		d := math.Float32frombits(absMaxBits(x)) / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		if err := putScale(b, d, "scale", i*QK, QK); err != nil {
			return err
		}
		qs := b[4 : 4+QK]
		var sum int32
		for j, v := range x {
			q := roundHalfAway(v * id)
			qs[j] = byte(int8(q))
			sum += q
		}
		// s is a cached d·Σq for dot products, not a scale: like ggml,
		// let it saturate to ±Inf rather than fail.
		putHalf(b[2:], float32(sum)*d)
	}
	return nil
}

// absMaxBits returns the bit pattern of the largest |v| in x. For finite
// non-negative floats the bit patterns order like the values, and an integer
// max compiles to a conditional move where a float max needs branches.
func absMaxBits(x []float32) uint32 {
	var m uint32
	for _, v := range x {
		m = max(m, math.Float32bits(v)&^(1<<31))
	}
	return m
}

// signedAbsMax returns the element of finite x with the largest magnitude
// (the first one on ties), as ggml's symmetric quantizers pick it.
func signedAbsMax(x []float32) float32 {
	m := absMaxBits(x)
	for _, v := range x {
		if math.Float32bits(v)&^(1<<31) == m {
			return v
		}
	}
	return 0
}

// quantizeQ4_0 is quantize_row_q4_0_ref: d = max/-8 where max is the
// element of largest magnitude, q = min(15, trunc(x/d + 8.5)).
func quantizeQ4_0(src []float32, dst []byte) error {
	for i := 0; i < len(src)/QK; i++ {
		x := src[i*QK : (i+1)*QK]
		b := dst[i*blockQ4_0 : (i+1)*blockQ4_0]
		if err := checkFinite(x, i*QK); err != nil {
			return err
		}
		d := signedAbsMax(x) / -8
		var id float32
		if d != 0 {
			id = 1 / d
		}
		if err := putScale(b, d, "scale", i*QK, QK); err != nil {
			return err
		}
		qs := b[2 : 2+QK/2]
		for j := range qs {
			q0 := min(15, int32(float32(x[j]*id)+8.5))
			q1 := min(15, int32(float32(x[j+QK/2]*id)+8.5))
			qs[j] = byte(q0) | byte(q1)<<4
		}
	}
	return nil
}

// blockMinMax returns the smallest and largest element of x. Plain
// comparisons, not min/max, so that of +0 and -0 the first seen wins, as in
// ggml (the minimum is stored, sign included).
func blockMinMax(x []float32) (lo, hi float32) {
	lo, hi = math.MaxFloat32, -math.MaxFloat32
	for _, v := range x {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return lo, hi
}

// quantizeQ4_1 is quantize_row_q4_1_ref: d = (max-min)/15, m = min,
// q = min(15, trunc((x-min)/d + 0.5)).
func quantizeQ4_1(src []float32, dst []byte) error {
	for i := 0; i < len(src)/QK; i++ {
		x := src[i*QK : (i+1)*QK]
		b := dst[i*blockQ4_1 : (i+1)*blockQ4_1]
		if err := checkFinite(x, i*QK); err != nil {
			return err
		}
		lo, hi := blockMinMax(x)
		d := (hi - lo) / 15
		var id float32
		if d != 0 {
			id = 1 / d
		}
		if err := putScale(b, d, "scale", i*QK, QK); err != nil {
			return err
		}
		if err := putScale(b[2:], lo, "minimum", i*QK, QK); err != nil {
			return err
		}
		qs := b[4 : 4+QK/2]
		for j := range qs {
			q0 := min(15, int32(float32((x[j]-lo)*id)+0.5))
			q1 := min(15, int32(float32((x[j+QK/2]-lo)*id)+0.5))
			qs[j] = byte(q0) | byte(q1)<<4
		}
	}
	return nil
}

// quantizeQ5_0 is quantize_row_q5_0_ref: d = max/-16,
// q = min(31, trunc(x/d + 16.5)), fifth bits gathered in a u32.
func quantizeQ5_0(src []float32, dst []byte) error {
	for i := 0; i < len(src)/QK; i++ {
		x := src[i*QK : (i+1)*QK]
		b := dst[i*blockQ5_0 : (i+1)*blockQ5_0]
		if err := checkFinite(x, i*QK); err != nil {
			return err
		}
		d := signedAbsMax(x) / -16
		var id float32
		if d != 0 {
			id = 1 / d
		}
		if err := putScale(b, d, "scale", i*QK, QK); err != nil {
			return err
		}
		qs := b[6 : 6+QK/2]
		var qh uint32
		for j := range qs {
			q0 := uint32(min(31, int32(float32(x[j]*id)+16.5)))
			q1 := uint32(min(31, int32(float32(x[j+QK/2]*id)+16.5)))
			qs[j] = byte(q0&0xF) | byte(q1&0xF)<<4
			qh |= (q0 >> 4 & 1) << uint(j)
			qh |= (q1 >> 4 & 1) << uint(j+QK/2)
		}
		binary.LittleEndian.PutUint32(b[2:], qh)
	}
	return nil
}

// quantizeQ5_1 is quantize_row_q5_1_ref: d = (max-min)/31, m = min,
// q = trunc((x-min)/d + 0.5).
func quantizeQ5_1(src []float32, dst []byte) error {
	for i := 0; i < len(src)/QK; i++ {
		x := src[i*QK : (i+1)*QK]
		b := dst[i*blockQ5_1 : (i+1)*blockQ5_1]
		if err := checkFinite(x, i*QK); err != nil {
			return err
		}
		lo, hi := blockMinMax(x)
		d := (hi - lo) / 31
		var id float32
		if d != 0 {
			id = 1 / d
		}
		if err := putScale(b, d, "scale", i*QK, QK); err != nil {
			return err
		}
		if err := putScale(b[2:], lo, "minimum", i*QK, QK); err != nil {
			return err
		}
		qs := b[8 : 8+QK/2]
		var qh uint32
		for j := range qs {
			// ggml does not clamp here; for finite input the value is at
			// most 31 anyway, and the clamp keeps the bit layout safe.
			q0 := uint32(min(31, int32(float32((x[j]-lo)*id)+0.5)))
			q1 := uint32(min(31, int32(float32((x[j+QK/2]-lo)*id)+0.5)))
			qs[j] = byte(q0&0xF) | byte(q1&0xF)<<4
			qh |= (q0 >> 4 & 1) << uint(j)
			qh |= (q1 >> 4 & 1) << uint(j+QK/2)
		}
		binary.LittleEndian.PutUint32(b[4:], qh)
	}
	return nil
}

// quantizeQ8_K is quantize_row_q8_K_ref: d = max/-127 (f32) with max the
// element of largest magnitude, q = min(127, nearest(x/d)), plus the sums of
// each 16 quants.
func quantizeQ8_K(src []float32, dst []byte) error {
	for i := 0; i < len(src)/QKK; i++ {
		x := src[i*QKK : (i+1)*QKK]
		b := dst[i*blockQ8_K : (i+1)*blockQ8_K]
		if err := checkFinite(x, i*QKK); err != nil {
			return err
		}
		clear(b)
		m := signedAbsMax(x)
		if m == 0 {
			continue
		}
		iscale := -127 / m
		if d := 1 / iscale; math.IsInf(float64(float32(abs32(d)*127)), 0) {
			// Only for |max| within a hair of MaxFloat32: d·127 would
			// decode to ±Inf.
			return fmt.Errorf("elements %d..%d reach %g, too close to the float32 limit for a q8_k block", i*QKK, i*QKK+QKK-1, m)
		}
		qs := b[4 : 4+QKK]
		for j, v := range x {
			qs[j] = byte(int8(min(127, nearestInt(iscale*v))))
		}
		for j := 0; j < QKK/16; j++ {
			var sum int32
			for _, q := range qs[16*j : 16*j+16] {
				sum += int32(int8(q))
			}
			binary.LittleEndian.PutUint16(b[4+QKK+2*j:], uint16(int16(sum)))
		}
		binary.LittleEndian.PutUint32(b, math.Float32bits(1/iscale))
	}
	return nil
}

// abs32 is fabsf.
func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }
