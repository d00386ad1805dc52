package tensor

// Q2_K and Q3_K: the 2- and 3-bit K-quants (ggml's block_q2_K and
// block_q3_K), in both directions. Their quants are stored in the same
// order: per 128-element half h, byte l (0..31) of its 32 qs bytes holds in
// bits 2j..2j+1 the low two bits of element 128h + 32j + l. The scales
// cover 16 elements each.

// Byte offsets within the blocks.
const (
	blockQ2_K = QKK/16 + QKK/4 + 4     // u8 scales[16]; u8 qs[64]; f16 d, dmin
	blockQ3_K = QKK/8 + QKK/4 + 12 + 2 // u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d

	offQ2_KQs   = QKK / 16
	offQ2_KD    = QKK/16 + QKK/4
	offQ3_KQs   = QKK / 8
	offQ3_KScal = QKK/8 + QKK/4
	offQ3_KD    = QKK/8 + QKK/4 + 12
)

// ScalesQ3_K unpacks the 16 6-bit scales of a Q3_K block from its 12 packed
// bytes s, each minus 32 (so in [-32, 31]), in ggml's order: scale j has its
// low four bits in the low (j < 8) or high (j >= 8) nibble of s[j%8] and
// its high two bits in bits 2(j/4)..2(j/4)+1 of s[8+j%4].
func ScalesQ3_K(s []byte) (sc [16]int8) {
	s = s[:12:12]
	for j := range 16 {
		lo := s[j%8] & 0xF
		if j >= 8 {
			lo = s[j%8] >> 4
		}
		hi := (s[8+j%4] >> (2 * (j / 4))) & 3
		sc[j] = int8(lo|hi<<4) - 32
	}
	return sc
}

// dequantizeQ2_K is dequantize_row_q2_K: element value d·sc·q − dmin·m,
// with ggml's products dl = d·sc and ml = dmin·m formed first.
func dequantizeQ2_K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QKK; i++ {
		b := src[i*blockQ2_K : (i+1)*blockQ2_K]
		y := dst[i*QKK : (i+1)*QKK]
		d, dmin := halfAt(b[offQ2_KD:]), halfAt(b[offQ2_KD+2:])
		for h := range 2 {
			q := b[offQ2_KQs+32*h : offQ2_KQs+32*h+32]
			for j := range 4 {
				shift := uint(2 * j)
				for k := range 2 { // the two 16-element sub-blocks of this shift
					sc := b[8*h+2*j+k]
					dl, ml := d*float32(sc&0xF), dmin*float32(sc>>4)
					out := y[128*h+32*j+16*k : 128*h+32*j+16*k+16]
					for l, v := range q[16*k : 16*k+16] {
						out[l] = float32(dl*float32(v>>shift&3)) - ml
					}
				}
			}
		}
	}
}

// dequantizeQ3_K is dequantize_row_q3_K: element value d·(sc−32)·(q − 4·(1
// − hbit)), q the low two bits and hbit the element's bit in hmask (bit
// 32-element-group of byte element%32).
func dequantizeQ3_K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QKK; i++ {
		b := src[i*blockQ3_K : (i+1)*blockQ3_K]
		y := dst[i*QKK : (i+1)*QKK]
		d := halfAt(b[offQ3_KD:])
		sc := ScalesQ3_K(b[offQ3_KScal : offQ3_KScal+12])
		hm := b[:32]
		for h := range 2 {
			q := b[offQ3_KQs+32*h : offQ3_KQs+32*h+32]
			for j := range 4 {
				shift, bit := uint(2*j), byte(1)<<(4*h+j)
				for k := range 2 {
					dl := d * float32(sc[8*h+2*j+k])
					out := y[128*h+32*j+16*k : 128*h+32*j+16*k+16]
					for l := range 16 {
						v := int32(q[16*k+l] >> shift & 3)
						if hm[16*k+l]&bit == 0 {
							v -= 4
						}
						out[l] = dl * float32(v)
					}
				}
			}
		}
	}
}

// packLow2 stores the 2-bit values L (0..3, 256 of them) into the 64 qs
// bytes of a Q2_K or Q3_K block.
func packLow2(qs []byte, L *[QKK]uint8) {
	qs = qs[:QKK/4]
	for h := range 2 {
		for l := range 32 {
			j := 128*h + l
			qs[32*h+l] = L[j] | L[j+32]<<2 | L[j+64]<<4 | L[j+96]<<6
		}
	}
}

// quantizeQ2_K is quantize_row_q2_K_ref: per 16 elements an asymmetric
// 2-bit fit by make_qkx2_quants (weights |x|, absolute error), the 16
// scales and 16 mins stored as 4-bit multiples of d = max scale/15 and
// dmin = max min/15, and the values requantized with the stored scales.
func quantizeQ2_K(src []float32, dst []byte) error {
	var L [QKK]uint8
	var laux [16]uint8
	var weights [16]float32
	var mins, scales [QKK / 16]float32
	for i := 0; i < len(src)/QKK; i++ {
		x := src[i*QKK : (i+1)*QKK]
		b := dst[i*blockQ2_K : (i+1)*blockQ2_K]
		if err := checkFinite(x, i*QKK); err != nil {
			return err
		}
		var maxScale, maxMin float32
		for j := range scales {
			xs := x[16*j : 16*j+16]
			for l, v := range xs {
				weights[l] = abs32(v)
			}
			scales[j], mins[j] = makeQKX2Quants(3, xs, weights[:], L[16*j:16*j+16], laux[:], -0.5, 0.1, 15, true)
			if scales[j] > maxScale {
				maxScale = scales[j]
			}
			if mins[j] > maxMin {
				maxMin = mins[j]
			}
		}
		sc := b[:QKK/16]
		clear(sc)
		var d, dmin float32
		if maxScale > 0 {
			iscale := 15 / maxScale
			for j := range scales {
				sc[j] = uint8(nearestInt(iscale * scales[j]))
			}
			d = maxScale / 15
		}
		if maxMin > 0 {
			iscale := 15 / maxMin
			for j := range mins {
				sc[j] |= uint8(nearestInt(iscale*mins[j]) << 4)
			}
			dmin = maxMin / 15
		}
		if err := putScale(b[offQ2_KD:], d, "scale", i*QKK, QKK); err != nil {
			return err
		}
		if err := putScale(b[offQ2_KD+2:], dmin, "minimum scale", i*QKK, QKK); err != nil {
			return err
		}
		dh, mh := halfAt(b[offQ2_KD:]), halfAt(b[offQ2_KD+2:])
		for j := range scales {
			dj := dh * float32(sc[j]&0xF)
			if dj == 0 {
				continue
			}
			dm := mh * float32(sc[j]>>4)
			for ii, v := range x[16*j : 16*j+16] {
				L[16*j+ii] = uint8(clampInt32(nearestInt((v+dm)/dj), 0, 3))
			}
		}
		packLow2(b[offQ2_KQs:offQ2_KD], &L)
	}
	return nil
}

