package tensor

import "math"

// The K-quant reference quantizers (ggml's quantize_row_q{4,5,6}_K_ref).
// They are searches: for each sub-block they try a range of candidate scales
// and keep the one with the smallest weighted error, then quantize the
// sub-block scales themselves to 6 or 8 bits and requantize the values with
// the scales as stored. The code follows ggml's operation order so it yields
// ggml's bytes on the test vectors; the tests hold it to ggml's error level.

// groupMaxEps is ggml's GROUP_MAX_EPS: a group whose largest magnitude is
// below it counts as all zero.
const groupMaxEps = 1e-15

// nearestInt rounds f to the nearest integer, ties to even, the way ggml's
// nearest_int does: adding 1.5·2^23 leaves the integer in the low mantissa
// bits. It is exact for |f| <= 4194303; beyond that the result is garbage
// but stays in [-2^22, 2^22), which the callers' clamps keep harmless.
//
// The conversion float32(f) keeps a caller's product f = a*b from being fused
// with the addition into one FMA once this function is inlined.
func nearestInt(f float32) int32 {
	v := float32(f) + 12582912
	return int32(math.Float32bits(v)&0x007fffff) - 0x00400000
}

// clampInt32 limits v to [lo, hi].
func clampInt32(v, lo, hi int32) int32 { return max(lo, min(hi, v)) }

// sqrt32 is sqrtf; rounding the float64 square root of a float32 to float32
// gives the correctly rounded float32 result.
func sqrt32(v float32) float32 { return float32(math.Sqrt(float64(v))) }

// makeQKX2Quants is ggml's make_qkx2_quants: it fits x ≈ scale·L − min with
// L in [0, nmax] and min >= 0, minimizing the weighted squared error (or the
// weighted absolute error when useMAD) over the nstep+1 candidate inverse
// scales (rmin + rdelta·is + nmax)/(max − min), each refined by a weighted
// least-squares solve for scale and min. L and laux must have len(x)
// elements. It returns the scale and the (non-negative) min.
func makeQKX2Quants(nmax int32, x, weights []float32, L, laux []uint8, rmin, rdelta float32, nstep int, useMAD bool) (scale, theMin float32) {
	n := len(x)
	weights, L, laux = weights[:n], L[:n], laux[:n]
	lo, hi := x[0], x[0]
	sumW := weights[0]
	sumX := sumW * x[0]
	for i := 1; i < n; i++ {
		if x[i] < lo {
			lo = x[i]
		}
		if x[i] > hi {
			hi = x[i]
		}
		w := weights[i]
		sumW += w
		sumX += float32(w * x[i])
	}
	if lo > 0 {
		lo = 0
	}
	if hi == lo {
		clear(L)
		return 0, -lo
	}
	fmax := float32(nmax)
	iscale := fmax / (hi - lo)
	scale = 1 / iscale
	var bestError float32
	for i, v := range x {
		l := clampInt32(nearestInt(iscale*(v-lo)), 0, nmax)
		L[i] = uint8(l)
		diff := float32(scale*float32(l)) + lo - v
		if useMAD {
			diff = abs32(diff)
		} else {
			diff *= diff
		}
		bestError += float32(weights[i] * diff)
	}
	if nstep < 1 {
		return scale, -lo
	}
	for is := 0; is <= nstep; is++ {
		iscale = (rmin + float32(rdelta*float32(is)) + fmax) / (hi - lo)
		var sumL, sumL2, sumXL float32
		for i, v := range x {
			l := clampInt32(nearestInt(iscale*(v-lo)), 0, nmax)
			laux[i] = uint8(l)
			wl := float32(weights[i] * float32(l))
			sumL += wl
			sumL2 += float32(wl * float32(l))
			sumXL += float32(wl * v)
		}
		det := float32(sumW*sumL2) - float32(sumL*sumL)
		if det <= 0 {
			continue
		}
		thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / det
		thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / det
		if thisMin > 0 {
			thisMin = 0
			thisScale = sumXL / sumL2
		}
		var curError float32
		for i, v := range x {
			diff := float32(thisScale*float32(laux[i])) + thisMin - v
			if useMAD {
				diff = abs32(diff)
			} else {
				diff *= diff
			}
			curError += float32(weights[i] * diff)
		}
		if curError < bestError {
			copy(L, laux)
			bestError = curError
			scale = thisScale
			lo = thisMin
		}
	}
	return scale, -lo
}

