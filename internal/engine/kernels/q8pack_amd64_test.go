package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"tandem/internal/engine/tensor"
)

// needVNNI skips tb where q8PanelVNNI cannot run (it needs the AVX512
// level's AVX-512 F/BW/VL and VNNI).
func needVNNI(tb testing.TB) {
	tb.Helper()
	if err := CheckLevel(AVX512); err != nil {
		tb.Skipf("q8PanelVNNI needs AVX-512 VNNI: %v", err)
	}
}

// q8PanelGuard is the sentinel q8PanelVNNI must leave in outputs it does
// not own (rows past nrows, the gaps of ystride, past the end).
const q8PanelGuard = 0x7fc0dead

// TestQ8PanelVNNI checks the assembly against q8PanelRef bit for bit for 1
// to 8 tokens and 1 to 64 blocks, 1 to 16 rows (the rest padding): random
// quant bytes with all -128 and all 127 blocks on both sides, f16 weight
// scales with zeros, negatives and subnormals, and activation scales set
// to float32 zeros, negatives and subnormals as well as random normals.
// Outputs are written at a stride with gaps, into a slice with a guard
// after the end; every output the kernel does not own must keep its
// sentinel.
func TestQ8PanelVNNI(t *testing.T) {
	needVNNI(t)
	rng := rand.New(rand.NewPCG(81, 4))
	for nb := 1; nb <= 64; nb++ {
		for ntok := 1; ntok <= q8PanelMaxTok; ntok++ {
			nrows := 1 + (nb*q8PanelMaxTok+ntok)%q8PanelRows
			if ntok == nb%8+1 {
				nrows = q8PanelRows
			}
			_, _, panel, prep := q8PanelCase(rng, nrows, ntok, nb)
			for b := range nb {
				for tk := range ntok {
					off := b*ntok*q8ActTokBytes + 32*ntok + 4*tk
					switch rng.IntN(8) {
					case 0:
						binary.LittleEndian.PutUint32(prep[off:], uint32(rng.IntN(2))<<31) // ±0
					case 1:
						binary.LittleEndian.PutUint32(prep[off:], uint32(rng.IntN(2))<<31|uint32(1+rng.IntN(1<<23-1))) // subnormal
					case 2:
						binary.LittleEndian.PutUint32(prep[off:], math.Float32bits(-float32(rng.Float64())))
					}
				}
			}
			ystride := q8PanelRows + 3
			n := (ntok-1)*ystride + q8PanelRows + 8
			got := make([]float32, n)
			want := make([]float32, n)
			for i := range got {
				got[i] = math.Float32frombits(q8PanelGuard)
				want[i] = got[i]
			}
			q8Panel(panel, nb, prep, ntok, nrows, got[:(ntok-1)*ystride+nrows], ystride)
			q8PanelRef(panel, nb, prep, ntok, nrows, want, ystride)
			for i := range got {
				if g, w := math.Float32bits(got[i]), math.Float32bits(want[i]); g != w {
					t.Fatalf("nb %d, ntok %d, %d rows: y[%d] (token %d, row %d) = %#x (%g), reference %#x (%g)",
						nb, ntok, nrows, i, i/ystride, i%ystride, g, got[i], w, want[i])
				}
			}
		}
	}
}

// TestQ8PanelMatMulDriver checks the benchmark's driver (panels packed per
// call, token tiles of eight then the rest) against arithmetic A from the
// rows, bit for bit, on a shape with a partial panel and a partial tile.
func TestQ8PanelMatMulDriver(t *testing.T) {
	needVNNI(t)
	rng := rand.New(rand.NewPCG(81, 5))
	const nOut, nIn, nTok = 40, 320, 21
	nb := nIn / qk
	wrb := nb * sizeQ8_0
	w := randWeights(rng, tensor.Q8_0, nOut*nIn)
	x := randActivations(rng, nTok*nIn)
	var d q8PanelDriver
	got := make([]float32, nTok*nOut)
	d.matMul(w, nOut, nIn, x, nTok, got)
	act := make([]byte, nTok*wrb)
	QuantizeActivation(tensor.Q8_0, x, act)
	want := make([]float32, nTok*nOut)
	q8RowsA(w, wrb, nOut, nb, act, wrb, nTok, want, nOut)
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("y[%d] (token %d, row %d) = %g, arithmetic A %g", i, i/nOut, i%nOut, got[i], want[i])
		}
	}
}

