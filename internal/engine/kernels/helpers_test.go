package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"tandem/internal/engine/tensor"
	"tandem/internal/testenv"
)

// weightTypes are the weight types the kernels support, in the order tests
// report them.
var weightTypes = []tensor.Type{
	tensor.F32, tensor.F16, tensor.BF16, tensor.Q8_0, tensor.Q4_0, tensor.Q4_1,
	tensor.Q5_0, tensor.Q5_1, tensor.Q4_K, tensor.Q5_K, tensor.Q6_K,
	tensor.Q2_K, tensor.Q3_K, tensor.IQ4_NL, tensor.IQ4_XS, tensor.MXFP4,
}

// levels are all levels; forEachLevel skips the ones this CPU lacks.
var levels = []Level{Generic, AVX2, AVX512}

// forEachLevel runs f as a subtest at every level, skipping (with the
// missing features named) the levels this CPU cannot run.
func forEachLevel(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	for _, l := range levels {
		t.Run(l.String(), func(t *testing.T) {
			if err := CheckLevel(l); err != nil {
				t.Skip(err)
			}
			defer SetLevel(l)()
			f(t)
		})
	}
}

// --- test-local dequantizers (exact, in float64) ---

func f16At(b []byte) float64 { return float64(tensor.FP16ToFP32(binary.LittleEndian.Uint16(b))) }

// scaleMin is ggml's get_scale_min_k4, written from the layout description.
func scaleMin(j int, s []byte) (sc, m float64) {
	if j < 4 {
		return float64(s[j] & 63), float64(s[j+4] & 63)
	}
	return float64(s[j+4]&0xF | (s[j-4]>>6)<<4), float64(s[j+4]>>4 | (s[j]>>6)<<4)
}

// deq decodes n elements of type typ from b, exactly (float64 holds every
// product these formats make). For the _1 types it includes the min m.
func deq(typ tensor.Type, b []byte, n int) []float64 {
	out := make([]float64, n)
	bs, ts := typ.BlockSize(), typ.TypeSize()
	for blk := 0; blk < n/bs; blk++ {
		x, y := b[blk*ts:(blk+1)*ts], out[blk*bs:(blk+1)*bs]
		switch typ {
		case tensor.F32:
			y[0] = float64(math.Float32frombits(binary.LittleEndian.Uint32(x)))
		case tensor.F16:
			y[0] = f16At(x)
		case tensor.BF16:
			y[0] = float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(x)) << 16))
		case tensor.Q8_0:
			for j := range 32 {
				y[j] = f16At(x) * float64(int8(x[2+j]))
			}
		case tensor.Q8_1:
			for j := range 32 {
				y[j] = f16At(x) * float64(int8(x[4+j]))
			}
		case tensor.Q4_0, tensor.Q4_1, tensor.Q5_0, tensor.Q5_1:
			d := f16At(x)
			var m float64
			qs, qh, off := x[2:], uint32(0), -8.0
			switch typ {
			case tensor.Q4_1:
				m, qs, off = f16At(x[2:]), x[4:], 0
			case tensor.Q5_0:
				qh, qs, off = binary.LittleEndian.Uint32(x[2:]), x[6:], -16
			case tensor.Q5_1:
				m, qh, qs, off = f16At(x[2:]), binary.LittleEndian.Uint32(x[4:]), x[8:], 0
			}
			for j := range 16 {
				lo := float64(qs[j]&0xF) + float64((qh>>j)&1)*16
				hi := float64(qs[j]>>4) + float64((qh>>(j+16))&1)*16
				y[j] = d*(lo+off) + m
				y[j+16] = d*(hi+off) + m
			}
		case tensor.Q4_K, tensor.Q5_K:
			d, dmin := f16At(x), f16At(x[2:])
			qh, qs := x[16:48], x[16:]
			if typ == tensor.Q5_K {
				qs = x[48:]
			}
			for c := range 4 {
				sc0, m0 := scaleMin(2*c, x[4:16])
				sc1, m1 := scaleMin(2*c+1, x[4:16])
				for l := range 32 {
					lo, hi := float64(qs[32*c+l]&0xF), float64(qs[32*c+l]>>4)
					if typ == tensor.Q5_K {
						lo += float64(qh[l]>>(2*c)&1) * 16
						hi += float64(qh[l]>>(2*c+1)&1) * 16
					}
					y[64*c+l] = d*sc0*lo - dmin*m0
					y[64*c+32+l] = d*sc1*hi - dmin*m1
				}
			}
		case tensor.Q6_K:
			d := f16At(x[208:])
			for h := range 2 {
				ql, qh, sc := x[64*h:], x[128+32*h:], x[192+8*h:]
				for l := range 32 {
					is := l / 16
					q1 := float64(int(ql[l]&0xF|(qh[l]&3)<<4) - 32)
					q2 := float64(int(ql[l+32]&0xF|(qh[l]>>2&3)<<4) - 32)
					q3 := float64(int(ql[l]>>4|(qh[l]>>4&3)<<4) - 32)
					q4 := float64(int(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32)
					y[128*h+l] = d * float64(int8(sc[is])) * q1
					y[128*h+l+32] = d * float64(int8(sc[is+2])) * q2
					y[128*h+l+64] = d * float64(int8(sc[is+4])) * q3
					y[128*h+l+96] = d * float64(int8(sc[is+6])) * q4
				}
			}
		case tensor.Q8_K:
			d := float64(math.Float32frombits(binary.LittleEndian.Uint32(x)))
			for j := range 256 {
				y[j] = d * float64(int8(x[4+j]))
			}
		case tensor.Q2_K, tensor.Q3_K:
			deqLowK(typ, x, y)
		case tensor.IQ4_NL, tensor.MXFP4:
			d := f16At(x)
			kv, qs := tensor.KValuesIQ4NL, x[2:]
			if typ == tensor.MXFP4 {
				d, kv, qs = math.Ldexp(1, int(x[0])-128), tensor.KValuesMXFP4, x[1:]
			}
			for j := range 16 {
				y[j] = d * float64(kv[qs[j]&0xF])
				y[j+16] = d * float64(kv[qs[j]>>4])
			}
		case tensor.IQ4_XS:
			d, sh := f16At(x), binary.LittleEndian.Uint16(x[2:])
			for ib := range 8 {
				ls := int(x[4+ib/2]>>(4*(ib%2))&0xF) | int(sh>>(2*ib)&3)<<4
				for j := range 16 {
					q := x[8+16*ib+j]
					y[32*ib+j] = d * float64(ls-32) * float64(tensor.KValuesIQ4NL[q&0xF])
					y[32*ib+16+j] = d * float64(ls-32) * float64(tensor.KValuesIQ4NL[q>>4])
				}
			}
		default:
			panic(fmt.Sprintf("deq: type %s", typ))
		}
	}
	return out
}

