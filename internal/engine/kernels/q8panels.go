package kernels

import (
	"tandem/internal/engine/tensor"
	"tandem/internal/invariant"
)

// Packed Q8_0 matrices (the panels of q8pack.go) in MatMul and MatVecs.
//
// At the AVX512 level a Q8_0 matrix packed by PackQ8_0 runs through the
// panel kernel, lane = output: every product of a row and a token is
// "arithmetic A" (the exact int32 dot of each block, then one float32
// product and one float32 sum per block, in block order), whatever the
// token count, the thread count and the other rows and tokens of the
// call. MatMulQ8Panels of any token count and MatVecs with Panels agree
// bit for bit; they do not agree with VecDot or with MatMul of the same
// rows unpacked (another rounding of the same sum). A model therefore packs
// every Q8_0 matrix it multiplies, or none. Below AVX512 the panels are
// ignored and the rows run as MatMul runs them.

// q8PanelKernel and q8Packer are the panel kernel and packer of this
// architecture (q8panels_amd64.go), nil where it has none.
var (
	q8PanelKernel func(panel []byte, nb int, act []byte, ntok, nrows int, y []float32, ystride int)
	q8Packer      func(w []byte, wrb, nrows, nb int, dst []byte)
)

// PanelsUsable reports whether this CPU runs packed Q8_0 panels (its best
// level is AVX512): only then is PackQ8_0 worth its memory.
func PanelsUsable() bool { return q8PanelKernel != nil && MaxLevel() == AVX512 }

// panelsActive reports whether the kernels run packed panels now.
func panelsActive(ks *kernelSet) bool { return q8PanelKernel != nil && ks.level == AVX512 }

// q8PanelsBytes is the size of a matrix of nOut rows of nIn elements
// packed by PackQ8_0.
func q8PanelsBytes(nOut, nIn int) int {
	return (nOut + q8PanelRows - 1) / q8PanelRows * q8PanelBytes(nIn/qk)
}

// PackQ8_0 returns the nOut Q8_0 rows of nIn elements in w (row o at
// o·RowBytes(nIn)) packed in panels of 16 rows for MatMulQ8Panels and
// MatVec.Panels: ceil(nOut/16)·544·nIn/32 bytes, as many as the rows
// (the last panel padded). It returns nil where PanelsUsable is false.
func PackQ8_0(w []byte, nOut, nIn int) []byte {
	if !PanelsUsable() || nOut <= 0 {
		return nil
	}
	wrb, err := tensor.Q8_0.RowBytes(nIn)
	if err != nil || len(w) < nOut*wrb {
		invariant.Failf("kernels", "PackQ8_0: bad shape [%d, %d] for %d bytes: %v", nIn, nOut, len(w), err)
	}
	nb := nIn / qk
	pb := q8PanelBytes(nb)
	dst := make([]byte, q8PanelsBytes(nOut, nIn))
	for pi := range len(dst) / pb {
		r0 := pi * q8PanelRows
		q8Packer(w[r0*wrb:], wrb, min(q8PanelRows, nOut-r0), nb, dst[pi*pb:(pi+1)*pb])
	}
	return dst
}

// PanelRows returns the panels of rows [lo, hi) of a matrix of nIn-element
// rows packed by PackQ8_0, when lo and hi are multiples of 16 (or hi the
// last row): a product over those rows alone, sharing the memory; nil
// when they are not.
func PanelRows(panels []byte, nIn, lo, hi, nOut int) []byte {
	if panels == nil || lo%q8PanelRows != 0 || (hi%q8PanelRows != 0 && hi != nOut) {
		return nil
	}
	pb := q8PanelBytes(nIn / qk)
	return panels[lo/q8PanelRows*pb : (hi+q8PanelRows-1)/q8PanelRows*pb]
}

// panelState holds one MatMulQ8Panels call's arguments for the worker
// callbacks and its scratch, reused between calls.
type panelState struct {
	rowsFn, stageFn func(lo, hi int) // bound once in init: no closure per call

	panels          []byte
	pb, nb          int // panel bytes; blocks per row
	nOut, nIn, nTok int
	arb             int // bytes of a quantized activation row
	x, y            []float32
	quantize        func(src []float32, dst []byte)
	act, prep       []byte // quantized rows; prepared tiles of eight tokens
	tileBytes       int
}

func (s *panelState) init() {
	s.rowsFn = s.rows
	s.stageFn = s.stage
}

