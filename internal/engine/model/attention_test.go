package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"tandem/internal/engine/kernels"
	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/tensor"
)

// attnBench is a runner with random queries and a cache of random keys and
// values for the given sequences (their Pos earlier positions and their new
// tokens are all in the cache), ready for attentionRows / attentionTiled.
type attnBench struct {
	r    *Runner
	kv   *kvcache.Cache
	seqs []Seq
	n    int
}

func newAttnBench(t testing.TB, pool *kernels.Pool, c Config, pt int, dt tensor.Type, qGain float64, lens [][2]int, seed uint64) *attnBench {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 17))
	m := &Model{Config: c, Layers: make([]Layer, c.Layers)}
	r := NewRunner(m, pool)
	pagesNeeded := 0
	for _, pl := range lens {
		pagesNeeded += (pl[0] + pl[1] + pt - 1) / pt
	}
	kv, err := kvcache.New(kvcache.Config{Layers: 1, KVHeads: c.KVHeads, HeadDim: c.HeadDim, PageTokens: pt, Pages: pagesNeeded + 1, DType: dt})
	if err != nil {
		t.Fatal(err)
	}
	// waste page 0 so page tables are not the identity
	if _, err := kv.Alloc(1); err != nil {
		t.Fatal(err)
	}
	kvDim, qDim := c.KVHeads*c.HeadDim, c.Heads*c.HeadDim
	row := make([]float32, kvDim)
	b := &attnBench{r: r, kv: kv}
	for si, pl := range lens {
		pos, nt := pl[0], pl[1]
		pages, err := kv.Alloc((pos + nt + pt - 1) / pt)
		if err != nil {
			t.Fatal(err)
		}
		slices.Reverse(pages)
		for p := range pos + nt {
			for i := range row {
				row[i] = float32(rng.NormFloat64())
			}
			storeRow(kv.KRow(0, pages, p), row, dt)
			for i := range row {
				row[i] = float32(rng.NormFloat64())
			}
			storeRow(kv.VRow(0, pages, p), row, dt)
		}
		b.seqs = append(b.seqs, Seq{Tokens: make([]int32, nt), Pos: pos, Pages: pages})
		for i := range nt {
			r.tokPos = append(r.tokPos, pos+i)
			r.tokSeq = append(r.tokSeq, si)
		}
		b.n += nt
	}
	r.q = make([]float32, b.n*qDim)
	for i := range r.q {
		r.q[i] = float32(rng.NormFloat64() * qGain)
	}
	r.setQKV(r.q, qDim, nil, nil, 0)
	r.attn = make([]float32, b.n*qDim)
	return b
}

// ref is attention in float64 from the cache's values: each (token, head)
// over its visible positions, with Q rounded to half precision for an F16
// cache as the kernels take it.
func (b *attnBench) ref() []float64 {
	r, c := b.r, b.r.m.Config
	d, group := c.HeadDim, c.Heads/c.KVHeads
	qDim, kvDim := c.Heads*d, c.KVHeads*d
	f16 := b.kv.Config().DType == tensor.F16
	widen := func(row []byte, dst []float64) {
		for i := range dst {
			if f16 {
				dst[i] = float64(tensor.FP16ToFP32(kvcache.F16(row)[i]))
			} else {
				dst[i] = float64(kvcache.F32(row)[i])
			}
		}
	}
	// each sequence's keys and values, widened once
	ks, vs := make([][]float64, len(b.seqs)), make([][]float64, len(b.seqs))
	for si, s := range b.seqs {
		np := s.Pos + len(s.Tokens)
		ks[si], vs[si] = make([]float64, np*kvDim), make([]float64, np*kvDim)
		for p := range np {
			widen(b.kv.KRow(0, s.Pages, p), ks[si][p*kvDim:(p+1)*kvDim])
			widen(b.kv.VRow(0, s.Pages, p), vs[si][p*kvDim:(p+1)*kvDim])
		}
	}
	out := make([]float64, b.n*qDim)
	scale := 1 / math.Sqrt(float64(d))
	window, softcap := c.Window(0), float64(c.AttnSoftcap)
	q := make([]float64, d)
	for t := range b.n {
		si, pos := r.tokSeq[t], r.tokPos[t]
		first := 0
		if window > 0 {
			first = max(0, pos+1-window)
		}
		for h := range c.Heads {
			for i, v := range r.q[t*qDim+h*d:][:d] {
				if f16 {
					v = tensor.FP16ToFP32(tensor.FP32ToFP16(v))
				}
				q[i] = float64(v)
			}
			off := (h / group) * d
			sc := make([]float64, pos+1-first)
			for p := first; p <= pos; p++ {
				k := ks[si][p*kvDim+off:][:d]
				var s float64
				for i := range d {
					s += q[i] * k[i]
				}
				s *= scale
				if softcap != 0 {
					s = math.Tanh(s/softcap) * softcap
				}
				sc[p-first] = s
			}
			mx := slices.Max(sc)
			var sum float64
			for i := range sc {
				sc[i] = math.Exp(sc[i] - mx)
				sum += sc[i]
			}
			o := out[t*qDim+h*d:][:d]
			for p := first; p <= pos; p++ {
				v, w := vs[si][p*kvDim+off:][:d], sc[p-first]/sum
				for i := range d {
					o[i] += w * v[i]
				}
			}
		}
	}
	return out
}

