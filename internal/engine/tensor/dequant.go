package tensor

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Block byte sizes of the types decoded here, spelled out so the loops below
// can slice whole blocks (the type table in types.go is the source of truth;
// TestBlockLayoutConstants checks the two agree).
const (
	blockQ4_0 = 2 + QK/2                   // f16 d; u8 qs[16]
	blockQ4_1 = 4 + QK/2                   // f16 d, m; u8 qs[16]
	blockQ5_0 = 2 + 4 + QK/2               // f16 d; u8 qh[4]; u8 qs[16]
	blockQ5_1 = 4 + 4 + QK/2               // f16 d, m; u8 qh[4]; u8 qs[16]
	blockQ8_0 = 2 + QK                     // f16 d; i8 qs[32]
	blockQ8_1 = 4 + QK                     // f16 d, s; i8 qs[32]
	blockQ4_K = 4 + 12 + QKK/2             // f16 d, dmin; u8 scales[12]; u8 qs[128]
	blockQ5_K = 4 + 12 + QKK/8 + QKK/2     // f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]
	blockQ6_K = QKK/2 + QKK/4 + QKK/16 + 2 // u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d
	blockQ8_K = 4 + QKK + QKK/16*2         // f32 d; i8 qs[256]; i16 bsums[16]
)

// fp16Table maps every half-precision bit pattern to its float32 value; row
// decoding of F16 data and of the f16 block scales goes through it.
var fp16Table = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = FP16ToFP32(uint16(i))
	}
	return &t
}()

// halfAt decodes the little-endian half-precision value at b[0:2].
func halfAt(b []byte) float32 { return fp16Table[binary.LittleEndian.Uint16(b)] }

// dequantizers holds the row decoder of every type Dequantize accepts. Each
// decoder may assume len(src) == RowBytes(len(dst)).
var dequantizers = map[Type]func(src []byte, dst []float32){
	F32:    dequantizeF32,
	F16:    dequantizeF16,
	BF16:   dequantizeBF16,
	Q4_0:   dequantizeQ4_0,
	Q4_1:   dequantizeQ4_1,
	Q5_0:   dequantizeQ5_0,
	Q5_1:   dequantizeQ5_1,
	Q8_0:   dequantizeQ8_0,
	Q8_1:   dequantizeQ8_1,
	Q4_K:   dequantizeQ4_K,
	Q5_K:   dequantizeQ5_K,
	Q6_K:   dequantizeQ6_K,
	Q8_K:   dequantizeQ8_K,
	Q2_K:   dequantizeQ2_K,
	Q3_K:   dequantizeQ3_K,
	IQ4_NL: dequantizeIQ4_NL,
	IQ4_XS: dequantizeIQ4_XS,
	MXFP4:  dequantizeMXFP4,
}

// CanDequantize reports whether Dequantize can decode type t.
func CanDequantize(t Type) bool { return dequantizers[t] != nil }

// Dequantize decodes len(dst) elements of type t from src (exactly
// RowBytes(len(dst)) bytes) into dst. The results are bit-for-bit those of
// ggml's dequantize_row_* (to_float) functions. It fails, writing nothing,
// when t cannot be decoded, len(dst) is not a multiple of t's block size, or
// src has the wrong length.
func Dequantize(t Type, src []byte, dst []float32) error {
	dec := dequantizers[t]
	if dec == nil {
		return fmt.Errorf("dequantize %s: type not supported (want f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q8_1, q2_k, q3_k, q4_k, q5_k, q6_k, q8_k, iq4_nl, iq4_xs or mxfp4)", t)
	}
	want, err := t.RowBytes(len(dst))
	if err != nil {
		return fmt.Errorf("dequantize %s: %w", t, err)
	}
	if len(src) != want {
		return fmt.Errorf("dequantize %s: got %d bytes for %d elements, want %d", t, len(src), len(dst), want)
	}
	dec(src, dst)
	return nil
}

