package tensor

import (
	"math"
	"testing"
)

// These tests check the half and bfloat16 conversions of types.go against
// rules derived independently from IEEE 754: exact decoding by
// mantissa·2^exponent arithmetic, and round-to-nearest-even encoding checked
// at every value and every midpoint between neighbours.

// halfValue decodes a finite half from its fields with float64 arithmetic.
func halfValue(h uint16) float64 {
	exp := int(h>>10) & 0x1f
	mant := float64(h & 0x3ff)
	var v float64
	if exp == 0 {
		v = math.Ldexp(mant, -24) // subnormal: mant·2^-24
	} else {
		v = math.Ldexp(1024+mant, exp-25) // (1 + mant/1024)·2^(exp-15)
	}
	if h&0x8000 != 0 {
		v = -v
	}
	return v
}

func TestFP16ToFP32AllHalves(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		got := FP16ToFP32(h)
		exp := h >> 10 & 0x1f
		switch {
		case exp == 0x1f && h&0x3ff == 0:
			if !math.IsInf(float64(got), 0) || math.Signbit(float64(got)) != (h&0x8000 != 0) {
				t.Errorf("FP16ToFP32(%#04x) = %g, want a %s infinity", h, got, signName(h))
			}
		case exp == 0x1f:
			if !math.IsNaN(float64(got)) {
				t.Errorf("FP16ToFP32(%#04x) = %g, want NaN", h, got)
			}
		default:
			want := halfValue(h)
			if float64(got) != want || math.Signbit(float64(got)) != (h&0x8000 != 0) {
				t.Errorf("FP16ToFP32(%#04x) = %g, want %g", h, got, want)
			}
		}
		if dq := fp16Table[h]; math.Float32bits(dq) != math.Float32bits(got) {
			t.Errorf("fp16Table[%#04x] = %g, want %g", h, dq, got)
		}
	}
}

func signName(h uint16) string {
	if h&0x8000 != 0 {
		return "negative"
	}
	return "positive"
}

func TestFP32ToFP16RoundTripsAllHalves(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
			continue // NaN: payloads need not survive
		}
		if got := FP32ToFP16(FP16ToFP32(h)); got != h {
			t.Errorf("FP32ToFP16(FP16ToFP32(%#04x)) = %#04x, want %#04x", h, got, h)
		}
	}
}

// TestFP32ToFP16Rounding checks every rounding boundary: for each pair of
// neighbouring non-negative halves (h, h+1), the float32 midpoint must go to
// the even one and the float32 values just below and above it to h and h+1.
// 0x7c00 (Inf) serves as the neighbour above the largest finite half, at
// 65536, which is where IEEE rounding puts the overflow threshold.
func TestFP32ToFP16Rounding(t *testing.T) {
	for h := uint16(0); h < 0x7c00; h++ {
		lo := halfValue(h)
		hi := 65536.0
		if h+1 < 0x7c00 {
			hi = halfValue(h + 1)
		}
		mid := float32((lo + hi) / 2) // exact: needs one bit more than a half
		if float64(mid) != (lo+hi)/2 {
			t.Fatalf("midpoint of %#04x and %#04x is not a float32", h, h+1)
		}
		even := h
		if h&1 == 1 {
			even = h + 1
		}
		below := math.Nextafter32(mid, 0)
		above := math.Nextafter32(mid, float32(math.Inf(1)))
		for _, c := range []struct {
			f    float32
			want uint16
		}{{mid, even}, {below, h}, {above, h + 1}} {
			if got := FP32ToFP16(c.f); got != c.want {
				t.Errorf("FP32ToFP16(%g) = %#04x, want %#04x", c.f, got, c.want)
			}
			if got := FP32ToFP16(-c.f); got != c.want|0x8000 {
				t.Errorf("FP32ToFP16(%g) = %#04x, want %#04x", -c.f, got, c.want|0x8000)
			}
		}
	}
}

