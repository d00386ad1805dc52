package kernels

import (
	"encoding/binary"
	"math"

	"tandem/internal/engine/tensor"
)

// A packed Q8_0 panel (run by MatMulQ8Panels and MatVecs, q8panels.go): "lane =
// output". Sixteen Q8_0 weight rows are repacked so that one 512-bit
// register holds the same four bytes of one block of each of the 16 rows,
// row r in dword lane r. One VPDPBUSD of such a register against four
// activation bytes broadcast to every lane then adds four products to each
// of 16 outputs, and eight of them give, in lane r, the exact int32 dot of
// row r's block with the token's block: the float work (conversion, scale,
// accumulation) is done once per block for 16 rows, not once per lane of
// partial sums as in the row kernels.
//
// Panel layout, q8PanelBlockBytes per block b, blocks in order:
//
//	bytes 64j .. 64j+63 (j = 0..7): quants 4j..4j+3 of block b of rows
//	    0..15, row r at 64j+4r, each byte XOR 0x80 (w+128 as an unsigned
//	    byte, VPDPBUSD's unsigned operand)
//	bytes 512 .. 543: the 16 rows' f16 block scales, row r at 512+2r
//
// Rows past nrows are zero quants (0x80 bytes) and zero scales. The scales
// stay f16, as in the file, so a panel is exactly as large as its 16 rows
// (34 bytes per row and block): a matrix-vector product streaming packed
// panels from memory reads no more bytes than one streaming the rows.
// f16 to f32 conversion is exact, so this changes no result.
const (
	// q8PanelRows is the rows of one panel (the float32 lanes of a zmm).
	q8PanelRows = 16
	// q8PanelBlockBytes is a panel's bytes per block.
	q8PanelBlockBytes = 8*64 + 2*q8PanelRows
	// q8ActTokBytes is the prepared activation bytes per token and block.
	q8ActTokBytes = 32 + 4 + 4
	// q8PanelMaxTok is the most tokens one kernel call takes.
	q8PanelMaxTok = 8
)

// q8PanelBytes returns the bytes of a panel of nb blocks.
func q8PanelBytes(nb int) int { return nb * q8PanelBlockBytes }

// q8ActBytes returns the bytes of ntok tokens' prepared activation of nb
// blocks (see prepareQ8PanelAct).
func q8ActBytes(nb, ntok int) int { return nb * ntok * q8ActTokBytes }

// packQ8_0Panel packs nrows (1..16) Q8_0 rows of nb blocks, row r at
// w[r·wrb:], into dst (q8PanelBytes(nb) bytes) in the panel layout above;
// rows nrows..15 are padded with zero quants and zero scales.
func packQ8_0Panel(w []byte, wrb, nrows, nb int, dst []byte) {
	dst = dst[:q8PanelBytes(nb)]
	_ = w[(nrows-1)*wrb+nb*sizeQ8_0-1]
	for b := range nb {
		out := dst[b*q8PanelBlockBytes : (b+1)*q8PanelBlockBytes]
		for r := range q8PanelRows {
			if r >= nrows {
				for j := range 8 {
					binary.LittleEndian.PutUint32(out[64*j+4*r:], 0x80808080)
				}
				binary.LittleEndian.PutUint16(out[512+2*r:], 0)
				continue
			}
			blk := w[r*wrb+b*sizeQ8_0 : r*wrb+(b+1)*sizeQ8_0]
			out[512+2*r], out[513+2*r] = blk[0], blk[1]
			for j := range 8 {
				v := binary.LittleEndian.Uint32(blk[2+4*j:])
				binary.LittleEndian.PutUint32(out[64*j+4*r:], v^0x80808080)
			}
		}
	}
}

// unpackQ8_0Panel is packQ8_0Panel's inverse for the first nrows rows
// (tests check the round trip): row r goes to w[r·wrb:].
func unpackQ8_0Panel(panel []byte, nb, nrows int, w []byte, wrb int) {
	for b := range nb {
		in := panel[b*q8PanelBlockBytes : (b+1)*q8PanelBlockBytes]
		for r := range nrows {
			blk := w[r*wrb+b*sizeQ8_0 : r*wrb+(b+1)*sizeQ8_0]
			blk[0], blk[1] = in[512+2*r], in[513+2*r]
			for j := range 8 {
				v := binary.LittleEndian.Uint32(in[64*j+4*r:])
				binary.LittleEndian.PutUint32(blk[2+4*j:], v^0x80808080)
			}
		}
	}
}

