package kernels

import (
	"tandem/internal/engine/tensor"
	"tandem/internal/invariant"
)

const (
	// groupBytes is the weight bytes MatMul keeps hot (L1-sized) while it
	// dots them with every token of a batch.
	groupBytes = 24 << 10
	// serialBytes is the work (weight bytes × tokens) under which MatMul
	// runs on the calling goroutine alone: waking helpers costs more.
	serialBytes = 64 << 10
	// quantSerialElems is the activation size under which quantization runs
	// on the calling goroutine alone.
	quantSerialElems = 1 << 14
)

// matmulState holds one MatMul call's arguments for the worker callbacks and
// the activation scratch reused between calls.
type matmulState struct {
	// Bound once in init, so MatMul allocates no closures.
	rowsFn  func(lo, hi int)
	quantFn func(lo, hi int)
	stageFn func(lo, hi int)

	dot       func(n int, w, a []byte) float32
	dot4      dot4Func     // nil: one token at a time
	dot4Rows  dot4RowsFunc // nil: dot4 row by row
	dot8      dot4RowsFunc // nil: no eight-token tiles
	n8        int          // eight-token tiles (tokens [0, 8·n8))
	n4        int          // four-token tiles after them
	prep8     []byte       // their prepared data
	prep8Size int          // bytes of prep8 per tile
	prep8Mem  []byte
	signedQ8  bool   // prepare Q8_0 tiles with prepareTile8Signed
	prep      []byte // prepared data of the four-token tiles
	tileSize  int    // bytes of prep per tile
	nb        int    // activation blocks per row
	vt        tensor.Type
	quantize  func(src []float32, dst []byte)
	w         []byte
	wrb       int // weight row bytes
	nOut      int
	nIn       int
	x         []float32
	nTok      int
	y         []float32
	act       []byte // quantized activations, nTok rows of arb bytes
	arb       int
	group     int // rows per cache group
	qBlock    int // elements per activation block
	qBytes    int // bytes per activation block
	actStore  []byte
	prepStore []byte
}

func (m *matmulState) init() {
	m.rowsFn = m.rows
	m.quantFn = m.quant
	m.stageFn = m.stage
}