// MatMulQ8Panels is MatMul for a Q8_0 matrix: w holds its rows and panels
// the same rows packed by PackQ8_0. At the AVX512 level it runs the panels
// (see above): it quantizes x once, lays each tile of up to eight tokens
// out for the kernel, then splits the panels over the workers, each panel
// dotted with every tile while it is in cache. Elsewhere, or with nil
// panels, it is MatMul(Q8_0, w, ...).
func (p *Pool) MatMulQ8Panels(w, panels []byte, nOut, nIn int, x []float32, nTok int, y []float32) {
	ks := active.Load()
	if panels == nil || !panelsActive(ks) {
		p.MatMul(tensor.Q8_0, w, nOut, nIn, x, nTok, y)
		return
	}
	wrb, err := tensor.Q8_0.RowBytes(nIn)
	nb := nIn / qk
	pb := q8PanelBytes(nb)
	np := (nOut + q8PanelRows - 1) / q8PanelRows
	if err != nil || nOut < 0 || nTok < 0 || len(panels) < q8PanelsBytes(nOut, nIn) || len(x) < nTok*nIn || len(y) < nTok*nOut {
		invariant.Failf("kernels", "MatMulQ8Panels: bad shape [%d, %d] × %d tokens: %d panel bytes, %d inputs, %d outputs (%v)",
			nIn, nOut, nTok, len(panels), len(x), len(y), err)
	}
	if nOut == 0 || nTok == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.checkOpen()
	if nTok == 1 {
		p.matVecOne(nIn, x, MatVec{Type: tensor.Q8_0, W: w, Panels: panels, Out: nOut, Y: y[:nOut]})
		return
	}
	s := &p.pp
	s.panels, s.pb, s.nb, s.nOut, s.nIn, s.nTok = panels, pb, nb, nOut, nIn, nTok
	s.arb = wrb // a quantized activation row is a Q8_0 row
	s.x, s.y = x, y
	s.quantize = ks.quantize[tensor.Q8_0]
	defer func() { s.panels, s.x, s.y, s.quantize = nil, nil, nil, nil }()
	tiles := (nTok + q8PanelMaxTok - 1) / q8PanelMaxTok
	s.tileBytes = q8ActBytes(nb, q8PanelMaxTok)
	s.act = grow8(s.act, nTok*s.arb)
	s.prep = grow8(s.prep, tiles*s.tileBytes)

	if nTok*nIn < quantSerialElems {
		s.stage(0, tiles)
	} else {
		p.run(tiles, 1, s.stageFn)
	}
	if nOut*wrb*nTok < serialBytes {
		s.rows(0, np)
		return
	}
	grain := 1 // a panel against every tile: tens of µs at least
	if nTok < 4 {
		grain = max(1, np/(p.threads*chunksPerThread))
	}
	p.run(np, grain, s.rowsFn)
}

// stage quantizes and lays out the tokens of tiles [lo, hi).
func (s *panelState) stage(lo, hi int) {
	for k := lo; k < hi; k++ {
		t0 := k * q8PanelMaxTok
		nt := min(q8PanelMaxTok, s.nTok-t0)
		a := s.act[t0*s.arb : (t0+nt)*s.arb]
		s.quantize(s.x[t0*s.nIn:(t0+nt)*s.nIn], a)
		prepareQ8PanelAct(a, s.arb, nt, s.nb, s.prep[k*s.tileBytes:(k+1)*s.tileBytes])
	}
}

// rows computes the outputs of panels [lo, hi) for every token.
func (s *panelState) rows(lo, hi int) {
	for pi := lo; pi < hi; pi++ {
		r0 := pi * q8PanelRows
		nrows := min(q8PanelRows, s.nOut-r0)
		panel := s.panels[pi*s.pb : (pi+1)*s.pb]
		for t0 := 0; t0 < s.nTok; t0 += q8PanelMaxTok {
			nt := min(q8PanelMaxTok, s.nTok-t0)
			k := t0 / q8PanelMaxTok
			q8PanelKernel(panel, s.nb, s.prep[k*s.tileBytes:(k+1)*s.tileBytes], nt, nrows, s.y[t0*s.nOut+r0:], s.nOut)
		}
	}
}

// matvecPanelPrepBytes and prepareMatvecPanel are the one-token activation
// layout of the panel kernel, as a matvecForm's.
func matvecPanelPrepBytes(nb int) int { return q8ActBytes(nb, 1) }

func prepareMatvecPanel(a []byte, nb int, dst []byte) {
	prepareQ8PanelAct(a, nb*sizeQ8_0, 1, nb, dst)
}

// panelRows computes rows [a, b) of a packed product with one token into
// y[a:b]: whole panels straight into y, a panel the range cuts through
// into a scratch row first.
func panelRows(panels []byte, nb, out, a, b int, act []byte, y []float32) {
	pb := q8PanelBytes(nb)
	for pi := a / q8PanelRows; pi*q8PanelRows < b; pi++ {
		r0 := pi * q8PanelRows
		nrows := min(q8PanelRows, out-r0)
		panel := panels[pi*pb : (pi+1)*pb]
		if r0 >= a && r0+nrows <= b {
			q8PanelKernel(panel, nb, act, 1, nrows, y[r0:], 1)
			continue
		}
		var tmp [q8PanelRows]float32
		q8PanelKernel(panel, nb, act, 1, nrows, tmp[:], 1)
		for r := max(a, r0); r < min(b, r0+nrows); r++ {
			y[r] = tmp[r-r0]
		}
	}
}