// TestQ8PanelPackAsm checks the gather packer against packQ8_0Panel byte
// for byte, for 1 to 16 rows, odd and even block counts and rows with gaps
// between them, into a panel full of other bytes.
func TestQ8PanelPackAsm(t *testing.T) {
	needVNNI(t)
	rng := rand.New(rand.NewPCG(81, 6))
	for _, nb := range []int{1, 2, 3, 7, 64, 176} {
		for nrows := 1; nrows <= q8PanelRows; nrows++ {
			wrb := nb*sizeQ8_0 + rng.IntN(5)
			w := q8PanelRandRows(rng, nrows, nb, wrb)
			got := make([]byte, q8PanelBytes(nb)+64)
			want := make([]byte, len(got))
			for i := range got {
				got[i] = byte(rng.Uint32())
				want[i] = got[i]
			}
			packQ8_0PanelAsm(w, wrb, nrows, nb, got)
			packQ8_0Panel(w, wrb, nrows, nb, want)
			if i := firstDiff(got, want); i >= 0 {
				t.Fatalf("nb %d, %d rows: byte %d = %#x, packQ8_0Panel %#x", nb, nrows, i, got[i], want[i])
			}
		}
	}
}

// firstDiff returns the first index where a and b differ, or -1.
func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// q8PanelDriver is a one-thread matrix multiply through the panel kernel,
// for the benchmarks: scratch kept between calls. pack is the packer
// (packQ8_0Panel when nil).
type q8PanelDriver struct {
	act, prep, panel []byte
	pack             func(w []byte, wrb, nrows, nb int, dst []byte)
}

// prepare quantizes the nTok rows of x (nIn wide) and lays them out in
// tiles of eight tokens (the last one the rest), tile k at
// prep[8k·nb·q8ActTokBytes:].
func (d *q8PanelDriver) prepare(nIn int, x []float32, nTok int) {
	nb := nIn / qk
	arb := nb * sizeQ8_0
	if cap(d.act) < nTok*arb {
		d.act = make([]byte, nTok*arb)
		d.prep = make([]byte, q8ActBytes(nb, nTok))
	}
	d.act, d.prep = d.act[:nTok*arb], d.prep[:q8ActBytes(nb, nTok)]
	QuantizeActivation(tensor.Q8_0, x[:nTok*nIn], d.act)
	for t0 := 0; t0 < nTok; t0 += q8PanelMaxTok {
		nt := min(q8PanelMaxTok, nTok-t0)
		prepareQ8PanelAct(d.act[t0*arb:], arb, nt, nb, d.prep[q8ActBytes(nb, t0):])
	}
}

// tiles runs the kernel over every token tile for one packed panel of
// nrows rows starting at output row r0.
func (d *q8PanelDriver) tiles(panel []byte, nb, r0, nrows, nOut, nTok int, y []float32) {
	for t0 := 0; t0 < nTok; t0 += q8PanelMaxTok {
		nt := min(q8PanelMaxTok, nTok-t0)
		q8Panel(panel, nb, d.prep[q8ActBytes(nb, t0):], nt, nrows, y[t0*nOut+r0:], nOut)
	}
}