// TestAttentionTiledMatchesRows checks, at every kernel level, that the
// tiled attention gives the per-query one's bits and both are close to a
// float64 reference, over random queries, keys and values: GQA ratios 1, 4 and 8, one and two KV
// heads, head dims the block assembly takes (64, 80) and one it leaves to
// the row kernels (24), pages of 4 and 16 positions, sequences whose new
// tokens start mid-page and cross page boundaries (several sequences in one
// step, one with a single token), no window and windows shorter and longer
// than a page, with and without logit soft-capping, F16 and F32 caches.
func TestAttentionTiledMatchesRows(t *testing.T) {
	pool := kernels.NewPool(2)
	defer pool.Close()
	type shape struct{ g, kvh, d, pt, window, softcap int }
	var shapes []shape
	for _, gk := range [][2]int{{1, 2}, {4, 1}, {4, 2}, {8, 1}} {
		for _, d := range []int{24, 64, 80} {
			for _, pt := range []int{4, 16} {
				for _, wc := range [][2]int{{0, 0}, {3, 0}, {21, 0}, {0, 5}, {21, 5}} {
					shapes = append(shapes, shape{gk[0], gk[1], d, pt, wc[0], wc[1]})
				}
			}
		}
	}
	for _, l := range []kernels.Level{kernels.Generic, kernels.AVX2, kernels.AVX512} {
		t.Run(l.String(), func(t *testing.T) {
			if err := kernels.CheckLevel(l); err != nil {
				t.Skip(err)
			}
			if raceEnabled && l != kernels.MaxLevel() {
				t.Skip("race detector: the best level only")
			}
			defer kernels.SetLevel(l)()
			seed := uint64(0)
			for _, dt := range []tensor.Type{tensor.F16, tensor.F32} {
				for _, sh := range shapes {
					seed++
					if !kernels.AttnTiled() && (sh.d != 64 || sh.kvh != 2) {
						// without block assembly the block kernels are the
						// row kernels (tested in package kernels): one shape
						continue
					}
					name := fmt.Sprintf("%s/%+v", dt, sh)
					c := Config{Layers: 1, Heads: sh.g * sh.kvh, KVHeads: sh.kvh, HeadDim: sh.d, AttnSoftcap: float32(sh.softcap)}
					if sh.window > 0 {
						c.SlidingWindow, c.SWALayers = sh.window, []bool{true}
					}
					// large queries make scores of tens, so the cap and the
					// running maximum's rescaling both matter
					checkTiled(t, name, newAttnBench(t, pool, c, sh.pt, dt, 3, [][2]int{{7, 45}, {0, 1}, {19, 6}, {0, 33}}, seed))
				}
			}
		})
	}
}

// checkTiled runs b's attention per query and as a step with tiles forced
// (tiles for every sequence whose tiles hold four rows, per query for the
// others) and checks that they give the same bits, and that they are within
// float32 (F32 cache) or half-precision weight (F16 cache) rounding of the
// float64 reference.
func checkTiled(t *testing.T, name string, b *attnBench) {
	t.Helper()
	sh := b.r.shape(b.kv, 0)
	b.r.attentionRows(b.kv, &sh, b.seqs, b.n, false)
	rows := slices.Clone(b.r.attn)
	clear(b.r.attn)
	attnForce = attnTiles
	b.r.attention(b.kv, 0, b.seqs, b.n)
	attnForce = attnAuto
	if len(b.r.tiles) == 0 {
		t.Fatalf("%s: no tiles ran", name)
	}
	tiles := b.r.attn
	ref := b.ref()
	tol := 1e-5
	if b.kv.Config().DType == tensor.F16 {
		// the weights are rounded to half precision before an F16 V, as
		// llama.cpp's are
		tol = 2e-3
	}
	for i := range ref {
		if math.Float32bits(tiles[i]) != math.Float32bits(rows[i]) {
			t.Fatalf("%s: tiled output %d = %v, per-query %v", name, i, tiles[i], rows[i])
		}
		if e := math.Abs(float64(rows[i]) - ref[i]); !(e <= tol) {
			t.Fatalf("%s: output %d = %v, float64 reference %v", name, i, rows[i], ref[i])
		}
	}
}

// threadCPU returns the calling OS thread's CPU time (user and system).
func threadCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAttentionPrefill times one layer's attention of a prefill chunk
// (one sequence from position 0, F16 cache of 16-position pages, head dim
// 64) on one thread, per-query ("rows") against tiled: the 110m shape (12
// heads, 12 KV heads) and the 1b shape (32 heads, 4 KV heads); and one
// decode step of the 1b shape (one token after 511 in the cache; run it
// with -benchtime of a few hundred ops: the thread CPU clock is coarse). Beside the
// wall time it reports the thread's CPU time per op (cpu-ns/op), which
// other processes on a shared machine disturb less.
func BenchmarkAttentionPrefill(b *testing.B) {
	pool := kernels.NewPool(1)
	defer pool.Close()
	for _, sh := range []struct {
		name        string
		heads, kvh  int
		pos, tokens int
	}{{"110m/512", 12, 12, 0, 512}, {"110m/2048", 12, 12, 0, 2048}, {"1b/512", 32, 4, 0, 512},
		{"1b/decode@512", 32, 4, 511, 1}} {
		c := Config{Layers: 1, Heads: sh.heads, KVHeads: sh.kvh, HeadDim: 64}
		ab := newAttnBench(b, pool, c, 16, tensor.F16, 1, [][2]int{{sh.pos, sh.tokens}}, uint64(sh.tokens))
		ash := ab.r.shape(ab.kv, 0)
		for _, path := range []string{"rows", "tiles"} {
			b.Run(sh.name+"/"+path, func(b *testing.B) {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				cpu0 := threadCPU(b)
				for b.Loop() {
					if path == "rows" {
						ab.r.attentionRows(ab.kv, &ash, ab.seqs, ab.n, false)
					} else {
						ab.r.attentionTiled(ab.kv, &ash, ab.seqs)
					}
				}
				if path == "tiles" && len(ab.r.tiles) == 0 {
					b.Fatal("no tiles ran")
				}
				b.ReportMetric(float64(threadCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
