package kernels

import (
	"encoding/binary"
	"math"
)

// Eight-token Q8_1 tile record, per block, for the token pairs p (tokens
// 2p and 2p+1): each pair's 32 + 32 quants (at 64·p), then the pairs' lane
// scales d_a as 8 + 8 float32 (at prepQ81Scales + 64·p), then the eight
// tokens' s = d_a·Σq as float32 (at prepQ81Sums), padded to whole cache
// lines. The quants and scales of a pair each load as one 64-byte vector,
// token 2p in the lower half.
const (
	prepQ81Scales = 4 * 64
	prepQ81Sums   = prepQ81Scales + 4*64
	prepQ81Bytes  = prepQ81Sums + 64
)

// prepareTileQ8_1x8 writes the eight-token tile data of the eight Q8_1
// rows a (row stride arb, nb blocks each) into dst (nb·prepQ81Bytes
// bytes).
func prepareTileQ8_1x8(a []byte, arb, nb int, dst []byte) {
	for b := 0; b < nb; b++ {
		rec := dst[b*prepQ81Bytes : (b+1)*prepQ81Bytes]
		for t := 0; t < 8; t++ {
			blk := a[t*arb+b*sizeQ8_1 : t*arb+(b+1)*sizeQ8_1]
			p, h := t/2, t%2
			copy(rec[64*p+32*h:64*p+32*h+32], blk[4:sizeQ8_1])
			d := math.Float32bits(half(blk))
			sc := rec[prepQ81Scales+64*p+32*h : prepQ81Scales+64*p+32*h+32]
			for j := 0; j < 8; j++ {
				binary.LittleEndian.PutUint32(sc[4*j:], d)
			}
			binary.LittleEndian.PutUint32(rec[prepQ81Sums+4*t:], math.Float32bits(half(blk[2:])))
		}
	}
}
