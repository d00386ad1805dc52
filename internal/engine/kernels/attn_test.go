package kernels

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"tandem/internal/engine/tensor"
)

func randF16(rng *rand.Rand, n int) []uint16 {
	h := make([]uint16, n)
	for i := range h {
		h[i] = tensor.FP32ToFP16(float32(rng.NormFloat64()))
	}
	return h
}

func randF32(rng *rand.Rand, n int) []float32 {
	f := make([]float32, n)
	for i := range f {
		f[i] = float32(rng.NormFloat64())
	}
	return f
}

// attnShapes are the (queries, keys, head dim) shapes the block tests
// cover: query counts around multiples of the 4-row tile, key counts around
// multiples of 4, head dims the assembly takes (16·k, with and without a
// 64-wide part) and ones it leaves to the row forms.
var attnShapes = func() [][3]int {
	var s [][3]int
	for _, nq := range []int{1, 3, 4, 5, 8, 9, 16} {
		for _, nk := range []int{1, 3, 4, 5, 16, 17} {
			for _, d := range []int{8, 16, 64, 80, 96, 128, 256} {
				s = append(s, [3]int{nq, nk, d})
			}
		}
	}
	return s
}()

// TestAttnScoresMatchRows checks, at every level, that AttnScoresF16 gives
// every query and key DotF16Rows's score and AttnScoresF32 DotF32's, bit for
// bit, and that both are within float32 rounding of the float64 reference.
func TestAttnScoresMatchRows(t *testing.T) {
	forEachLevel(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(3, 9))
		for _, sh := range attnShapes {
			nq, nk, d := sh[0], sh[1], sh[2]
			qs, ks, ss := d*(1+rng.IntN(3)), d*(1+rng.IntN(3)), nk+rng.IntN(3)
			q, k := randF16(rng, (nq-1)*qs+d), randF16(rng, (nk-1)*ks+d)
			const scale = 0.125
			got := make([]float32, (nq-1)*ss+nk)
			AttnScoresF16(f16Floats(q), qs, nq, k, ks, nk, d, scale, got, ss)
			ref := make([]float32, len(got))
			qf, kf := f16Floats(q), f16Floats(k)
			attnScoresRef(qf, qs, nq, kf, ks, nk, d, scale, ref, ss)
			row := make([]float32, nk)
			for i := range nq {
				DotF16Rows(q[i*qs:i*qs+d], k, ks, scale, row)
				for j := range nk {
					g := got[i*ss+j]
					if math.Float32bits(g) != math.Float32bits(row[j]) {
						t.Fatalf("AttnScoresF16 nq=%d nk=%d d=%d [%d,%d] = %v, DotF16Rows gives %v", nq, nk, d, i, j, g, row[j])
					}
					if e := math.Abs(float64(g - ref[i*ss+j])); e > 1e-5*math.Sqrt(float64(d)) {
						t.Fatalf("AttnScoresF16 nq=%d nk=%d d=%d [%d,%d] = %v, reference %v", nq, nk, d, i, j, g, ref[i*ss+j])
					}
				}
			}
			// F32: the same values as float32 inputs.
			got32 := make([]float32, len(got))
			AttnScoresF32(qf, qs, nq, kf, ks, nk, d, scale, got32, ss)
			for i := range nq {
				for j := range nk {
					g, w := got32[i*ss+j], ref[i*ss+j]
					if e := math.Abs(float64(g - w)); e > 1e-5*math.Sqrt(float64(d)) {
						t.Fatalf("AttnScoresF32 nq=%d nk=%d d=%d [%d,%d] = %v, reference %v", nq, nk, d, i, j, g, w)
					}
					if want := DotF32(qf[i*qs:i*qs+d], kf[j*ks:j*ks+d]) * scale; math.Float32bits(g) != math.Float32bits(want) {
						t.Fatalf("AttnScoresF32 nq=%d nk=%d d=%d [%d,%d] = %v, DotF32 gives %v", nq, nk, d, i, j, g, want)
					}
				}
			}
		}
	})
}

// TestAttnAccumMatchRows checks, at every level, that AttnAccumF16 equals
// AxpyF16Rows per query and AttnAccumF32 equals AxpyF32 row by row, bit for
// bit, and both the plain reference within float32 rounding.
func TestAttnAccumMatchRows(t *testing.T) {
	forEachLevel(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(5, 2))
		for _, sh := range attnShapes {
			nq, nk, d := sh[0], sh[1], sh[2]
			ps, vs, os := nk+rng.IntN(3), d*(1+rng.IntN(3)), d+16*rng.IntN(2)
			p := make([]float32, (nq-1)*ps+nk)
			for i := range p {
				p[i] = float32(rng.Float64())
			}
			v := randF16(rng, (nk-1)*vs+d)
			vf := f16Floats(v)
			o0 := randF32(rng, (nq-1)*os+d)
			got, want, ref := slices.Clone(o0), slices.Clone(o0), slices.Clone(o0)
			AttnAccumF16(p, ps, nq, v, vs, nk, d, got, os)
			for i := range nq {
				AxpyF16Rows(p[i*ps:i*ps+nk], v, vs, want[i*os:i*os+d])
			}
			attnAccumRef(p, ps, nq, vf, vs, nk, d, ref, os)
			check := func(name string, got []float32) {
				t.Helper()
				for i := range nq {
					for e := range d {
						g, w, r := got[i*os+e], want[i*os+e], ref[i*os+e]
						if math.Float32bits(g) != math.Float32bits(w) {
							t.Fatalf("%s nq=%d nk=%d d=%d [%d,%d] = %v, row by row %v", name, nq, nk, d, i, e, g, w)
						}
						if math.Abs(float64(g-r)) > 1e-5*float64(nk+1) {
							t.Fatalf("%s nq=%d nk=%d d=%d [%d,%d] = %v, reference %v", name, nq, nk, d, i, e, g, r)
						}
					}
				}
				// the gaps between output rows are untouched
				for i := range nq - 1 {
					for e := d; e < os; e++ {
						if got[i*os+e] != o0[i*os+e] {
							t.Fatalf("%s nq=%d nk=%d d=%d wrote between rows at [%d,%d]", name, nq, nk, d, i, e)
						}
					}
				}
			}
			check("AttnAccumF16", got)
			got32 := slices.Clone(o0)
			want = slices.Clone(o0)
			AttnAccumF32(p, ps, nq, vf, vs, nk, d, got32, os)
			for i := range nq {
				for j := range nk {
					AxpyF32(p[i*ps+j], vf[j*vs:j*vs+d], want[i*os:i*os+d])
				}
			}
			check("AttnAccumF32", got32)
		}
	})
}

