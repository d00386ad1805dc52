package kernels

import (
	"encoding/binary"

	"tandem/internal/engine/tensor"
)

// The dot products of MXFP4, IQ4_NL, IQ4_XS, Q2_K and Q3_K weights, in
// portable Go: MXFP4 and IQ4_NL against Q8_0 activations, the others
// against Q8_K (ggml's vec_dot_type of each). Each performs the float32
// operations of ggml's generic C kernel (ggml_vec_dot_*_generic, what
// ggml's CPU backend runs without SIMD) in the same order, so it returns
// ggml's result bit for bit; the integer parts are exact.

// Block sizes of the types (tensor's type table is the source of truth;
// the tests check these agree with it).
const (
	sizeMXFP4  = 1 + qk/2
	sizeIQ4_NL = 2 + qk/2
	sizeIQ4_XS = 2 + 2 + qkk/64 + qkk/2
	sizeQ2_K   = qkk/16 + qkk/4 + 4
	sizeQ3_K   = qkk/8 + qkk/4 + 12 + 2
)

// kvIQ4 and kvMXFP4 are the nibble tables (tensor.KValuesIQ4NL,
// tensor.KValuesMXFP4), widened for the integer sums.
var kvIQ4, kvMXFP4 = widen16(tensor.KValuesIQ4NL), widen16(tensor.KValuesMXFP4)

func widen16(v [16]int8) (w [16]int32) {
	for i, x := range v {
		w[i] = int32(x)
	}
	return w
}

// tableDot16 returns Σ kv[lo(q[j])]·a[j] + Σ kv[hi(q[j])]·a[j+16] for the
// 16 nibble pairs q and 32 activation quants a, as ggml's sumi1 + sumi2.
func tableDot16(kv *[16]int32, q, a []byte) int32 {
	q, a = q[:16:16], a[:32:32]
	var s1, s2 int32
	for j := range 16 {
		s1 += int32(int8(a[j])) * kv[q[j]&0xF]
		s2 += int32(int8(a[j+16])) * kv[q[j]>>4]
	}
	return s1 + s2
}

// dotTable32Go is ggml's generic vec_dot of a 32-element table type with
// Q8_0 activations (ggml_vec_dot_iq4_nl_q8_0_generic and _mxfp4_q8_0_):
// per block sum += (d_a·d_w)·Σ kv[q]·a, d_w = wscale(block), the 16 nibble
// bytes last in blocks of size bytes.
func dotTable32Go(n int, w, a []byte, size int, kv *[16]int32, wscale func(x []byte) float32) float32 {
	nb := n / qk
	w, a = w[:nb*size], a[:nb*sizeQ8_0]
	var sum float32
	for b := range nb {
		x, y := w[b*size:(b+1)*size], a[b*sizeQ8_0:(b+1)*sizeQ8_0]
		d := half(y) * wscale(x)
		sum += float32(d * float32(tableDot16(kv, x[size-qk/2:], y[2:])))
	}
	return sum
}

// e8m0Scale is an MXFP4 block's scale: half its E8M0 exponent's value (the
// table holds doubled FP4 values).
func e8m0Scale(x []byte) float32 { return tensor.E8M0Half(x[0]) }

// dotMXFP4Go is ggml_vec_dot_mxfp4_q8_0_generic.
func dotMXFP4Go(n int, w, a []byte) float32 {
	return dotTable32Go(n, w, a, sizeMXFP4, &kvMXFP4, e8m0Scale)
}

// dotIQ4_NLGo is ggml_vec_dot_iq4_nl_q8_0_generic.
func dotIQ4_NLGo(n int, w, a []byte) float32 { return dotTable32Go(n, w, a, sizeIQ4_NL, &kvIQ4, half) }