func dequantizeF32(src []byte, dst []float32) {
	src = src[:4*len(dst)]
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

func dequantizeF16(src []byte, dst []float32) {
	src = src[:2*len(dst)]
	tab := fp16Table
	for i := range dst {
		dst[i] = tab[binary.LittleEndian.Uint16(src[2*i:])]
	}
}

func dequantizeBF16(src []byte, dst []float32) {
	src = src[:2*len(dst)]
	for i := range dst {
		dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*i:])) << 16)
	}
}

// The legacy (32-element) decoders below follow ggml: the quant is an
// integer converted to float and multiplied by the block scale; the types
// with a minimum then add it. Products are wrapped in float32() so that the
// compiler can never fuse them with the following addition (the Go spec
// allows fusion otherwise), which would change the rounding.

func dequantizeQ4_0(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QK; i++ {
		b := src[i*blockQ4_0 : (i+1)*blockQ4_0]
		y := dst[i*QK : (i+1)*QK]
		d := halfAt(b)
		qs := b[2 : 2+QK/2]
		for j, q := range qs {
			y[j] = float32(int32(q&0xF)-8) * d
			y[j+QK/2] = float32(int32(q>>4)-8) * d
		}
	}
}

func dequantizeQ4_1(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QK; i++ {
		b := src[i*blockQ4_1 : (i+1)*blockQ4_1]
		y := dst[i*QK : (i+1)*QK]
		d, m := halfAt(b), halfAt(b[2:])
		qs := b[4 : 4+QK/2]
		for j, q := range qs {
			y[j] = float32(float32(q&0xF)*d) + m
			y[j+QK/2] = float32(float32(q>>4)*d) + m
		}
	}
}

func dequantizeQ5_0(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QK; i++ {
		b := src[i*blockQ5_0 : (i+1)*blockQ5_0]
		y := dst[i*QK : (i+1)*QK]
		d := halfAt(b)
		qh := binary.LittleEndian.Uint32(b[2:])
		qs := b[6 : 6+QK/2]
		for j, q := range qs {
			h0 := (qh >> uint(j) << 4) & 0x10
			h1 := (qh >> uint(j+12)) & 0x10
			y[j] = float32(int32(uint32(q&0xF)|h0)-16) * d
			y[j+QK/2] = float32(int32(uint32(q>>4)|h1)-16) * d
		}
	}
}

func dequantizeQ5_1(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QK; i++ {
		b := src[i*blockQ5_1 : (i+1)*blockQ5_1]
		y := dst[i*QK : (i+1)*QK]
		d, m := halfAt(b), halfAt(b[2:])
		qh := binary.LittleEndian.Uint32(b[4:])
		qs := b[8 : 8+QK/2]
		for j, q := range qs {
			h0 := (qh >> uint(j) << 4) & 0x10
			h1 := (qh >> uint(j+12)) & 0x10
			y[j] = float32(float32(uint32(q&0xF)|h0)*d) + m
			y[j+QK/2] = float32(float32(uint32(q>>4)|h1)*d) + m
		}
	}
}

func dequantizeQ8_0(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QK; i++ {
		b := src[i*blockQ8_0 : (i+1)*blockQ8_0]
		y := dst[i*QK : (i+1)*QK]
		d := halfAt(b)
		qs := b[2 : 2+QK]
		for j, q := range qs {
			y[j] = float32(int8(q)) * d
		}
	}
}

// dequantizeQ8_1 decodes ggml's Q8_1 activation blocks; the second half
// (s = d·Σq) is a cached sum and plays no part in the values.
func dequantizeQ8_1(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QK; i++ {
		b := src[i*blockQ8_1 : (i+1)*blockQ8_1]
		y := dst[i*QK : (i+1)*QK]
		d := halfAt(b)
		qs := b[4 : 4+QK]
		for j, q := range qs {
			y[j] = float32(int8(q)) * d
		}
	}
}