// deqLowK decodes one Q2_K or Q3_K block x into y (256 values), written
// from the layouts: element e = 128h + 32j + l has its two low bits at bits
// 2j of qs byte 32h + l and its 16-element scale e/16; Q3_K's third bit is
// bit e/32 of hmask byte e%32 (clear: subtract 4), its 6-bit scales have
// the low nibble in byte e/16 % 8 (high nibble for e/16 >= 8) and the top
// two bits in byte 8 + (e/16)%4 at bit 2·(e/64).
func deqLowK(typ tensor.Type, x []byte, y []float64) {
	var d, dmin float64
	if typ == tensor.Q2_K {
		d, dmin = f16At(x[80:]), f16At(x[82:])
	} else {
		d = f16At(x[108:])
	}
	for e := range 256 {
		h, j, l, s := e/128, e%128/32, e%32, e/16
		if typ == tensor.Q2_K {
			q := float64(x[16+32*h+l] >> (2 * j) & 3)
			sc := x[s]
			y[e] = d*float64(sc&0xF)*q - dmin*float64(sc>>4)
			continue
		}
		q := int(x[32+32*h+l] >> (2 * j) & 3)
		if x[e%32]>>(e/32)&1 == 0 {
			q -= 4
		}
		lo := x[96+s%8] & 0xF
		if s >= 8 {
			lo = x[96+s%8] >> 4
		}
		sc := int(lo|(x[104+s%4]>>(2*(s/4))&3)<<4) - 32
		y[e] = d * float64(sc) * float64(q)
	}
}

// kMins returns dmin and the per-element mins m of the K-quant super-block
// x of type wt (Q2_K, Q4_K or Q5_K): the min part of element j's value is
// dmin·m[j], the term the kernels sum apart from the scaled quants.
func kMins(wt tensor.Type, x []byte) (dmin float64, m [qkk]float64) {
	if wt == tensor.Q2_K {
		for j := range m {
			m[j] = float64(x[j/16] >> 4)
		}
		return f16At(x[82:]), m
	}
	for j := range m {
		_, m[j] = scaleMin(j/32, x[4:16])
	}
	return f16At(x[2:]), m
}

