package kernels

import (
	"encoding/binary"
	"math"

	"tandem/internal/engine/tensor"
)

// prepQ8Half is the bytes of one block's record in the AVX2 Q8_0 eight-token
// tile, per half (four tokens): their 32 activation quants, then their
// four float32 scales.
const prepQ8Half = 4*32 + 4*4

// prepareTile8Signed writes the AVX2 Q8_0 eight-token tile data of the
// eight Q8_0 activation rows a (row stride arb, nb blocks each, nb even)
// into dst (at most prep8Bytes(Q8_0, nb) bytes): for tokens 0-3, then
// tokens 4-7, one prepQ8Half record per block, the quants left signed
// (the sign trick needs them so).
func prepareTile8Signed(a []byte, arb, nb int, dst []byte) {
	for h := 0; h < 2; h++ {
		for b := 0; b < nb; b++ {
			rec := dst[(h*nb+b)*prepQ8Half : (h*nb+b+1)*prepQ8Half]
			for j := 0; j < 4; j++ {
				blk := a[(4*h+j)*arb+b*sizeQ8_0 : (4*h+j)*arb+(b+1)*sizeQ8_0]
				copy(rec[32*j:32*j+32], blk[2:sizeQ8_0])
				binary.LittleEndian.PutUint32(rec[128+4*j:], math.Float32bits(half(blk)))
			}
		}
	}
}

// prepareTile8At writes the eight-token tile data of the eight activation
// rows a as prepareTile8For does, for a level whose Q8_0 tile reads signed
// quants (kernelSet.signedQ8Tile8) when signedQ8 is set.
func prepareTile8At(signedQ8 bool, vt tensor.Type, a []byte, arb, nb int, dst []byte) {
	if signedQ8 && vt == tensor.Q8_0 {
		prepareTile8Signed(a, arb, nb, dst)
		return
	}
	prepareTile8For(vt, a, arb, nb, dst)
}