func TestFP32ToFP16Special(t *testing.T) {
	tests := []struct {
		in   float32
		want uint16
	}{
		{0, 0x0000},
		{float32(math.Copysign(0, -1)), 0x8000},
		{1, 0x3c00},
		{-2, 0xc000},
		{65504, 0x7bff},           // largest finite half
		{65519.99, 0x7bff},        // just under the overflow midpoint
		{65520, 0x7c00},           // midpoint to "65536" rounds to even: Inf
		{1e10, 0x7c00},            // overflow
		{-1e10, 0xfc00},           // negative overflow
		{math.MaxFloat32, 0x7c00}, // largest float32
		{float32(math.Inf(1)), 0x7c00},
		{float32(math.Inf(-1)), 0xfc00},
		{0x1p-14, 0x0400},             // smallest normal half
		{0x1p-24, 0x0001},             // smallest subnormal half
		{0x1p-25, 0x0000},             // tie between 0 and 2^-24: to even (0)
		{0x1.000002p-25, 0x0001},      // just above the tie
		{0x1.8p-24, 0x0002},           // tie between 1 and 2 subnormal units: to even
		{0x1p-26, 0x0000},             // underflow
		{0x1p-149, 0x0000},            // smallest float32 subnormal
		{0x1.ffcp-15, 0x0400},         // largest subnormal + half a unit rounds up into the normals
		{0x1.0p-15 + 0x1p-25, 0x0200}, // tie at subnormal 0x200/0x201: to even
	}
	for _, tt := range tests {
		if got := FP32ToFP16(tt.in); got != tt.want {
			t.Errorf("FP32ToFP16(%g) = %#04x, want %#04x", tt.in, got, tt.want)
		}
	}
	for _, bits := range []uint32{0x7fc00000, 0xffc00000, 0x7f800001, 0x7fbfffff} {
		f := math.Float32frombits(bits)
		got := FP32ToFP16(f)
		if got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
			t.Errorf("FP32ToFP16(NaN %#08x) = %#04x, want a NaN", bits, got)
		}
	}
}

func TestBF16RoundTripsAll(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		f := BF16ToFP32(h)
		if want := math.Float32frombits(uint32(h) << 16); math.Float32bits(f) != math.Float32bits(want) {
			t.Errorf("BF16ToFP32(%#04x) = %g, want %g", h, f, want)
		}
		if math.IsNaN(float64(f)) {
			if got := FP32ToBF16(f); !math.IsNaN(float64(BF16ToFP32(got))) {
				t.Errorf("FP32ToBF16(NaN %#04x) = %#04x, want a NaN", h, got)
			}
			continue
		}
		if got := FP32ToBF16(f); got != h {
			t.Errorf("FP32ToBF16(BF16ToFP32(%#04x)) = %#04x, want %#04x", h, got, h)
		}
	}
}

// TestFP32ToBF16Rounding checks, for every pair of neighbouring finite
// bfloat16 values, that the midpoint rounds to even and its float32
// neighbours to the nearer value. Above the largest finite bfloat16 the
// neighbour is Inf (0x7f80), as IEEE rounding has it.
func TestFP32ToBF16Rounding(t *testing.T) {
	for h := uint32(0); h < 0x7f80; h++ {
		mid := math.Float32frombits(h<<16 | 0x8000)
		even := uint16(h)
		if h&1 == 1 {
			even = uint16(h + 1)
		}
		below := math.Float32frombits(h<<16 | 0x7fff)
		above := math.Float32frombits(h<<16 | 0x8001)
		for _, c := range []struct {
			f    float32
			want uint16
		}{{mid, even}, {below, uint16(h)}, {above, uint16(h + 1)}} {
			if got := FP32ToBF16(c.f); got != c.want {
				t.Errorf("FP32ToBF16(%g [%#08x]) = %#04x, want %#04x", c.f, math.Float32bits(c.f), got, c.want)
			}
			if got := FP32ToBF16(-c.f); got != c.want|0x8000 {
				t.Errorf("FP32ToBF16(%g) = %#04x, want %#04x", -c.f, got, c.want|0x8000)
			}
		}
	}
}
