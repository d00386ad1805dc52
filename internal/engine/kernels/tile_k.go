package kernels

import (
	"encoding/binary"

	"tandem/internal/engine/tensor"
)

// Eight-token Q8_K tile record, per super-block, for the token pairs p
// (tokens 2p and 2p+1): each pair's eight 32-quant sub-blocks s, token 2p's
// then token 2p+1's (at 512·p + 64·s), then the pairs' scales d_a as 8 + 8
// float32 (at prepK8Scales + 64·p), then their 16 + 16 int16 bsums (at
// prepK8Bsums + 64·p): each loads as one 64-byte vector, token 2p in the
// lower half.
const (
	prepK8Scales = 8 * qkk
	prepK8Bsums  = prepK8Scales + 4*64
	prepK8Bytes  = prepK8Bsums + 4*64
)

// prep8Bytes returns the bytes of one eight-token tile's prepared data
// for rows of nb blocks of vec dot type vt, or 0 when the eight-token
// kernels cannot take such rows.
func prep8Bytes(vt tensor.Type, nb int) int {
	switch vt {
	case tensor.Q8_0:
		if nb%2 == 0 {
			return nb / 2 * prep8PairBytes
		}
	case tensor.Q8_K:
		return nb * prepK8Bytes
	case tensor.Q8_1:
		return nb * prepQ81Bytes
	case tensor.F16:
		if nb >= 16 && nb <= maxF8F16 {
			return prepF8Bytes(nb)
		}
	case tensor.BF16:
		if nb >= 16 && nb <= maxF8BF16 {
			return prepF8Bytes(nb)
		}
	}
	return 0
}

// prepareTile8For writes the eight-token tile data of the eight activation
// rows a (row stride arb, nb blocks of vec dot type vt each) into dst
// (prep8Bytes(vt, nb) bytes).
func prepareTile8For(vt tensor.Type, a []byte, arb, nb int, dst []byte) {
	switch vt {
	case tensor.Q8_0:
		prepareTile8(a, arb, nb, dst)
	case tensor.Q8_K:
		prepareTileK8(a, arb, nb, dst)
	case tensor.Q8_1:
		prepareTileQ8_1x8(a, arb, nb, dst)
	case tensor.F16:
		prepareTileF8(a, arb, nb, dst, half)
	case tensor.BF16:
		prepareTileF8(a, arb, nb, dst, bf16)
	}
}

// prepareTileK8 writes the eight-token tile data of the eight Q8_K rows a
// (row stride arb, nb super-blocks each) into dst (nb·prepK8Bytes bytes).
func prepareTileK8(a []byte, arb, nb int, dst []byte) {
	for b := 0; b < nb; b++ {
		rec := dst[b*prepK8Bytes : (b+1)*prepK8Bytes]
		for t := 0; t < 8; t++ {
			blk := a[t*arb+b*sizeQ8_K : t*arb+(b+1)*sizeQ8_K]
			p, h := t/2, t%2
			for s := 0; s < qkk/32; s++ {
				copy(rec[512*p+64*s+32*h:512*p+64*s+32*h+32], blk[4+32*s:4+32*s+32])
			}
			d := binary.LittleEndian.Uint32(blk)
			sc := rec[prepK8Scales+64*p+32*h : prepK8Scales+64*p+32*h+32]
			for j := 0; j < 8; j++ {
				binary.LittleEndian.PutUint32(sc[4*j:], d)
			}
			copy(rec[prepK8Bsums+64*p+32*h:prepK8Bsums+64*p+32*h+32], blk[4+qkk:sizeQ8_K])
		}
	}
}