// MatMul computes y[t*nOut+o] = W[o]·x[t*nIn:(t+1)*nIn] for o < nOut and
// t < nTok, where w holds nOut rows of nIn elements of type wt (row o at
// o·wt.RowBytes(nIn)). It quantizes x once (to VecDotType(wt), in
// parallel, tile by tile with the tiles' prepared data), then splits the
// rows over the workers; for nTok > 1 each group of rows (about 24 KiB) is
// dotted with every token while it is in cache, eight tokens per call
// where the level has an eight-token kernel for wt, then four where it has
// a four-token one. Every output equals VecDot of its row and token bit for bit, so the
// results depend neither on the thread count nor on the other tokens of the
// batch. The scratch is kept between calls: in steady state MatMul
// allocates nothing.
//
// Calls on one Pool are serialized (see Pool). MatMul panics when wt is not
// Supported, nIn is not a multiple of its block size, or w, x or y is too
// short: shapes are checked against the file when a model is loaded.
func (p *Pool) MatMul(wt tensor.Type, w []byte, nOut, nIn int, x []float32, nTok int, y []float32) {
	if !Supported(wt) {
		invariant.Failf("kernels", "MatMul: weight type %s is not supported", wt)
	}
	wrb, err := wt.RowBytes(nIn)
	if err != nil || nOut < 0 || nTok < 0 {
		invariant.Failf("kernels", "MatMul: bad shape %s [%d, %d] × %d tokens: %v", wt, nIn, nOut, nTok, err)
	}
	if len(w) < nOut*wrb || len(x) < nTok*nIn || len(y) < nTok*nOut {
		invariant.Failf("kernels", "MatMul: %s [%d, %d] × %d tokens needs %d weight bytes, %d inputs, %d outputs; got %d, %d, %d",
			wt, nIn, nOut, nTok, nOut*wrb, nTok*nIn, nTok*nOut, len(w), len(x), len(y))
	}
	if nOut == 0 || nTok == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.checkOpen()
	if nTok == 1 {
		// one token: the matrix-vector path (many-row kernels, one round)
		p.matVecOne(nIn, x, MatVec{Type: wt, W: w, Out: nOut, Y: y[:nOut]})
		return
	}

	m := &p.mm
	ks := active.Load()
	vt := VecDotType(wt)
	arb, _ := vt.RowBytes(nIn)
	m.dot = ks.vecDot[wt]
	m.w, m.wrb, m.nOut, m.nIn = w, wrb, nOut, nIn
	m.x, m.nTok, m.y, m.arb = x, nTok, y, arb
	defer m.release()

	// The tiles: eight tokens at a time where the level has an eight-token
	// kernel for wt, then four at a time, then one.
	m.dot4, m.dot4Rows, m.dot8, m.n8, m.n4, m.tileSize = nil, nil, nil, 0, 0, 0
	if nb := nIn / vt.BlockSize(); nTok >= 8 && ks.dot8[wt] != nil && prep8Bytes(vt, nb) > 0 {
		m.dot8, m.n8, m.nb, m.vt = ks.dot8[wt], nTok/8, nb, vt
		m.signedQ8 = ks.signedQ8Tile8
		m.prep8Size = prep8Bytes(vt, nb)
		if n := m.n8 * m.prep8Size; cap(m.prep8Mem) < n {
			m.prep8Mem = make([]byte, n)
		}
		m.prep8 = m.prep8Mem[:m.n8*m.prep8Size]
	}
	if nTok-8*m.n8 >= 4 && ks.dot4[wt] != nil {
		m.dot4 = ks.dot4[wt]
		m.dot4Rows = ks.dot4Rows[wt]
		m.n4 = (nTok - 8*m.n8) / 4
		m.sizeTiles(vt)
	}

	m.quantize = nil
	if vt == tensor.F32 {
		m.act = f32Bytes(x[:nTok*nIn])
	} else {
		if cap(m.actStore) < nTok*arb {
			m.actStore = make([]byte, nTok*arb)
		}
		m.act = m.actStore[:nTok*arb]
		m.quantize = ks.quantize[vt]
		m.qBlock = vt.BlockSize()
		m.qBytes = vt.TypeSize()
	}
	// Quantizing and preparing go tile by tile in one round, so each tile's
	// rows are prepared while they are in cache.
	switch units := m.stageUnits(); {
	case nTok*nIn < quantSerialElems:
		m.stage(0, units)
	case m.n8+m.n4 > 0:
		p.run(units, 1, m.stageFn)
	case vt != tensor.F32:
		// No tiles: the nTok rows are whole blocks, so they quantize as
		// one row, split by blocks.
		grain := (quantSerialElems/2 + m.qBlock - 1) / m.qBlock
		p.run(nTok*nIn/m.qBlock, grain, m.quantFn)
	}

	m.group = max(1, groupBytes/max(wrb, 1))
	if nOut*wrb*nTok < serialBytes {
		m.rows(0, nOut)
		return
	}
	if nTok >= 4 {
		// A batch takes small chunks: a group is then microseconds of work
		// against one atomic claim, and the threads end within a chunk of
		// each other instead of within 1/8 of the matrix (two threads).
		// A chunk is the group rounded up to 16 rows (rows walks it group
		// by group), so where each token's outputs start on a cache line
		// (nOut a multiple of 16, y line-aligned, as the model's are) two
		// threads never write one line.
		p.run(nOut, (m.group+15)&^15, m.rowsFn)
		return
	}
	// Chunks are whole groups, about chunksPerThread per thread.
	groups := (nOut + m.group - 1) / m.group
	perChunk := max(1, groups/(p.threads*chunksPerThread))
	p.run(nOut, perChunk*m.group, m.rowsFn)
}

// release drops the references to the caller's slices.
func (m *matmulState) release() {
	m.dot, m.dot4, m.dot4Rows, m.dot8, m.quantize = nil, nil, nil, nil, nil
	m.prep8 = nil
	m.prep = nil
	m.w, m.x, m.y, m.act = nil, nil, nil, nil
}