// matMul is MatMul for Q8_0 on one thread through the panel kernel, with
// every 16-row panel packed once per call: y[t·nOut+o] = row o · token t.
func (d *q8PanelDriver) matMul(w []byte, nOut, nIn int, x []float32, nTok int, y []float32) {
	nb := nIn / qk
	wrb := nb * sizeQ8_0
	d.prepare(nIn, x, nTok)
	if len(d.panel) < q8PanelBytes(nb) {
		d.panel = make([]byte, q8PanelBytes(nb))
	}
	for r0 := 0; r0 < nOut; r0 += q8PanelRows {
		nr := min(q8PanelRows, nOut-r0)
		if d.pack != nil {
			d.pack(w[r0*wrb:], wrb, nr, nb, d.panel)
		} else {
			packQ8_0Panel(w[r0*wrb:], wrb, nr, nb, d.panel)
		}
		d.tiles(d.panel, nb, r0, nr, nOut, nTok, y)
	}
}

// packAll packs the nOut rows of w into consecutive panels (the last one
// padded) in dst, which it returns grown as needed, with pack.
func packAll(pack func(w []byte, wrb, nrows, nb int, dst []byte), w []byte, nOut, nIn int, dst []byte) []byte {
	nb := nIn / qk
	wrb := nb * sizeQ8_0
	np := (nOut + q8PanelRows - 1) / q8PanelRows
	if len(dst) < np*q8PanelBytes(nb) {
		dst = make([]byte, np*q8PanelBytes(nb))
	}
	for p := range np {
		r0 := p * q8PanelRows
		pack(w[r0*wrb:], wrb, min(q8PanelRows, nOut-r0), nb, dst[p*q8PanelBytes(nb):])
	}
	return dst
}

// matMulPacked is matMul on panels packed beforehand (packAll's layout):
// what a persistent packed layout at model load would cost per call.
func (d *q8PanelDriver) matMulPacked(panels []byte, nOut, nIn int, x []float32, nTok int, y []float32) {
	nb := nIn / qk
	d.prepare(nIn, x, nTok)
	for r0 := 0; r0 < nOut; r0 += q8PanelRows {
		pb := r0 / q8PanelRows * q8PanelBytes(nb)
		d.tiles(panels[pb:pb+q8PanelBytes(nb)], nb, r0, min(q8PanelRows, nOut-r0), nOut, nTok, y)
	}
}

// q8PanelShapes are the benchmarks' shapes, rows x inputs (110m and 1b).
var q8PanelShapes = []struct{ nOut, nIn int }{{2048, 2048}, {5632, 2048}, {768, 768}, {2048, 768}}

// BenchmarkQ8Panel compares one-thread Q8_0 products of 512 and 16 tokens:
// "old" is MatMul (AVX-512, its eight-token Q8_0 tile), "panel" the driver
// above with every panel packed once per call (packing included) by the Go
// packer, "panelasm" the same with the gather packer, "prepacked" the
// driver on panels packed beforehand, "prep" the activation side alone
// (quantization and layout), and "pack" and "packasm" the packing alone
// (all panels of the matrix once). cpu-ns/op is the thread's
// CPU time per call.
func BenchmarkQ8Panel(b *testing.B) {
	needVNNI(b)
	defer SetLevel(AVX512)()
	p := NewPool(1)
	defer p.Close()
	for _, nTok := range []int{512, 16} {
		for _, sh := range q8PanelShapes {
			rng := rand.New(rand.NewPCG(7, 7))
			w := randWeights(rng, tensor.Q8_0, sh.nOut*sh.nIn)
			x := randActivations(rng, nTok*sh.nIn)
			y := make([]float32, nTok*sh.nOut)
			var d q8PanelDriver
			da := q8PanelDriver{pack: packQ8_0PanelAsm}
			panels := packAll(packQ8_0Panel, w, sh.nOut, sh.nIn, nil)
			name := fmt.Sprintf("%dx%d/tok%d", sh.nOut, sh.nIn, nTok)
			b.Run(name+"/old", func(b *testing.B) {
				loopCPU(b, func() { p.MatMul(tensor.Q8_0, w, sh.nOut, sh.nIn, x, nTok, y) })
			})
			b.Run(name+"/panel", func(b *testing.B) {
				loopCPU(b, func() { d.matMul(w, sh.nOut, sh.nIn, x, nTok, y) })
			})
			b.Run(name+"/panelasm", func(b *testing.B) {
				loopCPU(b, func() { da.matMul(w, sh.nOut, sh.nIn, x, nTok, y) })
			})
			b.Run(name+"/prepacked", func(b *testing.B) {
				loopCPU(b, func() { d.matMulPacked(panels, sh.nOut, sh.nIn, x, nTok, y) })
			})
			b.Run(name+"/prep", func(b *testing.B) {
				loopCPU(b, func() { d.prepare(sh.nIn, x, nTok) })
			})
			if nTok == 512 { // packing does not depend on the tokens
				b.Run(fmt.Sprintf("%dx%d/pack", sh.nOut, sh.nIn), func(b *testing.B) {
					loopCPU(b, func() { packAll(packQ8_0Panel, w, sh.nOut, sh.nIn, panels) })
				})
				b.Run(fmt.Sprintf("%dx%d/packasm", sh.nOut, sh.nIn), func(b *testing.B) {
					loopCPU(b, func() { packAll(packQ8_0PanelAsm, w, sh.nOut, sh.nIn, panels) })
				})
			}
		}
	}
}

