package kernels

import (
	"encoding/binary"
	"math"
	"unsafe"
)

// quantQ8_0AVX2 quantizes nb blocks of 32 floats at src into nb Q8_0
// blocks at dst, exactly as quantizeQ8_0.
//
//go:noescape
func quantQ8_0AVX2(src *float32, dst *byte, nb int)

// quantQ8_KAVX2 writes the quants and bsums of nb Q8_K super-blocks from
// the floats at src and each block's iscale (quantizeQ8_K's rule); the
// caller stores each block's d.
//
//go:noescape
func quantQ8_KAVX2(src *float32, dst *byte, nb int, iscale *float32)

// maxMinAVX2 returns the largest and smallest of 0 and the nb·32 floats at
// src, skipping NaNs.
//
//go:noescape
func maxMinAVX2(src *float32, nb int) (mx, mn float32)

// quantizeQ8_0AVX2 is quantizeQ8_0 in AVX2 assembly.
func quantizeQ8_0AVX2(src []float32, dst []byte) {
	nb := len(src) / qk
	if nb == 0 {
		return
	}
	_ = dst[nb*sizeQ8_0-1]
	quantQ8_0AVX2(unsafe.SliceData(src), unsafe.SliceData(dst), nb)
}

// q8kBlocksPerCall bounds the iscale buffer quantizeQ8_KAVX2 keeps on its
// stack; longer rows take several calls.
const q8kBlocksPerCall = 64

// quantizeQ8_KAVX2 is quantizeQ8_K with the scan for each super-block's
// signed maximum and the quantization loop in AVX2 assembly. When a block's
// largest magnitude appears with both signs, the reference takes the first
// occurrence, so that block's sign is found by a scalar scan.
func quantizeQ8_KAVX2(src []float32, dst []byte) {
	nb := len(src) / qkk
	if nb == 0 {
		return
	}
	_ = dst[nb*sizeQ8_K-1]
	var iscale [q8kBlocksPerCall]float32
	for b0 := 0; b0 < nb; b0 += q8kBlocksPerCall {
		n := min(q8kBlocksPerCall, nb-b0)
		for i := range n {
			b := b0 + i
			x := src[b*qkk : (b+1)*qkk]
			mx, mn := maxMinAVX2(unsafe.SliceData(x), qkk/qk)
			var m float32
			switch {
			case mx > -mn:
				m = mx
			case -mn > mx:
				m = mn
			case mx != 0: // |max| == |min|: the first of the two wins
				for _, v := range x {
					if v == mx || v == mn {
						m = v
						break
					}
				}
			}
			if m == 0 {
				iscale[i] = 0
				binary.LittleEndian.PutUint32(dst[b*sizeQ8_K:], 0)
				continue
			}
			iscale[i] = -127 / m
			binary.LittleEndian.PutUint32(dst[b*sizeQ8_K:], math.Float32bits(1/iscale[i]))
		}
		quantQ8_KAVX2(unsafe.SliceData(src[b0*qkk:]), unsafe.SliceData(dst[b0*sizeQ8_K:]), n, &iscale[0])
	}
}