// ScaleMinK4 returns the 6-bit scale and minimum of sub-block j (0..7) from
// the 12 packed scale bytes of a Q4_K or Q5_K block (ggml's get_scale_min_k4).
func ScaleMinK4(j int, s []byte) (sc, m uint8) {
	if j < 4 {
		return s[j] & 63, s[j+4] & 63
	}
	return s[j+4]&0xF | (s[j-4]>>6)<<4, s[j+4]>>4 | (s[j]>>6)<<4
}

func dequantizeQ4_K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QKK; i++ {
		b := src[i*blockQ4_K : (i+1)*blockQ4_K]
		y := dst[i*QKK : (i+1)*QKK]
		d, dmin := halfAt(b), halfAt(b[2:])
		scales := b[4:16]
		for c := 0; c < 4; c++ {
			q := b[16+32*c : 16+32*c+32]
			sc, m := ScaleMinK4(2*c, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = ScaleMinK4(2*c+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			lo := y[64*c : 64*c+32]
			hi := y[64*c+32 : 64*c+64]
			for l, v := range q {
				lo[l] = float32(d1*float32(v&0xF)) - m1
				hi[l] = float32(d2*float32(v>>4)) - m2
			}
		}
	}
}

func dequantizeQ5_K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QKK; i++ {
		b := src[i*blockQ5_K : (i+1)*blockQ5_K]
		y := dst[i*QKK : (i+1)*QKK]
		d, dmin := halfAt(b), halfAt(b[2:])
		scales := b[4:16]
		qh := b[16 : 16+QKK/8]
		for c := 0; c < 4; c++ {
			ql := b[48+32*c : 48+32*c+32]
			sc, m := ScaleMinK4(2*c, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = ScaleMinK4(2*c+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			shift := uint(2 * c)
			lo := y[64*c : 64*c+32]
			hi := y[64*c+32 : 64*c+64]
			for l, v := range ql {
				h := qh[l] >> shift
				lo[l] = float32(d1*float32(v&0xF|(h&1)<<4)) - m1
				hi[l] = float32(d2*float32(v>>4|(h&2)<<3)) - m2
			}
		}
	}
}

func dequantizeQ6_K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QKK; i++ {
		b := src[i*blockQ6_K : (i+1)*blockQ6_K]
		y := dst[i*QKK : (i+1)*QKK]
		d := halfAt(b[QKK/2+QKK/4+QKK/16:])
		for h := 0; h < 2; h++ {
			sc := b[QKK/2+QKK/4+8*h : QKK/2+QKK/4+8*h+8]
			// Element l of this half uses scale is = l/16, so each run
			// of 16 shares the four products d·sc (ggml forms them per
			// element, with the same result).
			for is := 0; is < 2; is++ {
				ql := b[64*h+16*is : 64*h+16*is+48]
				qh := b[QKK/2+32*h+16*is : QKK/2+32*h+16*is+16]
				yh := y[128*h+16*is : 128*h+16*is+112]
				d1 := d * float32(int8(sc[is]))
				d2 := d * float32(int8(sc[is+2]))
				d3 := d * float32(int8(sc[is+4]))
				d4 := d * float32(int8(sc[is+6]))
				for l, h := range qh {
					a, c := ql[l], ql[l+32]
					yh[l] = d1 * float32(int32(a&0xF|(h&3)<<4)-32)
					yh[l+32] = d2 * float32(int32(c&0xF|(h>>2&3)<<4)-32)
					yh[l+64] = d3 * float32(int32(a>>4|(h>>4&3)<<4)-32)
					yh[l+96] = d4 * float32(int32(c>>4|(h>>6&3)<<4)-32)
				}
			}
		}
	}
}

// dequantizeQ8_K decodes ggml's Q8_K activation blocks (f32 scale; the
// 16 block sums are cached values and play no part).
func dequantizeQ8_K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QKK; i++ {
		b := src[i*blockQ8_K : (i+1)*blockQ8_K]
		y := dst[i*QKK : (i+1)*QKK]
		d := math.Float32frombits(binary.LittleEndian.Uint32(b))
		qs := b[4 : 4+QKK]
		for j, q := range qs {
			y[j] = d * float32(int8(q))
		}
	}
}
