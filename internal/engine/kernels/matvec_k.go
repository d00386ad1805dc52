package kernels

import (
	"encoding/binary"

	"tandem/internal/engine/tensor"
)

// matvecQ4KRef is the many-row Q4_K kernel in plain Go, the reference the
// assembly is tested against: it takes the same arguments (the Q8_K
// activation row a as QuantizeActivation makes it, no layout of its own)
// and sums the super-blocks in float64, so it agrees with the assembly to
// float32 rounding, not bit for bit.
func matvecQ4KRef(w []byte, wrb, nrows int, a []byte, nb int, y []float32) {
	matvecK4Ref(w, wrb, nrows, a, nb, y, sizeQ4_K, func(x []byte, c, l int) (lo, hi int32) {
		q := x[16+32*c+l]
		return int32(q & 0xF), int32(q >> 4)
	})
}

// matvecQ5KRef is matvecQ4KRef for Q5_K rows.
func matvecQ5KRef(w []byte, wrb, nrows int, a []byte, nb int, y []float32) {
	matvecK4Ref(w, wrb, nrows, a, nb, y, sizeQ5_K, func(x []byte, c, l int) (lo, hi int32) {
		q, h := x[48+32*c+l], x[16+l]>>(2*c)
		return int32(q&0xF) | int32(h&1)<<4, int32(q>>4) | int32(h&2)<<3
	})
}

// matvecK4Ref is the reference of the Q4_K and Q5_K kernels: quant(x, c,
// l) returns element l of sub-blocks 2c and 2c+1 of super-block x.
func matvecK4Ref(w []byte, wrb, nrows int, a []byte, nb int, y []float32, size int,
	quant func(x []byte, c, l int) (lo, hi int32)) {
	for r := range nrows {
		var sum float64
		for b := range nb {
			x := w[r*wrb+b*size : r*wrb+(b+1)*size]
			blk := a[b*sizeQ8_K : (b+1)*sizeQ8_K]
			sc, m := scalesK4(x[4:16])
			var sumi, mins int32
			for c := range 4 {
				alo, ahi := blk[4+64*c:4+64*c+32], blk[4+64*c+32:4+64*c+64]
				var slo, shi int32
				for l := range 32 {
					lo, hi := quant(x, c, l)
					slo += lo * int32(int8(alo[l]))
					shi += hi * int32(int8(ahi[l]))
				}
				sumi += int32(sc[2*c])*slo + int32(sc[2*c+1])*shi
			}
			for j := range 16 {
				mins += int32(m[j/2]) * int32(int16(binary.LittleEndian.Uint16(blk[4+qkk+2*j:])))
			}
			da := float64(f32At(blk))
			d, dmin := float64(half(x)), float64(half(x[2:]))
			sum += da * (d*float64(sumi) - dmin*float64(mins))
		}
		y[r] = float32(sum)
	}
}

// matvecQ6KRef is matvecQ4KRef for Q6_K rows.
func matvecQ6KRef(w []byte, wrb, nrows int, a []byte, nb int, y []float32) {
	for r := range nrows {
		var sum float64
		for b := range nb {
			x := w[r*wrb+b*sizeQ6_K : r*wrb+(b+1)*sizeQ6_K]
			blk := a[b*sizeQ8_K : (b+1)*sizeQ8_K]
			var sumi int32
			for s := range 8 { // 32-element sub-block s: quarter s%4 of half s/4
				h, g := s/4, s%4
				ql, qh := x[64*h+32*(g%2):], x[128+32*h:]
				q8 := blk[4+32*s : 4+32*s+32]
				for l := range 32 {
					q := int32(ql[l]>>(4*(g/2))&0xF|(qh[l]>>(2*g)&3)<<4) - 32
					sumi += int32(int8(x[192+2*s+l/16])) * q * int32(int8(q8[l]))
				}
			}
			sum += float64(f32At(blk)) * float64(tensor.FP16ToFP32(binary.LittleEndian.Uint16(x[208:]))) * float64(sumi)
		}
		y[r] = float32(sum)
	}
}