// BenchmarkQ8PanelMatVec compares one-token products (decode) on one
// thread: "old" is MatVecs (the many-row Q8_0 matrix-vector kernel), "panel"
// the panel kernel with one token on panels packed beforehand (activation
// quantized and laid out per call, as MatVecs does). Weights (and panels)
// are cycled through 256 MiB of copies so they come from memory, except in
// the L2 case; the byte rate is of weight bytes (a panel is as large as its
// rows).
func BenchmarkQ8PanelMatVec(b *testing.B) {
	needVNNI(b)
	defer SetLevel(AVX512)()
	p := NewPool(1)
	defer p.Close()
	type shape struct {
		name      string
		nOut, nIn int
		inCache   bool
	}
	for _, sh := range []shape{
		{"768x768-L2", 768, 768, true},
		{"2048x2048", 2048, 2048, false},
		{"5632x2048", 5632, 2048, false},
		{"2048x5632", 2048, 5632, false},
	} {
		rng := rand.New(rand.NewPCG(15, 15))
		x := randActivations(rng, sh.nIn)
		wrb := sh.nIn / qk * sizeQ8_0
		copies := max(1, (256<<20)/(sh.nOut*wrb))
		if sh.inCache {
			copies = 1
		}
		one := randWeights(rng, tensor.Q8_0, sh.nOut*sh.nIn)
		y := make([]float32, sh.nOut)
		b.Run(sh.name+"/old", func(b *testing.B) {
			ws := make([][]byte, copies)
			for i := range ws {
				ws[i] = append([]byte(nil), one...)
			}
			b.SetBytes(int64(sh.nOut * wrb))
			i := 0
			loopCPU(b, func() {
				w := ws[i%copies]
				i++
				p.MatVecs(sh.nIn, x, MatVec{Type: tensor.Q8_0, W: w, Out: sh.nOut, Y: y})
			})
		})
		b.Run(sh.name+"/panel", func(b *testing.B) {
			packed := packAll(packQ8_0Panel, one, sh.nOut, sh.nIn, nil)
			ps := make([][]byte, copies)
			for i := range ps {
				ps[i] = append([]byte(nil), packed...)
			}
			b.SetBytes(int64(sh.nOut * wrb))
			var d q8PanelDriver
			i := 0
			loopCPU(b, func() {
				panels := ps[i%copies]
				i++
				d.matMulPacked(panels, sh.nOut, sh.nIn, x, 1, y)
			})
		})
	}
}
