package tensor

import (
	"encoding/binary"
	"math"
)

// IQ4_NL, IQ4_XS and MXFP4: 4-bit quants whose nibbles index a table of
// sixteen values instead of being integers themselves (ggml's block_iq4_nl,
// block_iq4_xs and block_mxfp4). In a 32-element block, byte j's low nibble
// is element j and its high nibble element j+16.

// Block sizes and offsets.
const (
	blockIQ4_NL = 2 + QK/2               // f16 d; u8 qs[16]
	blockIQ4_XS = 2 + 2 + QKK/64 + QKK/2 // f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128]
	blockMXFP4  = 1 + QK/2               // u8 e; u8 qs[16]
	offIQ4_XSQs = 2 + 2 + QKK/64
)

// KValuesIQ4NL is ggml's kvalues_iq4nl: the values of the sixteen IQ4_NL
// and IQ4_XS nibbles (a grid denser near zero).
var KValuesIQ4NL = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// KValuesMXFP4 is ggml's kvalues_mxfp4: the FP4 (E2M1) values of the
// sixteen MXFP4 nibbles, doubled so they are integers (0, ±0.5, ±1, ±1.5,
// ±2, ±3, ±4, ±6 times two); E8M0Half halves the block scale to match.
var KValuesMXFP4 = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// E8M0Half returns half the value 2^(e−127) of an E8M0 exponent byte, as
// ggml's ggml_e8m0_to_fp32_half: 2^(e−128), subnormal for e < 2 (e = 255,
// a NaN in the OCP format, gives 2^127, as in ggml).
func E8M0Half(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

// ScaleIQ4_XS returns the 6-bit scale (0..63; the value is d·(ls−32)) of
// 32-element sub-block ib (0..7) of an IQ4_XS block: low four bits from
// scales_l[ib/2] (low nibble for even ib), high two from bits 2ib..2ib+1 of
// scales_h.
func ScaleIQ4_XS(ib int, scalesH uint16, scalesL []byte) uint8 {
	return (scalesL[ib/2]>>(4*(ib%2)))&0xF | uint8(scalesH>>(2*ib)&3)<<4
}

func dequantizeIQ4_NL(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QK; i++ {
		b := src[i*blockIQ4_NL : (i+1)*blockIQ4_NL]
		y := dst[i*QK : (i+1)*QK]
		d := halfAt(b)
		for j, q := range b[2 : 2+QK/2] {
			y[j] = d * float32(KValuesIQ4NL[q&0xF])
			y[j+QK/2] = d * float32(KValuesIQ4NL[q>>4])
		}
	}
}

func dequantizeIQ4_XS(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QKK; i++ {
		b := src[i*blockIQ4_XS : (i+1)*blockIQ4_XS]
		y := dst[i*QKK : (i+1)*QKK]
		d := halfAt(b)
		sh := binary.LittleEndian.Uint16(b[2:])
		for ib := range QKK / 32 {
			dl := d * float32(int32(ScaleIQ4_XS(ib, sh, b[4:8]))-32)
			out := y[32*ib : 32*ib+32]
			for j, q := range b[offIQ4_XSQs+16*ib : offIQ4_XSQs+16*ib+16] {
				out[j] = dl * float32(KValuesIQ4NL[q&0xF])
				out[j+16] = dl * float32(KValuesIQ4NL[q>>4])
			}
		}
	}
}

func dequantizeMXFP4(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QK; i++ {
		b := src[i*blockMXFP4 : (i+1)*blockMXFP4]
		y := dst[i*QK : (i+1)*QK]
		d := E8M0Half(b[0])
		for j, q := range b[1 : 1+QK/2] {
			y[j] = float32(KValuesMXFP4[q&0xF]) * d
			y[j+QK/2] = float32(KValuesMXFP4[q>>4]) * d
		}
	}
}

// iq4Mids are the midpoints between neighbouring KValuesIQ4NL values (all
// half-integers, exact in float32).
var iq4Mids = func() (m [15]float32) {
	for k := range m {
		m[k] = (float32(KValuesIQ4NL[k]) + float32(KValuesIQ4NL[k+1])) / 2
	}
	return m
}()

// bestIndexIQ4 is ggml's best_index_int8 over KValuesIQ4NL: the index of
// the grid value nearest x, the upper one on a tie. ggml bisects to the two
// grid values around x and compares x − lo < hi − x; both differences are
// exact in float32 wherever they could decide a tie, so that is x < their
// midpoint, and the index is the number of midpoints at or below x (0 at or
// below −127, 15 at or above 113). TestBestIndexIQ4MatchesBisection holds
// this to a transcription of ggml's bisection.
func bestIndexIQ4(x float32) uint8 {
	var n uint8
	for _, m := range iq4Mids {
		var b uint8
		if x >= m {
			b = 1
		}
		n += b
	}
	return n
}

// iq4Tries is the ntry of quantize_iq4_nl and quantize_iq4_xs (what
// ggml_quantize_chunk and llama.cpp's quantizer use): 2·7+1 candidate
// scales per 32 elements.
const iq4Tries = 7

// fitIQ4 is the per-32-element search of ggml's quantize_row_iq4_nl_impl
// without importance weights: weights x², the scale max/127 (max the
// element of largest magnitude), refined to the least-squares scale of
// each of the candidate grids (iq4Tries+127+t)/max, t in −iq4Tries..iq4Tries,
// keeping the one with the smallest weighted error. It returns 0 for a
// block below groupMaxEps.
func fitIQ4(x []float32) float32 {
	x = x[:QK]
	var amax, vmax float32
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, vmax = a, v
		}
	}
	if amax < groupMaxEps {
		return 0
	}
	k0 := float32(KValuesIQ4NL[0])
	d := -vmax / k0
	id := 1 / d
	var sumqx, sumq2 float32
	for _, v := range x {
		q := float32(KValuesIQ4NL[bestIndexIQ4(id*v)])
		w := v * v
		sumqx += float32(float32(w*q) * v)
		sumq2 += float32(float32(w*q) * q)
	}
	d = 0
	if sumq2 > 0 {
		d = sumqx / sumq2
	}
	best := d * sumqx
	for itry := int32(-iq4Tries); itry <= iq4Tries; itry++ {
		id = float32(itry+int32(KValuesIQ4NL[0])) / vmax
		sumqx, sumq2 = 0, 0
		for _, v := range x {
			q := float32(KValuesIQ4NL[bestIndexIQ4(id*v)])
			w := v * v
			sumqx += float32(float32(w*q) * v)
			sumq2 += float32(float32(w*q) * q)
		}
		if sumq2 > 0 && float32(sumqx*sumqx) > float32(best*sumq2) {
			d = sumqx / sumq2
			best = d * sumqx
		}
	}
	return d
}