// refDot is the reference VecDot in float64: the exact dot of the decoded
// rows, except that for Q4_1/Q5_1 the min term uses the Q8_1 block's stored
// s (as ggml does) instead of d·Σq. abs is the sum of |terms| the kernels
// add up (each product, and each min term separately), the scale of their
// float rounding error.
func refDot(wt tensor.Type, n int, w, a []byte) (dot, abs float64) {
	vt := VecDotType(wt)
	switch wt {
	case tensor.Q4_1, tensor.Q5_1:
		ws := deq(wt, w, n)
		as := deq(vt, a, n)
		for b := 0; b < n/qk; b++ {
			x, y := w[b*wt.TypeSize():], a[b*sizeQ8_1:]
			m, s := f16At(x[2:]), f16At(y[2:])
			for j := b * qk; j < (b+1)*qk; j++ {
				p := (ws[j] - m) * as[j]
				dot += p
				abs += math.Abs(p)
			}
			dot += m * s
			abs += math.Abs(m * s)
		}
		return dot, abs
	case tensor.Q2_K, tensor.Q4_K, tensor.Q5_K:
		// terms: d·sc·q·a and dmin·m·a separately
		as := deq(vt, a, n)
		for b := 0; b < n/qkk; b++ {
			x := w[b*wt.TypeSize():]
			full := deq(wt, x, qkk)
			dmin, m := kMins(wt, x)
			for j := range qkk {
				mt := dmin * m[j] * as[b*qkk+j]
				p := full[j] * as[b*qkk+j]
				dot += p
				abs += math.Abs(p+mt) + math.Abs(mt)
			}
		}
		return dot, abs
	}
	ws, as := deq(wt, w, n), deq(vt, a, n)
	for i := range ws {
		p := ws[i] * as[i]
		dot += p
		abs += math.Abs(p)
	}
	return dot, abs
}

// closeTo reports whether got is within 1e-5 of abs (the sum of |terms|) of
// want; with abs = 0 it must be exact.
func closeTo(got float32, want, abs float64) bool {
	return math.Abs(float64(got)-want) <= 1e-5*abs
}

// --- random data ---

// randHalf returns the f16 bits of a random value in ±[lo, hi).
func randHalf(rng *rand.Rand, lo, hi float64) []byte {
	v := lo + rng.Float64()*(hi-lo)
	if rng.IntN(2) == 0 {
		v = -v
	}
	return binary.LittleEndian.AppendUint16(nil, tensor.FP32ToFP16(float32(v)))
}

// randWeights returns a random row of n elements of type wt: every quant
// byte uniformly random (so -128 quants, 6-bit extremes and negative Q6_K
// scales all occur) and the f16 scales random but finite.
func randWeights(rng *rand.Rand, wt tensor.Type, n int) []byte {
	rb, err := wt.RowBytes(n)
	if err != nil {
		panic(err)
	}
	b := make([]byte, rb)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	ts := wt.TypeSize()
	for blk := 0; blk < rb/ts; blk++ {
		x := b[blk*ts:]
		switch wt {
		case tensor.F32:
			binary.LittleEndian.PutUint32(x, math.Float32bits(float32(rng.NormFloat64())))
		case tensor.F16:
			copy(x, randHalf(rng, 0, 2))
		case tensor.BF16:
			binary.LittleEndian.PutUint16(x, tensor.FP32ToBF16(float32(rng.NormFloat64())))
		case tensor.Q8_0, tensor.Q4_0, tensor.Q5_0:
			copy(x, randHalf(rng, 1e-3, 0.1))
		case tensor.Q4_1, tensor.Q5_1, tensor.Q4_K, tensor.Q5_K:
			copy(x, randHalf(rng, 1e-3, 0.1))
			copy(x[2:], randHalf(rng, 1e-3, 0.1))
		case tensor.Q6_K:
			copy(x[208:], randHalf(rng, 1e-4, 0.01))
		case tensor.Q2_K:
			copy(x[80:], randHalf(rng, 1e-3, 0.1))
			copy(x[82:], randHalf(rng, 1e-3, 0.1))
		case tensor.Q3_K:
			copy(x[108:], randHalf(rng, 1e-4, 0.01))
		case tensor.IQ4_NL:
			copy(x, randHalf(rng, 1e-4, 1e-3))
		case tensor.IQ4_XS:
			copy(x, randHalf(rng, 1e-5, 1e-4))
		case tensor.MXFP4:
			x[0] = byte(118 + rng.IntN(9))
		}
	}
	return b
}

// randActivations returns n normal floats with a few outliers.
func randActivations(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
		if rng.IntN(64) == 0 {
			x[i] *= 20
		}
	}
	return x
}

