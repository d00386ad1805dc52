package kernels

import (
	"encoding/binary"
	"math"

	"tandem/internal/engine/tensor"
)

// Prepared Q8_K activation of the many-row K-quant matrix-vector kernels,
// one record per super-block: its eight 32-quant sub-blocks, each twice
// (at 64·s and 64·s + 32); the scale d_a as 16 float32 (at matvecKDa);
// the 16 int16 bsums twice (at matvecKBsums). Each loads as one 64-byte
// vector that meets two weight rows at once, one in each half.
const (
	matvecKDa    = 8 * 64
	matvecKBsums = matvecKDa + 64
	matvecKBytes = matvecKBsums + 64
)

// matvecKPrepBytes is the prepared size of an activation row of nb Q8_K
// super-blocks.
func matvecKPrepBytes(nb int) int { return nb * matvecKBytes }

// prepareMatvecK lays out the Q8_K activation row a (nb super-blocks, as
// QuantizeActivation makes it) for the many-row K-quant kernels (see
// matvecKBytes).
func prepareMatvecK(a []byte, nb int, dst []byte) {
	_ = a[nb*sizeQ8_K-1]
	dst = dst[:matvecKPrepBytes(nb)]
	for b := range nb {
		blk := a[b*sizeQ8_K : (b+1)*sizeQ8_K]
		rec := dst[b*matvecKBytes : (b+1)*matvecKBytes]
		for s := range qkk / 32 {
			q := blk[4+32*s : 4+32*s+32]
			copy(rec[64*s:64*s+32], q)
			copy(rec[64*s+32:64*s+64], q)
		}
		d := binary.LittleEndian.Uint32(blk)
		for j := range 16 {
			binary.LittleEndian.PutUint32(rec[matvecKDa+4*j:], d)
		}
		copy(rec[matvecKBsums:matvecKBsums+32], blk[4+qkk:sizeQ8_K])
		copy(rec[matvecKBsums+32:matvecKBsums+64], blk[4+qkk:sizeQ8_K])
	}
}

// matvecKHalf returns the register half (0 low, 1 high) in which the
// kernel dots row r of a call of nrows rows: the first half of the rows
// go in the low half, paired with the second half in the high half; a
// last odd row goes in both and is stored from the low one.
func matvecKHalf(r, nrows int) int {
	if h := nrows / 2; r >= h && r < 2*h {
		return 1
	}
	return 0
}

// matvecKQuants returns the 32 activation quants of sub-block s of the
// prepared record rec, the copy that register half h reads.
func matvecKQuants(rec []byte, s, h int) []byte {
	return rec[64*s+32*h : 64*s+32*h+32]
}

// matvecKDaBsums returns the activation scale and the 16 bsums of the
// prepared record rec, as register half h reads them.
func matvecKDaBsums(rec []byte, h int) (float32, [16]int32) {
	da := math.Float32frombits(binary.LittleEndian.Uint32(rec[matvecKDa+32*h:]))
	var bs [16]int32
	for j := range bs {
		bs[j] = int32(int16(binary.LittleEndian.Uint16(rec[matvecKBsums+32*h+2*j:])))
	}
	return da, bs
}

// matvecQ4KRef is the many-row Q4_K kernel in plain Go, the reference the
// assembly is tested against: it reads the same prepared layout and sums
// the super-blocks in float64, so it agrees with the assembly to float32
// rounding, not bit for bit.
func matvecQ4KRef(w []byte, wrb, nrows int, prep []byte, nb int, y []float32) {
	matvecK4Ref(w, wrb, nrows, prep, nb, y, sizeQ4_K, func(x []byte, c, l int) (lo, hi int32) {
		q := x[16+32*c+l]
		return int32(q & 0xF), int32(q >> 4)
	})
}

// matvecQ5KRef is matvecQ4KRef for Q5_K rows.
func matvecQ5KRef(w []byte, wrb, nrows int, prep []byte, nb int, y []float32) {
	matvecK4Ref(w, wrb, nrows, prep, nb, y, sizeQ5_K, func(x []byte, c, l int) (lo, hi int32) {
		q, h := x[48+32*c+l], x[16+l]>>(2*c)
		return int32(q&0xF) | int32(h&1)<<4, int32(q>>4) | int32(h&2)<<3
	})
}

// matvecK4Ref is the reference of the Q4_K and Q5_K kernels: quant(x, c,
// l) returns element l of sub-blocks 2c and 2c+1 of super-block x.
func matvecK4Ref(w []byte, wrb, nrows int, prep []byte, nb int, y []float32, size int,
	quant func(x []byte, c, l int) (lo, hi int32)) {
	for r := range nrows {
		h := matvecKHalf(r, nrows)
		var sum float64
		for b := range nb {
			x := w[r*wrb+b*size : r*wrb+(b+1)*size]
			rec := prep[b*matvecKBytes : (b+1)*matvecKBytes]
			sc, m := scalesK4(x[4:16])
			var sumi, mins int32
			for c := range 4 {
				alo, ahi := matvecKQuants(rec, 2*c, h), matvecKQuants(rec, 2*c+1, h)
				var slo, shi int32
				for l := range 32 {
					lo, hi := quant(x, c, l)
					slo += lo * int32(int8(alo[l]))
					shi += hi * int32(int8(ahi[l]))
				}
				sumi += int32(sc[2*c])*slo + int32(sc[2*c+1])*shi
			}
			da, bs := matvecKDaBsums(rec, h)
			for j := range 8 {
				mins += int32(m[j]) * (bs[2*j] + bs[2*j+1])
			}
			d, dmin := float64(half(x)), float64(half(x[2:]))
			sum += float64(da) * (d*float64(sumi) - dmin*float64(mins))
		}
		y[r] = float32(sum)
	}
}

// matvecQ6KRef is matvecQ4KRef for Q6_K rows.
func matvecQ6KRef(w []byte, wrb, nrows int, prep []byte, nb int, y []float32) {
	for r := range nrows {
		hr := matvecKHalf(r, nrows)
		var sum float64
		for b := range nb {
			x := w[r*wrb+b*sizeQ6_K : r*wrb+(b+1)*sizeQ6_K]
			rec := prep[b*matvecKBytes : (b+1)*matvecKBytes]
			var sumi int32
			for s := range 8 { // 32-element sub-block s: quarter s%4 of half s/4
				h, g := s/4, s%4
				ql, qh := x[64*h+32*(g%2):], x[128+32*h:]
				a := matvecKQuants(rec, s, hr)
				for l := range 32 {
					q := int32(ql[l]>>(4*(g/2))&0xF|(qh[l]>>(2*g)&3)<<4) - 32
					sumi += int32(int8(x[192+2*s+l/16])) * q * int32(int8(a[l]))
				}
			}
			da, _ := matvecKDaBsums(rec, hr)
			sum += float64(da) * float64(tensor.FP16ToFP32(binary.LittleEndian.Uint16(x[208:]))) * float64(sumi)
		}
		y[r] = float32(sum)
	}
}