// makeQXQuants is ggml's make_qx_quants with rmse_type 1 and no importance
// weights (the form quantize_row_q6_K_ref uses): a symmetric fit
// x ≈ scale·(L − nmax) with L in [0, 2·nmax), weights x², trying the 19
// inverse scales −(nmax + 0.1·is)/max for is in −9..9. L must have len(x)
// elements. It returns the scale (negative when the largest-magnitude
// element is positive, as in ggml).
func makeQXQuants(nmax int32, x []float32, L []uint8) float32 {
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
	fmax := float32(nmax)
	iscale := -fmax / vmax
	var sumlx, suml2 float32
	for i, v := range x {
		l := clampInt32(nearestInt(iscale*v), -nmax, nmax-1)
		L[i] = uint8(l + nmax)
		w := v * v
		sumlx += float32(float32(w*v) * float32(l))
		suml2 += float32(float32(w*float32(l)) * float32(l))
	}
	var scale float32
	if suml2 != 0 {
		scale = sumlx / suml2
	}
	best := scale * sumlx
	for is := int32(-9); is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(fmax + float32(0.1*float32(is))) / vmax
		sumlx, suml2 = 0, 0
		for _, v := range x {
			l := clampInt32(nearestInt(iscale*v), -nmax, nmax-1)
			w := v * v
			sumlx += float32(float32(w*v) * float32(l))
			suml2 += float32(float32(w*float32(l)) * float32(l))
		}
		if suml2 > 0 && float32(sumlx*sumlx) > float32(best*suml2) {
			for i, v := range x {
				l := clampInt32(nearestInt(iscale*v), -nmax, nmax-1)
				L[i] = uint8(l + nmax)
			}
			scale = sumlx / suml2
			best = scale * sumlx
		}
	}
	return scale
}

// packScaleMinK4 packs eight 6-bit scales and eight 6-bit minimums into the
// 12 scale bytes s of a Q4_K or Q5_K block; ScaleMinK4 reads them back.
// Sub-blocks 0..3 keep their scale and minimum in the low 6 bits of s[j] and
// s[j+4]; sub-blocks 4..7 keep the low 4 bits of each in s[j+4] and the high
// 2 bits in the top bits of s[j-4] (scale) and s[j] (minimum).
func packScaleMinK4(s []byte, sc, m *[QKK / 32]uint8) {
	s = s[:12]
	for j := 0; j < 4; j++ {
		s[j] = sc[j]&63 | (sc[j+4]>>4)<<6
		s[j+4] = m[j]&63 | (m[j+4]>>4)<<6
		s[j+8] = sc[j+4]&0xF | (m[j+4]&0xF)<<4
	}
}

// kQuantParams are the search settings of one K-quant type with mins.
type kQuantParams struct {
	nmax   int32   // largest quant (15 for Q4_K, 31 for Q5_K)
	rmin   float32 // first candidate offset
	rdelta float32 // candidate step
	nstep  int     // candidates - 1
}

