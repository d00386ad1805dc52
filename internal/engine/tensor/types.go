package tensor

import (
	"fmt"
	"math"
)

// Type is a ggml tensor element type, numbered as in ggml.h (ggml_type) and
// stored with that number in GGUF tensor infos.
type Type uint32

// The ggml types. Only the ones with a non-zero block size in typeTable are
// understood by Tandem; the rest are named so errors can say what a file has.
const (
	F32     Type = 0
	F16     Type = 1
	Q4_0    Type = 2
	Q4_1    Type = 3
	Q5_0    Type = 6
	Q5_1    Type = 7
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q2_K    Type = 10
	Q3_K    Type = 11
	Q4_K    Type = 12
	Q5_K    Type = 13
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	IQ4_NL  Type = 20
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	BF16    Type = 30
	MXFP4   Type = 39
)

// QK is the number of elements in one block of the legacy quant types
// (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1).
const QK = 32

// QKK is the number of elements in one super-block of the K-quant types.
const QKK = 256

type typeInfo struct {
	name      string
	blockSize int // elements per block
	typeSize  int // bytes per block
}

// typeTable is indexed by Type; a zero blockSize means "not supported".
var typeTable = [...]typeInfo{
	F32:  {"f32", 1, 4},
	F16:  {"f16", 1, 2},
	Q4_0: {"q4_0", QK, 2 + QK/2},
	Q4_1: {"q4_1", QK, 4 + QK/2},
	Q5_0: {"q5_0", QK, 2 + 4 + QK/2},
	Q5_1: {"q5_1", QK, 4 + 4 + QK/2},
	Q8_0: {"q8_0", QK, 2 + QK},
	Q8_1: {"q8_1", QK, 4 + QK},
	// MXFP4 (gpt-oss's experts): u8 e (E8M0 shared exponent); u8 qs[16]
	// (E2M1 nibbles).
	MXFP4: {"mxfp4", QK, 1 + QK/2},
	// IQ4_NL: f16 d; u8 qs[16] (indices into the non-linear 4-bit grid).
	IQ4_NL: {"iq4_nl", QK, 2 + QK/2},
	// IQ4_XS: f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128].
	IQ4_XS: {"iq4_xs", QKK, 2 + 2 + QKK/64 + QKK/2},
	// Q2_K: u8 scales[16] (4-bit scale | 4-bit min); u8 qs[64]; f16 d, dmin.
	Q2_K: {"q2_k", QKK, QKK/16 + QKK/4 + 4},
	// Q3_K: u8 hmask[32]; u8 qs[64]; u8 scales[12] (16 6-bit); f16 d.
	Q3_K: {"q3_k", QKK, QKK/8 + QKK/4 + 12 + 2},
	Q4_K: {"q4_k", QKK, 4 + 12 + QKK/2},
	Q5_K: {"q5_k", QKK, 4 + 12 + QKK/8 + QKK/2},
	Q6_K: {"q6_k", QKK, QKK/2 + QKK/4 + QKK/16 + 2},
	Q8_K: {"q8_k", QKK, 4 + QKK + QKK/16*2},
	I8:   {"i8", 1, 1},
	I16:  {"i16", 1, 2},
	I32:  {"i32", 1, 4},
	I64:  {"i64", 1, 8},
	F64:  {"f64", 1, 8},
	BF16: {"bf16", 1, 2},
}

func (t Type) info() typeInfo {
	if int(t) < len(typeTable) {
		return typeTable[t]
	}
	return typeInfo{}
}

// Known reports whether Tandem knows the block layout of t.
func (t Type) Known() bool { return t.info().blockSize != 0 }

// String returns ggml's lower-case name for t, or "type(N)" for an unknown type.
func (t Type) String() string {
	if n := t.info().name; n != "" {
		return n
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockSize returns the number of elements in one block of t (1 for plain
// types), or 0 when t is unknown.
func (t Type) BlockSize() int { return t.info().blockSize }

// TypeSize returns the number of bytes in one block of t, or 0 when t is unknown.
func (t Type) TypeSize() int { return t.info().typeSize }

// RowBytes returns the byte size of a row of n elements of type t. It fails
// when t is unknown or n is not a multiple of the block size.
func (t Type) RowBytes(n int) (int, error) {
	ti := t.info()
	if ti.blockSize == 0 {
		return 0, fmt.Errorf("tensor type %s is not supported", t)
	}
	if n < 0 || n%ti.blockSize != 0 {
		return 0, fmt.Errorf("row of %d elements is not a multiple of the %s block size %d", n, t, ti.blockSize)
	}
	return n / ti.blockSize * ti.typeSize, nil
}

// ParseType returns the Type with ggml's lower-case name s ("q8_0", "f16", ...).
func ParseType(s string) (Type, error) {
	for i, ti := range typeTable {
		if ti.blockSize != 0 && ti.name == s {
			return Type(i), nil
		}
	}
	return 0, fmt.Errorf("unknown tensor type %q (want one of f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs or mxfp4)", s)
}

// FP16ToFP32 converts an IEEE 754 half-precision value to float32 exactly.
func FP16ToFP32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // Inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0: // normal
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	case mant == 0: // signed zero
		return math.Float32frombits(sign)
	default: // subnormal: renormalize
		e := uint32(113)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		mant &= 0x3ff
		return math.Float32frombits(sign | e<<23 | mant<<13)
	}
}

// FP32ToFP16 converts a float32 to half precision, rounding to nearest even as
// the F16C instruction VCVTPS2PH and ggml's scalar fallback do.
func FP32ToFP16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff { // Inf or NaN (keep NaN quiet)
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00 // overflow to Inf
	}
	if e <= 0 {
		if e < -10 {
			return sign // underflow to zero
		}
		mant |= 0x800000
		shift := uint32(14 - e)
		half := mant >> shift
		rem := mant & (1<<shift - 1)
		mid := uint32(1) << (shift - 1)
		if rem > mid || (rem == mid && half&1 == 1) {
			half++
		}
		return sign | uint16(half)
	}
	half := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && half&1 == 1) {
		half++ // may carry into the exponent, which is the correct rounding
	}
	return sign | uint16(half)
}

// BF16ToFP32 converts a bfloat16 value to float32 exactly.
func BF16ToFP32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// FP32ToBF16 converts a float32 to bfloat16, rounding to nearest even as
// ggml_compute_fp32_to_bf16 does (NaNs stay NaN).
func FP32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 64
	}
	return uint16((b + (0x7fff + (b>>16)&1)) >> 16)
}
