package tensor

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// These tests need no shared data. They decode random blocks with a slow,
// element-at-a-time decoder written here from the block layouts (engine.md
// §2.1, ggml-common.h), computed in ggml's operation order, and require
// Dequantize to agree bit for bit.

func TestBlockLayoutConstants(t *testing.T) {
	tests := []struct {
		typ  Type
		size int
	}{
		{Q4_0, blockQ4_0}, {Q4_1, blockQ4_1}, {Q5_0, blockQ5_0}, {Q5_1, blockQ5_1},
		{Q8_0, blockQ8_0}, {Q8_1, blockQ8_1}, {Q4_K, blockQ4_K}, {Q5_K, blockQ5_K},
		{Q6_K, blockQ6_K}, {Q8_K, blockQ8_K},
	}
	want := map[Type]int{Q4_0: 18, Q4_1: 20, Q5_0: 22, Q5_1: 24, Q8_0: 34, Q8_1: 36, Q4_K: 144, Q5_K: 176, Q6_K: 210, Q8_K: 292}
	for _, tt := range tests {
		if tt.typ.TypeSize() != tt.size || tt.size != want[tt.typ] {
			t.Errorf("%s: TypeSize() = %d, block constant %d, want %d", tt.typ, tt.typ.TypeSize(), tt.size, want[tt.typ])
		}
	}
}

// refElement decodes element r of a row of type typ by reading only the bytes
// that element depends on.
func refElement(typ Type, row []byte, r int) float32 {
	half := func(b []byte) float32 { return FP16ToFP32(binary.LittleEndian.Uint16(b)) }
	bs := typ.BlockSize()
	b := row[r/bs*typ.TypeSize():]
	k := r % bs
	switch typ {
	case F32:
		return math.Float32frombits(binary.LittleEndian.Uint32(b))
	case F16:
		return half(b)
	case BF16:
		return BF16ToFP32(binary.LittleEndian.Uint16(b))
	case Q4_0, Q4_1, Q5_0, Q5_1:
		// Element k < 16 is the low nibble of qs[k], element k >= 16 the
		// high nibble of qs[k-16]; for the 5-bit types bit k of the u32 qh
		// is its fifth bit.
		hdr := map[Type]int{Q4_0: 2, Q4_1: 4, Q5_0: 2, Q5_1: 4}[typ]
		qs := b[hdr:]
		if typ == Q5_0 || typ == Q5_1 {
			qs = b[hdr+4:]
		}
		q := int32(qs[k%16] >> (4 * (k / 16)) & 0xF)
		if typ == Q5_0 || typ == Q5_1 {
			q |= int32(binary.LittleEndian.Uint32(b[hdr:])>>k&1) << 4
		}
		switch typ {
		case Q4_0:
			return float32(q-8) * half(b)
		case Q5_0:
			return float32(q-16) * half(b)
		default:
			return float32(float32(q)*half(b)) + half(b[2:])
		}
	case Q8_0:
		return float32(int8(b[2+k])) * half(b)
	case Q8_1:
		return float32(int8(b[4+k])) * half(b)
	case Q8_K:
		return math.Float32frombits(binary.LittleEndian.Uint32(b)) * float32(int8(b[4+k]))
	case Q4_K, Q5_K:
		// Sub-block j = k/32 of 32 elements; sub-blocks 2c and 2c+1 share
		// the 32 quant bytes of chunk c, low and high nibble.
		j := k / 32
		var qs []byte
		if typ == Q4_K {
			qs = b[16:]
		} else {
			qs = b[48:]
		}
		q := int32(qs[32*(j/2)+k%32] >> (4 * (j % 2)) & 0xF)
		if typ == Q5_K {
			q |= int32(b[16+k%32]>>j&1) << 4
		}
		sc, m := refScaleMin(b[4:16], j)
		d1 := half(b) * float32(sc)
		m1 := half(b[2:]) * float32(m)
		return float32(d1*float32(q)) - m1
	case Q6_K:
		// Halves of 128; in a half, quarter p = (k%128)/32 and l = k%32:
		// low 4 bits in ql[64h + 32(p%2) + l] (nibble p/2), high 2 bits in
		// qh[32h + l] at bit 2p, scale sc[8h + 2p + l/16].
		h, p, l := k/128, k%128/32, k%32
		lo := int32(b[64*h+32*(p%2)+l] >> (4 * (p / 2)) & 0xF)
		hi := int32(b[128+32*h+l] >> (2 * p) & 3)
		sc := int8(b[192+8*h+2*p+l/16])
		d := half(b[208:])
		return float32(d*float32(sc)) * float32(lo|hi<<4-32)
	}
	panic("refElement: no reference for " + typ.String())
}