// sizeTiles sets up m.prep for the four-token kernels' prepared data.
func (m *matmulState) sizeTiles(vt tensor.Type) {
	m.vt = vt
	m.nb = m.nIn / vt.BlockSize()
	m.tileSize = prepTileBytes(vt, m.nb)
	n := m.nTok / 4 * m.tileSize
	if cap(m.prepStore) < n {
		m.prepStore = make([]byte, n)
	}
	m.prep = m.prepStore[:n]
}

// stageUnits returns the units of work of stage: one per eight-token and
// four-token tile, and one for the tokens after them, if any.
func (m *matmulState) stageUnits() int {
	n := m.n8 + m.n4
	if 8*m.n8+4*m.n4 < m.nTok {
		n++
	}
	return n
}

// stage quantizes the activation rows of units [lo, hi) (see stageUnits)
// and prepares their tiles.
func (m *matmulState) stage(lo, hi int) {
	for u := lo; u < hi; u++ {
		switch {
		case u < m.n8:
			t := 8 * u
			m.quantRows(t, t+8)
			prepareTile8At(m.signedQ8, m.vt, m.act[t*m.arb:(t+8)*m.arb], m.arb, m.nb, m.prep8[u*m.prep8Size:(u+1)*m.prep8Size])
		case u < m.n8+m.n4:
			t := 8*m.n8 + 4*(u-m.n8)
			m.quantRows(t, t+4)
			if m.tileSize > 0 {
				prepareTile(m.vt, m.act[t*m.arb:(t+4)*m.arb], m.arb, m.nb, m.prep[t/4*m.tileSize:(t/4+1)*m.tileSize])
			}
		default:
			m.quantRows(8*m.n8+4*m.n4, m.nTok)
		}
	}
}

// quantRows quantizes the activation rows of tokens [lo, hi).
func (m *matmulState) quantRows(lo, hi int) {
	if m.quantize != nil {
		m.quantize(m.x[lo*m.nIn:hi*m.nIn], m.act[lo*m.arb:hi*m.arb])
	}
}

// quant quantizes activation blocks [lo, hi) of the concatenated rows.
func (m *matmulState) quant(lo, hi int) {
	m.quantize(m.x[lo*m.qBlock:hi*m.qBlock], m.act[lo*m.qBytes:hi*m.qBytes])
}

// rows computes the outputs of weight rows [lo, hi) for every token, group
// by group: four tokens at a time with dot4 where the level has it, the rest
// one at a time (the results are the same bit for bit either way).
func (m *matmulState) rows(lo, hi int) {
	dot, w, wrb, act, arb, nIn, nOut, y := m.dot, m.w, m.wrb, m.act, m.arb, m.nIn, m.nOut, m.y
	for g := lo; g < hi; g += m.group {
		ge := min(g+m.group, hi)
		t := 0
		for ; t < 8*m.n8; t += 8 {
			m.dot8(w[g*wrb:ge*wrb], wrb, ge-g, m.prep8[t/8*m.prep8Size:(t/8+1)*m.prep8Size], m.nb, y[t*nOut+g:], nOut)
		}
		if m.dot4 != nil {
			for ; t+4 <= m.nTok; t += 4 {
				a, prep := act[t*arb:(t+4)*arb], m.prep[t/4*m.tileSize:(t/4+1)*m.tileSize]
				if m.dot4Rows != nil {
					m.dot4Rows(w[g*wrb:ge*wrb], wrb, ge-g, prep, m.nb, y[t*nOut+g:], nOut)
					continue
				}
				for o := g; o < ge; o++ {
					m.dot4(w[o*wrb:(o+1)*wrb], a, arb, prep, m.nb, y[t*nOut+o:], nOut)
				}
			}
		}
		for ; t < m.nTok; t++ {
			a := act[t*arb : (t+1)*arb]
			yt := y[t*nOut : (t+1)*nOut]
			for o := g; o < ge; o++ {
				yt[o] = dot(nIn, w[o*wrb:(o+1)*wrb], a)
			}
		}
	}
}

// matVecOne runs op, one token's product, as MatVecs does (p.mu held).
func (p *Pool) matVecOne(nIn int, x []float32, op MatVec) {
	p.mv.one[0] = op
	p.matVecs(nIn, x[:nIn], p.mv.one[:])
	p.mv.one[0] = MatVec{}
}