// dotIQ4_XSGo is ggml_vec_dot_iq4_xs_q8_K_generic: per 32-element
// sub-block sum += (d_w·d_a·(ls−32))·Σ.
func dotIQ4_XSGo(n int, w, a []byte) float32 {
	nb := n / qkk
	w, a = w[:nb*sizeIQ4_XS], a[:nb*sizeQ8_K]
	var sum float32
	for b := range nb {
		x, y := w[b*sizeIQ4_XS:(b+1)*sizeIQ4_XS], a[b*sizeQ8_K:(b+1)*sizeQ8_K]
		d4d8 := half(x) * f32At(y)
		h := binary.LittleEndian.Uint16(x[2:])
		qs, q8 := x[8:8+qkk/2], y[4:4+qkk]
		for ib := 0; ib < qkk/32; ib++ {
			ls := int32(tensor.ScaleIQ4_XS(ib, h, x[4:8]))
			dl := d4d8 * float32(ls-32)
			sum += float32(dl * float32(tableDot16(&kvIQ4, qs[16*ib:], q8[32*ib:])))
		}
	}
	return sum
}

// bsum returns the int16 block sum j of the Q8_K block y.
func bsum(y []byte, j int) int32 {
	return int32(int16(binary.LittleEndian.Uint16(y[4+qkk+2*j:])))
}

// dotQ2_KGo is ggml_vec_dot_q2_K_q8_K_generic: per super-block
// sum += d_a·d·Σ sc·q·a − d_a·dmin·Σ m·bsum.
func dotQ2_KGo(n int, w, a []byte) float32 {
	nb := n / qkk
	w, a = w[:nb*sizeQ2_K], a[:nb*sizeQ8_K]
	var sum float32
	for b := range nb {
		x, y := w[b*sizeQ2_K:(b+1)*sizeQ2_K], a[b*sizeQ8_K:(b+1)*sizeQ8_K]
		sc, q2, q8 := x[:16], x[16:80], y[4:4+qkk]
		var summs, isum int32
		for j := range 16 {
			summs += bsum(y, j) * int32(sc[j]>>4)
		}
		for h := range 2 {
			q := q2[32*h : 32*h+32]
			for j := range 4 {
				shift := uint(2 * j)
				for k := range 2 {
					ys := q8[128*h+32*j+16*k : 128*h+32*j+16*k+16]
					var s int32
					for l, v := range q[16*k : 16*k+16] {
						s += int32(int8(ys[l])) * int32(v>>shift&3)
					}
					isum += int32(sc[8*h+2*j+k]&0xF) * s
				}
			}
		}
		da := f32At(y)
		dall, dmin := da*half(x[80:]), da*half(x[82:])
		sum += float32(dall*float32(isum)) - float32(dmin*float32(summs))
	}
	return sum
}

// dotQ3_KGo is ggml_vec_dot_q3_K_q8_K_generic: the signed 3-bit quants
// (q − 4 where the hmask bit is clear) of a super-block unpacked first, then
// eight int32 lanes (element index mod 8) of Σ (sc−32)·(a·q), each lane's
// float sum kept apart (sums[l] += d_w·d_a·lane) and the eight added at the
// end.
func dotQ3_KGo(n int, w, a []byte) float32 {
	nb := n / qkk
	w, a = w[:nb*sizeQ3_K], a[:nb*sizeQ8_K]
	var sums [8]float32
	var q [qkk]int32
	for b := range nb {
		x, y := w[b*sizeQ3_K:(b+1)*sizeQ3_K], a[b*sizeQ8_K:(b+1)*sizeQ8_K]
		hm := x[:32]
		for h := range 2 {
			qs := x[32+32*h : 64+32*h]
			for j := range 4 {
				bit := byte(1) << (4*h + j)
				out := q[128*h+32*j : 128*h+32*j+32]
				for l, v := range qs {
					v := int32(v >> (2 * j) & 3)
					if hm[l]&bit == 0 {
						v -= 4
					}
					out[l] = v
				}
			}
		}
		sc := tensor.ScalesQ3_K(x[96:108])
		q8 := y[4 : 4+qkk]
		var lanes [8]int32
		for e := 0; e < qkk; e += 8 {
			s := int32(sc[e/16])
			for l := range 8 {
				lanes[l] += s * (int32(int8(q8[e+l])) * q[e+l])
			}
		}
		d := half(x[108:]) * f32At(y)
		for l, v := range lanes {
			sums[l] += float32(d * float32(v))
		}
	}
	var sum float32
	for _, s := range sums {
		sum += s
	}
	return sum
}