// refScaleMin unpacks the 6-bit scale and min of sub-block j from the 12
// scale bytes: 16 six-bit fields, the low 6 bits of bytes 0..7 holding
// scales 0..3 and mins 0..3, bytes 8..11 the low 4 bits of scales 4..7 (low
// nibble) and mins 4..7 (high nibble), and the top 2 bits of bytes 0..3 and
// 4..7 the high bits of scales 4..7 and mins 4..7.
func refScaleMin(s []byte, j int) (sc, m int) {
	if j < 4 {
		return int(s[j] % 64), int(s[4+j] % 64)
	}
	i := j - 4
	return int(s[8+i]%16) + int(s[i]/64)*16, int(s[8+i]/16) + int(s[4+i]/64)*16
}

// randomRow fills a row of nblocks blocks of typ with random bytes whose
// scales are finite halves (as ggml's own random test blocks are); it mixes
// in zero, negative and subnormal scales.
func randomRow(r *rand.Rand, typ Type, nblocks int) []byte {
	row := make([]byte, nblocks*typ.TypeSize())
	for i := range row {
		row[i] = byte(r.Uint32())
	}
	scale := func() uint16 {
		switch r.IntN(8) {
		case 0:
			return 0
		case 1:
			return uint16(r.IntN(0x400)) | uint16(r.IntN(2))<<15 // subnormal
		default:
			return FP32ToFP16(float32(r.NormFloat64() * 0.1))
		}
	}
	for i := 0; i < nblocks; i++ {
		b := row[i*typ.TypeSize():]
		switch typ {
		case Q4_0, Q5_0, Q8_0:
			binary.LittleEndian.PutUint16(b, scale())
		case Q4_1, Q5_1, Q8_1, Q4_K, Q5_K:
			binary.LittleEndian.PutUint16(b, scale())
			binary.LittleEndian.PutUint16(b[2:], scale())
		case Q6_K:
			binary.LittleEndian.PutUint16(b[208:], scale())
		case Q8_K:
			binary.LittleEndian.PutUint32(b, math.Float32bits(float32(r.NormFloat64())))
		case F16:
			if h := binary.LittleEndian.Uint16(b); h&0x7c00 == 0x7c00 {
				binary.LittleEndian.PutUint16(b, h&^0x4000) // no NaN/Inf
			}
		case BF16:
			if h := binary.LittleEndian.Uint16(b); h&0x7f80 == 0x7f80 {
				binary.LittleEndian.PutUint16(b, h&^0x4000)
			}
		case F32:
			if u := binary.LittleEndian.Uint32(b); u&0x7f800000 == 0x7f800000 {
				binary.LittleEndian.PutUint32(b, u&^0x40000000)
			}
		}
	}
	return row
}

// allDequantTypes are the types Dequantize accepts.
var allDequantTypes = []Type{F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q4_K, Q5_K, Q6_K, Q8_K}