// packIQ4 stores the grid indices of x/d (0 for id = 0 gives the index of
// the value nearest 0) in the 16 nibble bytes qs of one 32-element block.
func packIQ4(qs []byte, x []float32, id float32) {
	qs, x = qs[:QK/2], x[:QK]
	for j := range qs {
		qs[j] = bestIndexIQ4(id*x[j]) | bestIndexIQ4(id*x[j+QK/2])<<4
	}
}

// quantizeIQ4_NL is ggml's quantize_iq4_nl without importance weights (as
// ggml_quantize_chunk runs it): the scale of fitIQ4 stored as f16 d, the
// indices taken against the unrounded scale.
func quantizeIQ4_NL(src []float32, dst []byte) error {
	for i := 0; i < len(src)/QK; i++ {
		x := src[i*QK : (i+1)*QK]
		b := dst[i*blockIQ4_NL : (i+1)*blockIQ4_NL]
		if err := checkFinite(x, i*QK); err != nil {
			return err
		}
		d := fitIQ4(x)
		if err := putScale(b, d, "scale", i*QK, QK); err != nil {
			return err
		}
		var id float32
		if d != 0 {
			id = 1 / d
		}
		packIQ4(b[2:], x, id)
	}
	return nil
}

// quantizeIQ4_XS is ggml's quantize_iq4_xs without importance weights: the
// eight 32-element scales of fitIQ4 stored as 6-bit signed multiples of
// d = −max/32 (max the scale of largest magnitude), the indices taken
// against d·l with the unrounded d.
func quantizeIQ4_XS(src []float32, dst []byte) error {
	var scales [QKK / 32]float32
	for i := 0; i < len(src)/QKK; i++ {
		x := src[i*QKK : (i+1)*QKK]
		b := dst[i*blockIQ4_XS : (i+1)*blockIQ4_XS]
		if err := checkFinite(x, i*QKK); err != nil {
			return err
		}
		var maxScale, amaxScale float32
		for ib := range scales {
			scales[ib] = fitIQ4(x[32*ib : 32*ib+32])
			if a := abs32(scales[ib]); a > amaxScale {
				amaxScale, maxScale = a, scales[ib]
			}
		}
		d := -maxScale / 32
		if err := putScale(b, d, "scale", i*QKK, QKK); err != nil {
			return err
		}
		var id float32
		if d != 0 {
			id = 1 / d
		}
		var sh uint16
		sl := b[4:8]
		for ib := range scales {
			l := clampInt32(nearestInt(id*scales[ib]), -32, 31)
			dl := d * float32(l)
			var idl float32
			if dl != 0 {
				idl = 1 / dl
			}
			packIQ4(b[offIQ4_XSQs+16*ib:], x[32*ib:32*ib+32], idl)
			l += 32
			if ib%2 == 0 {
				sl[ib/2] = byte(l & 0xF)
			} else {
				sl[ib/2] |= byte(l&0xF) << 4
			}
			sh |= uint16(l>>4) << (2 * ib)
		}
		binary.LittleEndian.PutUint16(b[2:], sh)
	}
	return nil
}

