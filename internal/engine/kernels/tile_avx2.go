package kernels

import (
	"encoding/binary"
	"math"

	"tandem/internal/engine/tensor"
)

// prepareTile8Signed is prepareTile8 with the activation quants left
// signed (not offset by 128): the layout of the AVX2 Q8_0 eight-token tile,
// whose sign trick needs them signed.
func prepareTile8Signed(a []byte, arb, nb int, dst []byte) {
	for p := 0; p < nb/2; p++ {
		for t := 0; t < 8; t++ {
			rec := dst[p*prep8PairBytes+128*t : p*prep8PairBytes+128*(t+1)]
			for h := 0; h < 2; h++ {
				blk := a[t*arb+(2*p+h)*sizeQ8_0 : t*arb+(2*p+h+1)*sizeQ8_0]
				copy(rec[32*h:32*h+32], blk[2:sizeQ8_0])
				d := math.Float32bits(half(blk))
				for j := 0; j < 8; j++ {
					binary.LittleEndian.PutUint32(rec[64+32*h+4*j:], d)
				}
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