// TestAttnBlockBounds checks that a block kernel given too short a slice
// panics with the invariant error rather than reading past it.
func TestAttnBlockBounds(t *testing.T) {
	q, k, s := make([]float32, 64*4), make([]uint16, 64*4), make([]float32, 16)
	for name, f := range map[string]func(){
		"short keys":   func() { AttnScoresF16(q, 64, 4, k[:64*3], 64, 4, 64, 1, s, 4) },
		"short output": func() { AttnScoresF16(q, 64, 4, k, 64, 4, 64, 1, s[:15], 4) },
		"short values": func() { AttnAccumF16(s, 4, 4, k[:100], 64, 4, 64, make([]float32, 256), 64) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

// cpuTimer reports, as cpu-ns/op, the CPU time of the benchmark's thread per
// op: other processes on a shared machine disturb it less than wall time.
// Call it before b.Loop and defer what it returns.
func cpuTimer(b *testing.B) func() {
	runtime.LockOSThread()
	read := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(rusageThread, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	t0 := read()
	return func() {
		b.ReportMetric(float64(read()-t0)/float64(b.N), "cpu-ns/op")
		runtime.UnlockOSThread()
	}
}

// BenchmarkAttnBlock compares, for one KV head, a block of 16 queries (four
// query heads of a GQA group at four positions) against 256 keys of head dim
// 64 stored at a page's stride: the block kernels against the row kernels
// query by query (today's per-query attention path).
func BenchmarkAttnBlock(b *testing.B) {
	const d, nk, nq, stride = 64, 256, 16, 64 * 4
	rng := rand.New(rand.NewPCG(1, 1))
	k, v := randF16(rng, (nk-1)*stride+d), randF16(rng, (nk-1)*stride+d)
	q := randF16(rng, nq*d)
	s := make([]float32, nq*nk)
	o := make([]float32, nq*d)
	kf, vf, qf := f16Floats(k), f16Floats(v), f16Floats(q)
	benchLevels(b, func(b *testing.B) {
		b.Run("f16/block", func(b *testing.B) {
			defer cpuTimer(b)()
			for b.Loop() {
				AttnScoresF16(qf, d, nq, k, stride, nk, d, 0.125, s, nk)
				AttnAccumF16(s, nk, nq, v, stride, nk, d, o, d)
			}
		})
		b.Run("f16/rows", func(b *testing.B) {
			defer cpuTimer(b)()
			for b.Loop() {
				for i := range nq {
					DotF16Rows(q[i*d:(i+1)*d], k, stride, 0.125, s[i*nk:(i+1)*nk])
					AxpyF16Rows(s[i*nk:(i+1)*nk], v, stride, o[i*d:(i+1)*d])
				}
			}
		})
		b.Run("f32/block", func(b *testing.B) {
			defer cpuTimer(b)()
			for b.Loop() {
				AttnScoresF32(qf, d, nq, kf, stride, nk, d, 0.125, s, nk)
				AttnAccumF32(s, nk, nq, vf, stride, nk, d, o, d)
			}
		})
		b.Run("f32/rows", func(b *testing.B) {
			defer cpuTimer(b)()
			for b.Loop() {
				for i := range nq {
					for j := range nk {
						s[i*nk+j] = DotF32(qf[i*d:(i+1)*d], kf[j*stride:j*stride+d]) * 0.125
					}
					for j := range nk {
						AxpyF32(s[i*nk+j], vf[j*stride:j*stride+d], o[i*d:(i+1)*d])
					}
				}
			}
		})
	})
}

// TestSoftmaxF32 checks, at every level, that SoftmaxF32 gives ExpF32 of
// each element's distance below the maximum divided by the float64 sum:
// within one float32 rounding of that (the sum's order is the level's), and
// nothing written past the end, for lengths around the 16-lane vectors.
func TestSoftmaxF32(t *testing.T) {
	forEachLevel(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(4, 4))
		for _, n := range []int{1, 2, 7, 15, 16, 17, 31, 32, 33, 64, 70, 1000} {
			x := make([]float32, n+1)
			for i := range x {
				x[i] = float32(rng.NormFloat64() * 20)
			}
			const guard = 12345
			x[n] = guard
			orig := slices.Clone(x[:n])
			SoftmaxF32(x[:n])
			m := slices.Max(orig)
			var sum float64
			for _, v := range orig {
				sum += float64(ExpF32(v - m))
			}
			inv := float32(1 / sum)
			for i, v := range orig {
				want := ExpF32(v-m) * inv
				if d := math.Abs(float64(x[i] - want)); d > 1.2e-7*float64(want) {
					t.Fatalf("n=%d: x[%d] = %v, want %v", n, i, x[i], want)
				}
			}
			if x[n] != guard {
				t.Fatalf("n=%d: wrote past the end", n)
			}
		}
	})
}