// prepareQ8PanelAct lays out ntok (1..8) Q8_0 activation rows of nb blocks
// (token t at act[t·arb:], as QuantizeActivation makes them) for the panel
// kernel: one record of ntok·q8ActTokBytes bytes per block, blocks in
// order, every field read by a broadcast:
//
//	bytes 32t .. 32t+31: token t's 32 quants of the block
//	bytes 32·ntok+4t: token t's block scale as float32
//	bytes 36·ntok+4t: token t's correction -128·Σ quants, int32 (the
//	    panel's weights are w+128; this takes the offset back out)
func prepareQ8PanelAct(act []byte, arb, ntok, nb int, dst []byte) {
	dst = dst[:q8ActBytes(nb, ntok)]
	_ = act[(ntok-1)*arb+nb*sizeQ8_0-1]
	rec := ntok * q8ActTokBytes
	for b := range nb {
		out := dst[b*rec : (b+1)*rec]
		for t := range ntok {
			blk := (*[sizeQ8_0]byte)(act[t*arb+b*sizeQ8_0:])
			q := (*[32]byte)(out[32*t:])
			// Σ int8(q) = Σ (q XOR 0x80 as unsigned) - 32·128, the unsigned
			// bytes summed in 16-bit lanes (at most 4·2·255 per lane).
			var lanes uint64
			for k := 0; k < 32; k += 8 {
				v := binary.LittleEndian.Uint64(blk[2+k:])
				binary.LittleEndian.PutUint64(q[k:], v)
				v ^= 0x8080808080808080
				lanes += v&0x00ff00ff00ff00ff + (v>>8)&0x00ff00ff00ff00ff
			}
			s := int32((lanes*0x0001000100010001)>>48) - 32*128
			d := tensor.FP16ToFP32(binary.LittleEndian.Uint16(blk[:]))
			binary.LittleEndian.PutUint32(out[32*ntok+4*t:], math.Float32bits(d))
			binary.LittleEndian.PutUint32(out[36*ntok+4*t:], uint32(-128*s))
		}
	}
}

// q8PanelRef is the panel kernel in plain Go, reading the same layouts:
// for each of the first nrows rows r and ntok tokens t,
//
//	y[t·ystride + r] = Σ_b (in block order) float32(isum_b)·float32(dw_b·da_b)
//
// summed in float32 from 0, each product and each sum rounded on its own
// (no fused multiply-add: that is "arithmetic A", which the assembly
// reproduces bit for bit with VMULPS then VADDPS). isum_b is the exact dot
// of row r's block b with token t's: Σ (w+128)·a plus the stored -128·Σa.
// It is exact for every byte pattern: |w|, |a| <= 128 gives |isum| <= 32·
// 128·128 = 2^19 (the +128 operand is at most 255, so the partial sums
// VPDPBUSD adds, |corr| + 32·255·128 < 2^21, fit int32 too), and every
// integer below 2^24 converts to float32 exactly.
func q8PanelRef(panel []byte, nb int, act []byte, ntok, nrows int, y []float32, ystride int) {
	rec := ntok * q8ActTokBytes
	for t := range ntok {
		for r := range nrows {
			acc := float32(0)
			for b := range nb {
				pw := panel[b*q8PanelBlockBytes:]
				pa := act[b*rec:]
				isum := int32(binary.LittleEndian.Uint32(pa[36*ntok+4*t:]))
				for j := range 8 {
					for k := range 4 {
						isum += int32(pw[64*j+4*r+k]) * int32(int8(pa[32*t+4*j+k]))
					}
				}
				dw := tensor.FP16ToFP32(binary.LittleEndian.Uint16(pw[512+2*r:]))
				da := math.Float32frombits(binary.LittleEndian.Uint32(pa[32*ntok+4*t:]))
				s := float32(dw * da)
				acc += float32(float32(isum) * s)
			}
			y[t*ystride+r] = acc
		}
	}
}
