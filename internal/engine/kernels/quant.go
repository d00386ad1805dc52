package kernels

import (
	"encoding/binary"
	"math"

	"tandem/internal/engine/tensor"
)

// quantizeF32 stores src as little-endian float32s.
func quantizeF32(src []float32, dst []byte) {
	copy(dst[:4*len(src)], f32Bytes(src))
}

// quantizeF16 rounds src to half precision (nearest even).
func quantizeF16(conv func([]float32, []uint16), src []float32, dst []byte) {
	dst = dst[:2*len(src)]
	if aligned(dst, 2) {
		conv(src, u16View(dst))
		return
	}
	for i, f := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], tensor.FP32ToFP16(f))
	}
}

// quantizeBF16 rounds src to bfloat16 (nearest even).
func quantizeBF16(src []float32, dst []byte) {
	dst = dst[:2*len(src)]
	for i, f := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], tensor.FP32ToBF16(f))
	}
}

// absMax returns the largest |x| of x (NaNs are skipped).
func absMax(x []float32) float32 {
	var m0, m1 float32
	i := 0
	for ; i+2 <= len(x); i += 2 {
		m0 = max32(m0, math.Float32frombits(math.Float32bits(x[i])&0x7fffffff))
		m1 = max32(m1, math.Float32frombits(math.Float32bits(x[i+1])&0x7fffffff))
	}
	for ; i < len(x); i++ {
		m0 = max32(m0, math.Float32frombits(math.Float32bits(x[i])&0x7fffffff))
	}
	return max32(m0, m1)
}

// max32 returns the larger of m and a, keeping m when a is NaN.
func max32(m, a float32) float32 {
	if a > m {
		return a
	}
	return m
}

// roundAway rounds v to the nearest integer, halves away from zero, as C's
// roundf. The caller guarantees |v| < 127.5 (a NaN gives an unspecified
// byte, never a panic). The ±0.5 is added in float64, where it is exact.
func roundAway(v float32) int8 {
	f := float64(v)
	return int8(int32(f + math.Copysign(0.5, f)))
}

// quantizeQ8_0 is ggml's reference Q8_0 quantizer: per block of 32,
// d = amax/127 (stored as f16), q = roundf(x·(1/d)) with 1/d taken from the
// unrounded d, so q ∈ [-127, 127]; an all-zero block gets d = 0, q = 0.
func quantizeQ8_0(src []float32, dst []byte) {
	nb := len(src) / qk
	dst = dst[:nb*sizeQ8_0]
	for b := 0; b < nb; b++ {
		x, y := src[b*qk:(b+1)*qk], dst[b*sizeQ8_0:(b+1)*sizeQ8_0]
		d := absMax(x) / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(y, tensor.FP32ToFP16(d))
		q := y[2:34]
		for j, v := range x {
			q[j] = byte(roundAway(v * id))
		}
	}
}

// quantizeQ8_1 is ggml's reference Q8_1 quantizer: Q8_0's rule plus
// s = d·Σq, both stored as f16.
func quantizeQ8_1(src []float32, dst []byte) {
	nb := len(src) / qk
	dst = dst[:nb*sizeQ8_1]
	for b := 0; b < nb; b++ {
		x, y := src[b*qk:(b+1)*qk], dst[b*sizeQ8_1:(b+1)*sizeQ8_1]
		d := absMax(x) / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		q := y[4:36]
		var sum int32
		for j, v := range x {
			r := roundAway(v * id)
			q[j] = byte(r)
			sum += int32(r)
		}
		binary.LittleEndian.PutUint16(y, tensor.FP32ToFP16(d))
		binary.LittleEndian.PutUint16(y[2:], tensor.FP32ToFP16(float32(sum)*d))
	}
}

// nearestEven rounds v to the nearest integer, halves to even, as ggml's
// nearest_int (the float32 sum with 1.5·2^23 rounds to an integer), for
// |v| <= 127.
func nearestEven(v float32) int32 {
	return int32(math.Float32bits(v+12582912)&0x007fffff) - 0x00400000
}