// makeQ3Quants is ggml's make_q3_quants with do_rmse (nmax 4): a symmetric
// fit x ≈ scale·l, l in [−nmax, nmax−1], weights x², started from the
// scale that maps the largest magnitude to −nmax and improved by up to five
// rounds of moving single quants while that lowers the weighted error. It
// leaves l+nmax in L and returns the scale.
func makeQ3Quants(nmax int32, x []float32, L []uint8) float32 {
	L = L[:len(x)]
	var amax, vmax float32
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, vmax = a, v
		}
	}
	if amax < groupMaxEps {
		clear(L)
		return 0
	}
	var l8 [16]int32
	ls := l8[:len(x)]
	iscale := -float32(nmax) / vmax
	var sumlx, suml2 float32
	for i, v := range x {
		l := clampInt32(nearestInt(iscale*v), -nmax, nmax-1)
		ls[i] = l
		w := v * v
		sumlx += float32(float32(w*v) * float32(l))
		suml2 += float32(float32(w*float32(l)) * float32(l))
	}
	for range 5 {
		changed := false
		for i, v := range x {
			w := v * v
			slx := sumlx - float32(float32(w*v)*float32(ls[i]))
			if !(slx > 0) {
				continue
			}
			sl2 := suml2 - float32(float32(w*float32(ls[i]))*float32(ls[i]))
			nl := clampInt32(nearestInt(float32(v*sl2)/slx), -nmax, nmax-1)
			if nl == ls[i] {
				continue
			}
			slx += float32(float32(w*v) * float32(nl))
			sl2 += float32(float32(w*float32(nl)) * float32(nl))
			if sl2 > 0 && float32(float32(slx*slx)*suml2) > float32(float32(sumlx*sumlx)*sl2) {
				ls[i], sumlx, suml2 = nl, slx, sl2
				changed = true
			}
		}
		if !changed {
			break
		}
	}
	for i, l := range ls {
		L[i] = uint8(l + nmax)
	}
	if suml2 > 0 {
		return sumlx / suml2
	}
	return 0
}

// quantizeQ3_K is quantize_row_q3_K_ref: per 16 elements a symmetric 3-bit
// fit (makeQ3Quants), the 16 scales stored as 6-bit signed multiples of
// d = −max/32 (max the scale of largest magnitude), the values requantized
// with the stored scales into two low bits (qs) and a high bit (hmask).
func quantizeQ3_K(src []float32, dst []byte) error {
	var L [QKK]uint8
	var scales [QKK / 16]float32
	for i := 0; i < len(src)/QKK; i++ {
		x := src[i*QKK : (i+1)*QKK]
		b := dst[i*blockQ3_K : (i+1)*blockQ3_K]
		if err := checkFinite(x, i*QKK); err != nil {
			return err
		}
		var maxScale, amax float32
		for j := range scales {
			scales[j] = makeQ3Quants(4, x[16*j:16*j+16], L[16*j:16*j+16])
			if a := abs32(scales[j]); a > amax {
				amax, maxScale = a, scales[j]
			}
		}
		s := b[offQ3_KScal : offQ3_KScal+12]
		clear(s)
		var d float32
		if maxScale != 0 {
			iscale := -32 / maxScale
			for j := range scales {
				// ggml keeps nearest_int's result in an int8_t.
				l := int32(int8(nearestInt(iscale * scales[j])))
				l = clampInt32(l, -32, 31) + 32
				if j < 8 {
					s[j] = byte(l & 0xF)
				} else {
					s[j-8] |= byte(l&0xF) << 4
				}
				s[8+j%4] |= byte(l>>4) << (2 * (j / 4))
			}
			d = 1 / iscale
		}
		if err := putScale(b[offQ3_KD:], d, "scale", i*QKK, QKK); err != nil {
			return err
		}
		dh := halfAt(b[offQ3_KD:])
		sc := ScalesQ3_K(s)
		for j := range scales {
			dj := dh * float32(sc[j])
			if dj == 0 {
				continue
			}
			for ii, v := range x[16*j : 16*j+16] {
				L[16*j+ii] = uint8(clampInt32(nearestInt(v/dj), -4, 3) + 4)
			}
		}
		hm := b[:QKK/8]
		clear(hm)
		for j := range L {
			if L[j] > 3 {
				hm[j%32] |= 1 << (j / 32)
				L[j] -= 4
			}
		}
		packLow2(b[offQ3_KQs:offQ3_KScal], &L)
	}
	return nil
}