// log2Floor returns floorf(log2f(a)) for finite a > 0 as glibc computes it
// (MXFP4's exponent choice goes through it): the binary exponent of a,
// plus one where a is so close below a power of two that log2f rounds up
// to it. The float64 logarithm rounded to float32 agrees with glibc's
// log2f on every such boundary (tested against the runs gen.c recorded).
func log2Floor(a float32) int32 {
	return int32(math.Floor(float64(float32(math.Log2(float64(a))))))
}

// bestIndexMXFP4 is ggml's best_index_mxfp4: the nibble whose value
// KValuesMXFP4[i]·e is nearest x (the first one on a tie).
func bestIndexMXFP4(x, e float32) uint8 {
	best := uint8(0)
	bestErr := abs32(float32(float32(KValuesMXFP4[0])*e) - x)
	for i := 1; i < 16; i++ {
		if err := abs32(float32(float32(KValuesMXFP4[i])*e) - x); err < bestErr {
			best, bestErr = uint8(i), err
		}
	}
	return best
}

// quantizeMXFP4 is quantize_row_mxfp4_ref: the shared exponent e =
// floor(log2(max |x|)) − 2 + 127 (so the largest element lands near the
// top FP4 value 6), then each element's nearest FP4 value. As in ggml, a
// block whose largest magnitude is below 2^−125 gets an exponent byte
// wrapped from a negative number (C's float to uint8_t conversion on
// x86-64) and quantizes to zeros.
func quantizeMXFP4(src []float32, dst []byte) error {
	for i := 0; i < len(src)/QK; i++ {
		x := src[i*QK : (i+1)*QK]
		b := dst[i*blockMXFP4 : (i+1)*blockMXFP4]
		if err := checkFinite(x, i*QK); err != nil {
			return err
		}
		amax := math.Float32frombits(absMaxBits(x))
		var e uint8
		if amax > 0 {
			e = uint8(log2Floor(amax) - 2 + 127)
		}
		b[0] = e
		d := E8M0Half(e)
		for j := range QK / 2 {
			b[1+j] = bestIndexMXFP4(x[j], d) | bestIndexMXFP4(x[j+QK/2], d)<<4
		}
	}
	return nil
}