// quantizeQ8_K is ggml's reference Q8_K quantizer: per super-block of 256,
// max = the element of largest magnitude (with its sign), iscale =
// -127/max, q = min(127, nearest_int(iscale·x)), d = 1/iscale (f32), and
// bsums[j] = Σ q[16j:16j+16]. An all-zero block gets d = 0, q = 0.
func quantizeQ8_K(src []float32, dst []byte) {
	nb := len(src) / qkk
	dst = dst[:nb*sizeQ8_K]
	for b := 0; b < nb; b++ {
		x, y := src[b*qkk:(b+1)*qkk], dst[b*sizeQ8_K:(b+1)*sizeQ8_K]
		var amax, max float32
		for _, v := range x {
			if a := math.Float32frombits(math.Float32bits(v) & 0x7fffffff); a > amax {
				amax, max = a, v
			}
		}
		q, bsums := y[4:4+qkk], y[4+qkk:]
		if amax == 0 {
			clear(y)
			continue
		}
		iscale := -127 / max
		for j := 0; j < qkk/16; j++ {
			var s int16
			for i, v := range x[16*j : 16*j+16] {
				r := min(nearestEven(iscale*v), 127)
				q[16*j+i] = byte(int8(r))
				s += int16(r)
			}
			binary.LittleEndian.PutUint16(bsums[2*j:], uint16(s))
		}
		binary.LittleEndian.PutUint32(y, math.Float32bits(1/iscale))
	}
}

// prepQ8_0 is the bytes of one block's prepared record of a four-token
// Q8_0 tile: the four tokens' block scales as float32, then each token's 32
// activation quants + 128 as unsigned bytes (what VPDPBUSD multiplies by
// the signed weight quants; the kernel subtracts 128·Σw).
const prepQ8_0 = 16 + 4*32

// prepTileBytes returns the bytes of the prepared data of a four-token
// tile of rows of nb blocks of vec dot type vt (0 when the four-token
// kernels need nothing prepared).
func prepTileBytes(vt tensor.Type, nb int) int {
	switch vt {
	case tensor.Q8_0:
		return nb * prepQ8_0
	}
	return 0
}

// prepareTile writes the prepared data of the four activation rows a (row
// stride arb, nb blocks each) into dst (prepTileBytes(vt, nb) bytes).
func prepareTile(vt tensor.Type, a []byte, arb, nb int, dst []byte) {
	switch vt {
	case tensor.Q8_0:
		for b := 0; b < nb; b++ {
			rec := dst[b*prepQ8_0 : (b+1)*prepQ8_0]
			for t := 0; t < 4; t++ {
				blk := a[t*arb+b*sizeQ8_0 : t*arb+(b+1)*sizeQ8_0]
				binary.LittleEndian.PutUint32(rec[4*t:], math.Float32bits(half(blk)))
				c, q := rec[16+32*t:16+32*t+32], blk[2:sizeQ8_0]
				for j := 0; j < 32; j += 8 {
					binary.LittleEndian.PutUint64(c[j:], binary.LittleEndian.Uint64(q[j:])^0x8080808080808080)
				}
			}
		}
	}
}

// prep8PairBytes is the bytes of one block pair's record in an eight-token
// Q8_0 tile: per token, the pair's 64 activation quants + 128 as unsigned
// bytes, then 16 float32 scales (the first block's scale 8 times, then the
// second's), so the kernel loads both without shuffles.
const prep8PairBytes = 8 * 128

// prepareTile8 writes the eight-token tile data of the eight Q8_0
// activation rows a (row stride arb, nb blocks each, nb even) into dst
// (nb/2·prep8PairBytes bytes).
func prepareTile8(a []byte, arb, nb int, dst []byte) {
	for p := 0; p < nb/2; p++ {
		for t := 0; t < 8; t++ {
			rec := dst[p*prep8PairBytes+128*t : p*prep8PairBytes+128*(t+1)]
			for h := 0; h < 2; h++ {
				blk := a[t*arb+(2*p+h)*sizeQ8_0 : t*arb+(2*p+h+1)*sizeQ8_0]
				c, q := rec[32*h:32*h+32], blk[2:sizeQ8_0]
				for j := 0; j < 32; j += 8 {
					binary.LittleEndian.PutUint64(c[j:], binary.LittleEndian.Uint64(q[j:])^0x8080808080808080)
				}
				d := math.Float32bits(half(blk))
				for j := 0; j < 8; j++ {
					binary.LittleEndian.PutUint32(rec[64+32*h+4*j:], d)
				}
			}
		}
	}
}