// quantized returns the activation row of x for weight type wt.
func quantized(wt tensor.Type, x []float32) []byte {
	vt := VecDotType(wt)
	rb, err := vt.RowBytes(len(x))
	if err != nil {
		panic(err)
	}
	a := make([]byte, rb)
	QuantizeActivation(vt, x, a)
	return a
}

// --- the shared quantization test vectors ---

// vecTensor is one tensor of quant-testvectors.gguf.
type vecTensor struct {
	typ  tensor.Type
	n    int // elements
	data []byte
}

// loadVectors reads the shared GGUF of ggml-made quantization vectors (a
// minimal reader: the gguf package is not a dependency of kernels).
func loadVectors(t *testing.T) map[string]vecTensor {
	t.Helper()
	return readVectors(t, testenv.Shared(t, "testdata/quant/quant-testvectors.gguf"))
}

// loadGGMLVectors reads the shared vectors of MXFP4, IQ4_NL, IQ4_XS,
// Q3_K and Q2_K (shared/testdata/quant/ggml-quant-vectors.gguf, made with
// ggml's libraries by scripts/quantvectors; skipped where absent): for each type T, T.q/T.deq and rnd.T.q/rnd.T.deq
// as in the shared file ([512, 8] and [512, 16]), the activations act
// (F32 [512, 4]), act.q8_0 and act.q8_k, and ggml's dot products
// W.dot.LEVEL and W.dotp.LEVEL (see gen.c).
func loadGGMLVectors(t *testing.T) map[string]vecTensor {
	t.Helper()
	return readVectors(t, testenv.Shared(t, "testdata/quant/ggml-quant-vectors.gguf"))
}

// readVectors reads a GGUF of test vectors at path.
func readVectors(t *testing.T, path string) map[string]vecTensor {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read test vectors: %v", err)
	}
	r := &ggufReader{b: b}
	if r.u32() != 0x46554747 || r.u32() != 3 {
		t.Fatalf("%s: not a GGUF v3 file", path)
	}
	nTensors, nKV := r.u64(), r.u64()
	align := uint64(32)
	for range nKV {
		key, vt := r.str(), r.u32()
		if key == "general.alignment" && vt == 4 {
			align = uint64(r.u32())
			continue
		}
		r.skip(vt)
	}
	type info struct {
		name string
		typ  tensor.Type
		n    int
		off  uint64
	}
	var infos []info
	for range nTensors {
		in := info{name: r.str(), n: 1}
		nd := r.u32()
		for range nd {
			in.n *= int(r.u64())
		}
		in.typ, in.off = tensor.Type(r.u32()), r.u64()
		infos = append(infos, in)
	}
	if r.err != nil {
		t.Fatalf("%s: %v", path, r.err)
	}
	start := (uint64(r.pos) + align - 1) / align * align
	out := map[string]vecTensor{}
	for _, in := range infos {
		rb, err := in.typ.RowBytes(in.n)
		if err != nil || start+in.off+uint64(rb) > uint64(len(b)) {
			t.Fatalf("%s: tensor %s (%s, %d elements) does not fit: %v", path, in.name, in.typ, in.n, err)
		}
		out[in.name] = vecTensor{in.typ, in.n, b[start+in.off : start+in.off+uint64(rb)]}
	}
	return out
}

type ggufReader struct {
	b   []byte
	pos int
	err error
}

func (r *ggufReader) take(n int) []byte {
	if r.err != nil || n < 0 || r.pos+n > len(r.b) {
		if r.err == nil {
			r.err = fmt.Errorf("truncated at byte %d", r.pos)
		}
		return make([]byte, max(n, 8))
	}
	p := r.b[r.pos : r.pos+n]
	r.pos += n
	return p
}

func (r *ggufReader) u32() uint32 { return binary.LittleEndian.Uint32(r.take(4)) }
func (r *ggufReader) u64() uint64 { return binary.LittleEndian.Uint64(r.take(8)) }
func (r *ggufReader) str() string { return string(r.take(int(r.u64()))) }

// skip passes over one metadata value of GGUF value type vt.
func (r *ggufReader) skip(vt uint32) {
	switch vt {
	case 0, 1, 7:
		r.take(1)
	case 2, 3:
		r.take(2)
	case 4, 5, 6:
		r.take(4)
	case 10, 11, 12:
		r.take(8)
	case 8:
		r.str()
	case 9:
		et, n := r.u32(), r.u64()
		for i := uint64(0); i < n && r.err == nil; i++ {
			r.skip(et)
		}
	default:
		r.err = fmt.Errorf("unknown value type %d at byte %d", vt, r.pos)
	}
}