// quantizeSuperblockMins fills the 4 header bytes and 12 scale bytes of a
// Q4_K or Q5_K block (hdr, 16 bytes) for the 256 values x, and leaves the
// quants (0..nmax) of x in L. It is the shared part of
// quantize_row_q4_K_ref and quantize_row_q5_K_ref.
func quantizeSuperblockMins(x []float32, hdr []byte, L *[QKK]uint8, p kQuantParams, off int) error {
	var laux [32]uint8
	var weights [32]float32
	var mins, scales [QKK / 32]float32
	var maxScale, maxMin float32 // mins are subtracted, so both are >= 0
	for j := range scales {
		xs := x[32*j : 32*j+32]
		var sumX2 float32
		for _, v := range xs {
			sumX2 += float32(v * v)
		}
		avX := sqrt32(sumX2 / 32)
		for l, v := range xs {
			weights[l] = avX + abs32(v)
		}
		scales[j], mins[j] = makeQKX2Quants(p.nmax, xs, weights[:], L[32*j:32*j+32], laux[:], p.rmin, p.rdelta, p.nstep, false)
		if scales[j] > maxScale {
			maxScale = scales[j]
		}
		if mins[j] > maxMin {
			maxMin = mins[j]
		}
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	var ls, lm [QKK / 32]uint8
	for j := range scales {
		// ggml stores nearest_int's result in a uint8_t before clamping.
		ls[j] = min(63, uint8(nearestInt(invScale*scales[j])))
		lm[j] = min(63, uint8(nearestInt(invMin*mins[j])))
	}
	s := hdr[4:16]
	packScaleMinK4(s, &ls, &lm)
	if err := putScale(hdr, maxScale/63, "scale", off, QKK); err != nil {
		return err
	}
	if err := putScale(hdr[2:], maxMin/63, "minimum scale", off, QKK); err != nil {
		return err
	}

	// Requantize with the scales as stored.
	d, dmin := halfAt(hdr), halfAt(hdr[2:])
	for j := range scales {
		sc, m := ScaleMinK4(j, s)
		dj := d * float32(sc)
		if dj == 0 {
			continue
		}
		dm := dmin * float32(m)
		for ii, v := range x[32*j : 32*j+32] {
			L[32*j+ii] = uint8(clampInt32(nearestInt((v+dm)/dj), 0, p.nmax))
		}
	}
	return nil
}

var (
	q4KParams = kQuantParams{nmax: 15, rmin: -1, rdelta: 0.1, nstep: 20}
	q5KParams = kQuantParams{nmax: 31, rmin: -0.5, rdelta: 0.1, nstep: 15}
)

// quantizeQ4_K is quantize_row_q4_K_ref.
func quantizeQ4_K(src []float32, dst []byte) error {
	var L [QKK]uint8
	for i := 0; i < len(src)/QKK; i++ {
		x := src[i*QKK : (i+1)*QKK]
		b := dst[i*blockQ4_K : (i+1)*blockQ4_K]
		if err := checkFinite(x, i*QKK); err != nil {
			return err
		}
		if err := quantizeSuperblockMins(x, b[:16], &L, q4KParams, i*QKK); err != nil {
			return err
		}
		for c := 0; c < 4; c++ {
			q := b[16+32*c : 16+32*c+32]
			for l := range q {
				q[l] = L[64*c+l] | L[64*c+l+32]<<4
			}
		}
	}
	return nil
}

// quantizeQ5_K is quantize_row_q5_K_ref.
func quantizeQ5_K(src []float32, dst []byte) error {
	var L [QKK]uint8
	for i := 0; i < len(src)/QKK; i++ {
		x := src[i*QKK : (i+1)*QKK]
		b := dst[i*blockQ5_K : (i+1)*blockQ5_K]
		if err := checkFinite(x, i*QKK); err != nil {
			return err
		}
		if err := quantizeSuperblockMins(x, b[:16], &L, q5KParams, i*QKK); err != nil {
			return err
		}
		qh := b[16 : 16+QKK/8]
		clear(qh)
		for c := 0; c < 4; c++ {
			ql := b[48+32*c : 48+32*c+32]
			m1, m2 := byte(1)<<(2*c), byte(2)<<(2*c)
			for l := range ql {
				l1, l2 := L[64*c+l], L[64*c+l+32]
				if l1 > 15 {
					l1 -= 16
					qh[l] |= m1
				}
				if l2 > 15 {
					l2 -= 16
					qh[l] |= m2
				}
				ql[l] = l1 | l2<<4
			}
		}
	}
	return nil
}

// quantizeQ6_K is quantize_row_q6_K_ref: a symmetric 6-bit fit per 16
// values (makeQXQuants), the 16 scales stored as int8 against one f16 d.
func quantizeQ6_K(src []float32, dst []byte) error {
	var L [QKK]uint8
	var scales [QKK / 16]float32
	for i := 0; i < len(src)/QKK; i++ {
		x := src[i*QKK : (i+1)*QKK]
		b := dst[i*blockQ6_K : (i+1)*blockQ6_K]
		if err := checkFinite(x, i*QKK); err != nil {
			return err
		}
		var maxScale, maxAbsScale float32
		for ib := range scales {
			scales[ib] = makeQXQuants(32, x[16*ib:16*ib+16], L[16*ib:16*ib+16])
			if a := abs32(scales[ib]); a > maxAbsScale {
				maxAbsScale, maxScale = a, scales[ib]
			}
		}
		clear(b)
		if maxAbsScale < groupMaxEps {
			continue // all-zero block: d = 0 and every quant 0
		}
		const offScales, offD = QKK/2 + QKK/4, QKK/2 + QKK/4 + QKK/16
		iscale := -128 / maxScale
		if err := putScale(b[offD:], 1/iscale, "scale", i*QKK, QKK); err != nil {
			return err
		}
		sc := b[offScales:offD]
		for ib := range scales {
			sc[ib] = byte(int8(min(127, nearestInt(iscale*scales[ib]))))
		}
		d := halfAt(b[offD:])
		for j := range scales {
			dj := d * float32(int8(sc[j]))
			if dj == 0 {
				continue
			}
			for ii, v := range x[16*j : 16*j+16] {
				L[16*j+ii] = uint8(clampInt32(nearestInt(v/dj), -32, 31) + 32)
			}
		}
		for h := 0; h < 2; h++ {
			ql := b[64*h : 64*h+64]
			qh := b[QKK/2+32*h : QKK/2+32*h+32]
			Lh := L[128*h : 128*h+128]
			for l := 0; l < 32; l++ {
				q1, q2, q3, q4 := Lh[l], Lh[l+32], Lh[l+64], Lh[l+96]
				ql[l] = q1&0xF | (q3&0xF)<<4
				ql[l+32] = q2&0xF | (q4&0xF)<<4
				qh[l] = q1>>4 | (q2>>4)<<2 | (q3>>4)<<4 | (q4>>4)<<6
			}
		}
	}
	return nil
}