func TestDequantizeMatchesLayoutReference(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for _, typ := range allDequantTypes {
		if !CanDequantize(typ) {
			t.Errorf("CanDequantize(%s) = false, want true", typ)
			continue
		}
		nblocks := 4096 / typ.BlockSize() // 4096 elements, several blocks
		if nblocks > 512 {
			nblocks = 512
		}
		for trial := 0; trial < 4; trial++ {
			row := randomRow(r, typ, nblocks)
			n := nblocks * typ.BlockSize()
			got := make([]float32, n)
			if err := Dequantize(typ, row, got); err != nil {
				t.Fatalf("Dequantize(%s, %d bytes, %d elements): %v", typ, len(row), n, err)
			}
			bad := 0
			for k := range got {
				want := refElement(typ, row, k)
				if math.Float32bits(got[k]) != math.Float32bits(want) {
					if bad < 3 {
						t.Errorf("Dequantize(%s)[%d] = %g (%#08x), want %g (%#08x)", typ, k, got[k], math.Float32bits(got[k]), want, math.Float32bits(want))
					}
					bad++
				}
			}
			if bad > 0 {
				t.Errorf("Dequantize(%s) trial %d: %d of %d elements differ from the layout reference", typ, trial, bad, n)
			}
		}
	}
}

// TestDequantizeKnownBlocks decodes hand-made blocks whose values can be read
// off the layout description directly.
func TestDequantizeKnownBlocks(t *testing.T) {
	one := []byte{0x00, 0x3c}  // f16 1.0
	half := []byte{0x00, 0x38} // f16 0.5
	seq := func(n int, f func(i int) byte) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = f(i)
		}
		return b
	}
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	tests := []struct {
		name string
		typ  Type
		blk  []byte
		want func(k int) float32
	}{
		{"q4_0 d=1", Q4_0, cat(one, seq(16, func(i int) byte { return byte(i) | byte(15-i)<<4 })),
			func(k int) float32 {
				if k < 16 {
					return float32(k - 8)
				}
				return float32(15 - (k - 16) - 8)
			}},
		{"q4_1 d=0.5 m=1", Q4_1, cat(half, one, seq(16, func(i int) byte { return byte(i) | byte(i)<<4 })),
			func(k int) float32 { return 0.5*float32(k%16) + 1 }},
		{"q5_0 d=1 high bits on odd elements", Q5_0, cat(one, []byte{0xaa, 0xaa, 0xaa, 0xaa}, seq(16, func(i int) byte { return 0x33 })),
			func(k int) float32 { return float32(3 + 16*(k%2) - 16) }},
		{"q5_1 d=1 m=0.5 all bits", Q5_1, cat(one, half, []byte{0xff, 0xff, 0xff, 0xff}, seq(16, func(i int) byte { return 0xff })),
			func(k int) float32 { return 31.5 }},
		{"q8_0 d=0.5", Q8_0, cat(half, seq(32, func(i int) byte { return byte(int8(i - 16)) })),
			func(k int) float32 { return 0.5 * float32(k-16) }},
		{"q8_1 d=1 s ignored", Q8_1, cat(one, []byte{0xff, 0x7b}, seq(32, func(i int) byte { return byte(int8(-i)) })),
			func(k int) float32 { return float32(-k) }},
		// Q4_K: d=1, dmin=0.5, scales: sub-block j has scale j+1 and min j
		// (packed by hand), quants all 3 (low) and 5 (high).
		{"q4_k", Q4_K, cat(one, half, []byte{1, 2, 3, 4, 0, 1, 2, 3, 5 | 4<<4, 6 | 5<<4, 7 | 6<<4, 8 | 7<<4}, seq(128, func(i int) byte { return 3 | 5<<4 })),
			func(k int) float32 {
				j := k / 32
				q := 3
				if j%2 == 1 {
					q = 5
				}
				return float32(j+1)*float32(q) - 0.5*float32(j)
			}},
		// Q6_K: d=0.5 (last), scales 1..16, all quants 32+1 → q = 1 except
		// where qh adds: qh all 0 and ql all 0x11 gives q = 1-32 = -31.
		{"q6_k", Q6_K, cat(seq(128, func(i int) byte { return 0x11 }), seq(64, func(i int) byte { return 0 }), seq(16, func(i int) byte { return byte(i + 1) }), half),
			func(k int) float32 {
				h, p, l := k/128, k%128/32, k%32
				return 0.5 * float32(8*h+2*p+l/16+1) * -31
			}},
	}
	for _, tt := range tests {
		if len(tt.blk) != tt.typ.TypeSize() {
			t.Fatalf("%s: test block has %d bytes, want %d", tt.name, len(tt.blk), tt.typ.TypeSize())
		}
		got := make([]float32, tt.typ.BlockSize())
		if err := Dequantize(tt.typ, tt.blk, got); err != nil {
			t.Errorf("Dequantize(%s): %v", tt.name, err)
			continue
		}
		for k := range got {
			if want := tt.want(k); got[k] != want {
				t.Errorf("Dequantize(%s)[%d] = %g, want %g", tt.name, k, got[k], want)
			}
		}
	}
}

