package synth

import (
	"encoding/binary"
	"math"
	"math/rand/v2"

	"tandem/internal/engine/tensor"
)

// K-quant weights are drawn directly as blocks instead of quantizing random
// floats: ggml's Q4_K and Q6_K quantizers search for each block's scales
// (about 75 and 40 ns per weight here), which would make the 1.1e9-weight
// "1b" preset take minutes. Random blocks cost a fraction of a nanosecond per
// weight and decode (with ggml's dequantization) to values that are uniform
// within each 16- or 32-weight sub-block, mean about 0 and standard
// deviation about weightStd, with sub-block scales that vary as in real
// files.

// Q4_K draw: sub-block scales sc uniform in [32, 63], quants q uniform in
// [0, 15], value d·sc·q − dmin·m with dmin = 8d and m = round(sc·15/16), so
// each sub-block is centred on 0 (d·sc·7.5 ≈ 8d·m). Variance d²·E[sc²]·E[(q−7.5)²]
// = d²·2341.5·21.25.
var (
	q4kD     = float32(weightStd / math.Sqrt(2341.5*21.25))
	q4kDBits = tensor.FP32ToFP16(q4kD)
	q4kMBits = tensor.FP32ToFP16(8 * q4kD)
)

// Q6_K draw: sub-block scales ±[8, 15] with a random sign, quants q uniform
// in [−32, 31], value d·sc·q. Variance d²·E[sc²]·E[q²] = d²·137.5·341.5.
var q6kDBits = tensor.FP32ToFP16(float32(weightStd / math.Sqrt(137.5*341.5)))

// Block byte sizes (ggml-common.h).
const (
	q4kBlockBytes = 2 + 2 + 12 + 128
	q6kBlockBytes = 128 + 64 + 16 + 2
)

// directBlocks reports whether weights of type t are drawn as blocks.
func directBlocks(t tensor.Type) bool { return t == tensor.Q4_K || t == tensor.Q6_K }

// fillBlocks writes random blocks of type t (Q4_K or Q6_K) into dst, whose
// length is a whole number of blocks.
func fillBlocks(t tensor.Type, dst []byte, p *rand.PCG) {
	if t == tensor.Q4_K {
		for b := 0; b+q4kBlockBytes <= len(dst); b += q4kBlockBytes {
			fillQ4K(dst[b:b+q4kBlockBytes], p)
		}
		return
	}
	for b := 0; b+q6kBlockBytes <= len(dst); b += q6kBlockBytes {
		fillQ6K(dst[b:b+q6kBlockBytes], p)
	}
}

// fillQ4K writes one Q4_K block: f16 d, f16 dmin, 12 packed scale bytes,
// 128 bytes of 4-bit quants.
func fillQ4K(blk []byte, p *rand.PCG) {
	binary.LittleEndian.PutUint16(blk[0:], q4kDBits)
	binary.LittleEndian.PutUint16(blk[2:], q4kMBits)
	var sc, m [8]uint8
	bits := p.Uint64()
	for j := range sc {
		sc[j] = 32 + uint8(bits>>(5*j))&31
		m[j] = uint8((int(sc[j])*15 + 8) / 16)
	}
	// Packing read back by ggml's get_scale_min_k4 (tensor.ScaleMinK4).
	s := blk[4:16]
	for j := range 4 {
		s[j] = sc[j]&63 | (sc[j+4]>>4)<<6
		s[j+4] = m[j]&63 | (m[j+4]>>4)<<6
		s[j+8] = sc[j+4]&0xF | (m[j+4]&0xF)<<4
	}
	randomBytes(blk[16:], p)
}

// fillQ6K writes one Q6_K block: 128 bytes of low quant bits, 64 of high
// bits, 16 signed scales, f16 d (last).
func fillQ6K(blk []byte, p *rand.PCG) {
	randomBytes(blk[:192], p)
	bits := p.Uint64()
	for j := range 16 {
		v := int8(8 + bits>>(4*j)&7)
		if bits>>(4*j+3)&1 != 0 {
			v = -v
		}
		blk[192+j] = byte(v)
	}
	binary.LittleEndian.PutUint16(blk[208:], q6kDBits)
}

// randomBytes fills b (a multiple of 8 bytes long) from p.
func randomBytes(b []byte, p *rand.PCG) {
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], p.Uint64())
	}
}