func TestScaleMinK4RoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 1000; trial++ {
		var sc, m [8]uint8
		for j := range sc {
			sc[j], m[j] = uint8(r.IntN(64)), uint8(r.IntN(64))
		}
		if trial == 0 {
			sc, m = [8]uint8{63, 63, 63, 63, 63, 63, 63, 63}, [8]uint8{63, 63, 63, 63, 63, 63, 63, 63}
		}
		s := make([]byte, 12)
		packScaleMinK4(s, &sc, &m)
		for j := range sc {
			gs, gm := ScaleMinK4(j, s)
			if gs != sc[j] || gm != m[j] {
				t.Errorf("ScaleMinK4(%d, pack(%v, %v)) = %d, %d, want %d, %d", j, sc, m, gs, gm, sc[j], m[j])
			}
			rs, rm := refScaleMin(s, j)
			if rs != int(sc[j]) || rm != int(m[j]) {
				t.Errorf("refScaleMin(%d, pack(%v, %v)) = %d, %d, want %d, %d", j, sc, m, rs, rm, sc[j], m[j])
			}
		}
	}
}

func TestDequantizeErrors(t *testing.T) {
	tests := []struct {
		name    string
		typ     Type
		nsrc    int
		ndst    int
		wantErr string
	}{
		{"unknown type", Type(99), 4, 1, "type(99): type not supported"},
		{"known but not decodable", I32, 16, 4, "i32: type not supported"},
		{"integer type", I32, 4, 1, "i32: type not supported"},
		{"partial block", Q8_0, 34, 31, "not a multiple of the q8_0 block size 32"},
		{"k-quant partial block", Q4_K, 144, 255, "not a multiple of the q4_k block size 256"},
		{"short source", Q4_0, 17, 32, "got 17 bytes for 32 elements, want 18"},
		{"long source", Q6_K, 211, 256, "got 211 bytes for 256 elements, want 210"},
		{"f32 short", F32, 7, 2, "got 7 bytes for 2 elements, want 8"},
		{"f16 long", F16, 6, 2, "got 6 bytes for 2 elements, want 4"},
	}
	for _, tt := range tests {
		dst := make([]float32, tt.ndst)
		for i := range dst {
			dst[i] = 42
		}
		err := Dequantize(tt.typ, make([]byte, tt.nsrc), dst)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("Dequantize(%s, %d bytes, %d elements) error = %v, want one containing %q", tt.typ, tt.nsrc, tt.ndst, err, tt.wantErr)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "dequantize ") {
			t.Errorf("Dequantize(%s) error %q does not start with \"dequantize \"", tt.typ, err)
		}
		for i, v := range dst {
			if v != 42 {
				t.Errorf("Dequantize(%s) failed but wrote dst[%d] = %g", tt.name, i, v)
				break
			}
		}
	}
	if err := Dequantize(Q4_K, nil, nil); err != nil {
		t.Errorf("Dequantize(q4_k, empty, empty) = %v, want nil", err)
	}
}
