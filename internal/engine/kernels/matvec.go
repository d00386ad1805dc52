package kernels

import (
	"math"

	"tandem/internal/engine/tensor"
	"tandem/internal/invariant"
)

// MaxMatVecs is the most products one MatVecs call takes (a MoE layer's
// active experts' gate and up products, or their down products, in one
// round).
const MaxMatVecs = 24

// matvecGrain is the fewest rows a chunk of a threaded MatVecs round holds
// (whole panels of 16 rows, and a multiple of the many-row kernels' four).
const matvecGrain = 16

// MatVec is one product y = W·x of a MatVecs call: Out rows of W, of type
// Type and of the call's nIn elements each (row o at o·Type.RowBytes(nIn)),
// each dotted with the shared input x into Y[o].
type MatVec struct {
	Type tensor.Type
	W    []byte
	// Panels, for a Q8_0 W, is W packed by PackQ8_0: at the AVX512 level
	// the product then runs the panel kernel (see MatMulQ8Panels); nil:
	// the rows as they are.
	Panels []byte
	Out    int
	Y      []float32
	// X, when not nil, is this product's own input of nIn elements
	// instead of the call's shared x (the down products of a MoE layer's
	// experts, each of its own activation). Ops with the same X slice
	// share its quantization.
	X []float32
}

// matvecRowsFunc computes y[r] = row r of w (nrows rows of wrb bytes) ·
// the prepared activation, for nb blocks per row.
type matvecRowsFunc func(w []byte, wrb, nrows int, prep []byte, nb int, y []float32)

// matvecForm is a weight type's many-row matrix-vector kernel at a level:
// prepare turns a row made by QuantizeActivation into the kernel's layout
// (prepBytes(nb) bytes), rows dots many weight rows with it, bit for bit
// equal to vecDot row by row. A form without prepare takes the row as
// QuantizeActivation makes it.
type matvecForm struct {
	prepBytes func(nb int) int
	prepare   func(a []byte, nb int, dst []byte)
	rows      matvecRowsFunc
}

// matvecState holds one MatVecs call's arguments for the worker callback
// and the activation scratch reused between calls.
type matvecState struct {
	rowsFn func(lo, hi int) // bound once in init: no closure per call
	one    [1]MatVec        // MatMul's single product

	n     int
	ops   [MaxMatVecs]MatVec
	start [MaxMatVecs + 1]int // ops[i]'s rows are [start[i], start[i+1]) of the round
	wrb   [MaxMatVecs]int
	nb    [MaxMatVecs]int // weight blocks per row
	act   [MaxMatVecs][]byte
	dot   [MaxMatVecs]func(n int, w, a []byte) float32
	form  [MaxMatVecs]matvecRowsFunc
	panel [MaxMatVecs]bool // the op runs its Panels
	nIn   int
	// Activation scratch: stores[i] holds the layout keys[i] for the
	// first used of them in this call; raw is a quantized row before it is
	// prepared.
	stores [MaxMatVecs][]byte
	sizes  [MaxMatVecs]int
	keys   [MaxMatVecs]matvecKey
	used   int
	raw    []byte
}

// matvecKey names an activation layout: a vec dot type, prepared for a
// many-row form or not.
type matvecKey struct {
	vt       tensor.Type
	prepared bool
	panel    bool     // the panel kernel's one-token layout
	x        *float32 // the input quantized (MatVec.X), nil for the shared one
}

func (m *matvecState) init() { m.rowsFn = m.rows }

// MatVecs computes, for every op, op.Y[o] = op.W[o]·x for o < op.Out, where
// x holds nIn elements: several matrix-vector products of one input (a
// layer's Q, K and V, or its gate and up) in one round of the pool. x is
// quantized once per activation type, then the rows of all ops are split
// over the workers together, so the call wakes the helpers and waits for
// them once. Every output equals VecDot of its row and x bit for bit (the
// same as MatMul with one token), whatever the thread count. In steady
// state it allocates nothing.
//
// Calls on one Pool are serialized (see Pool). MatVecs panics when there
// are more than MaxMatVecs ops, an op's type is not Supported, nIn is not a
// multiple of its block size, or W, x or Y is too short.
func (p *Pool) MatVecs(nIn int, x []float32, ops ...MatVec) {
	if len(ops) > MaxMatVecs {
		invariant.Failf("kernels", "MatVecs: %d products, at most %d", len(ops), MaxMatVecs)
	}
	if len(x) < nIn {
		invariant.Failf("kernels", "MatVecs: %d inputs, want %d", len(x), nIn)
	}
	for _, op := range ops {
		checkMatVec(op, nIn)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.checkOpen()
	p.matVecs(nIn, x[:nIn], ops)
}

func checkMatVec(op MatVec, nIn int) {
	if op.X != nil && len(op.X) < nIn {
		invariant.Failf("kernels", "MatVecs: an op's own input has %d elements, want %d", len(op.X), nIn)
	}
	if !Supported(op.Type) {
		invariant.Failf("kernels", "MatVecs: weight type %s is not supported", op.Type)
	}
	wrb, err := op.Type.RowBytes(nIn)
	if err != nil || op.Out < 0 {
		invariant.Failf("kernels", "MatVecs: bad shape %s [%d, %d]: %v", op.Type, nIn, op.Out, err)
	}
	if len(op.W) < op.Out*wrb || len(op.Y) < op.Out {
		invariant.Failf("kernels", "MatVecs: %s [%d, %d] needs %d weight bytes and %d outputs; got %d, %d",
			op.Type, nIn, op.Out, op.Out*wrb, op.Out, len(op.W), len(op.Y))
	}
	if op.Panels != nil {
		if n := q8PanelsBytes(op.Out, nIn); op.Type != tensor.Q8_0 || len(op.Panels) < n {
			invariant.Failf("kernels", "MatVecs: %s [%d, %d] with %d panel bytes, want Q8_0 and %d", op.Type, nIn, op.Out, len(op.Panels), n)
		}
	}
}

// matVecs is MatVecs with the arguments checked and p.mu held.
func (p *Pool) matVecs(nIn int, x []float32, ops []MatVec) {
	m := &p.mv
	ks := active.Load()
	m.nIn, m.n, m.used = nIn, len(ops), 0
	defer m.release()
	rows, bytes := 0, 0
	for i, op := range ops {
		m.ops[i] = op
		m.start[i] = rows
		m.wrb[i], _ = op.Type.RowBytes(nIn)
		m.nb[i] = nIn / op.Type.BlockSize()
		m.dot[i] = ks.vecDot[op.Type]
		m.form[i] = nil
		key := matvecKey{vt: VecDotType(op.Type)}
		xi := x
		if op.X != nil && nIn > 0 {
			xi = op.X[:nIn]
			key.x = &xi[0]
		}
		f, ok := matvecFormFor(ks.level, op.Type)
		m.panel[i] = op.Panels != nil && panelsActive(ks) // checkMatVec: Panels only for Q8_0
		switch {
		case m.panel[i]:
			f = matvecForm{prepBytes: matvecPanelPrepBytes, prepare: prepareMatvecPanel}
			key.prepared, key.panel = true, true
		case ok:
			key.prepared = f.prepare != nil
			m.form[i] = f.rows
		}
		m.act[i] = m.activation(ks, key, f, xi, m.nb[i])
		rows += op.Out
		bytes += op.Out * m.wrb[i]
	}
	m.start[len(ops)] = rows
	if rows == 0 {
		return
	}
	if bytes < serialBytes || p.threads == 1 {
		m.rows(0, rows)
		return
	}
	grain := max(matvecGrain, (rows+p.threads*chunksPerThread-1)/(p.threads*chunksPerThread))
	grain = (grain + 15) &^ 15 // whole panels, where the ops' rows start on one
	p.run(rows, grain, m.rowsFn)
}

// activation returns x in the layout key names, quantizing (and
// preparing) it unless an earlier op of this call already did.
func (m *matvecState) activation(ks *kernelSet, key matvecKey, f matvecForm, x []float32, nb int) []byte {
	for i := range m.used {
		if m.keys[i] == key {
			return m.stores[i][:m.sizes[i]]
		}
	}
	j := m.used
	m.used++
	m.keys[j] = key
	var raw []byte
	if key.vt == tensor.F32 {
		raw = f32Bytes(x)
	} else {
		arb, _ := key.vt.RowBytes(len(x))
		if key.prepared {
			m.raw = grow8(m.raw, arb)
			raw = m.raw
		} else {
			m.stores[j] = grow8(m.stores[j], arb)
			raw = m.stores[j]
		}
		ks.quantize[key.vt](x, raw)
	}
	if !key.prepared {
		if key.vt == tensor.F32 {
			m.stores[j] = raw // the caller's x, dropped in release
		}
		m.sizes[j] = len(raw)
		return raw
	}
	n := f.prepBytes(nb)
	m.stores[j] = grow8(m.stores[j], n)
	f.prepare(raw, nb, m.stores[j])
	m.sizes[j] = n
	return m.stores[j][:n]
}

// grow8 returns b resliced to n bytes, reallocated when it is too small.
func grow8(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

// release drops the references to the caller's slices.
func (m *matvecState) release() {
	for i := range m.ops {
		m.ops[i] = MatVec{}
		m.act[i], m.dot[i], m.form[i], m.panel[i] = nil, nil, nil, false
		if m.keys[i].vt == tensor.F32 && !m.keys[i].prepared {
			m.stores[i] = nil // aliases the caller's x
		}
	}
}

// rows computes rows [lo, hi) of the concatenated ops.
func (m *matvecState) rows(lo, hi int) {
	for i := 0; i < m.n && lo < hi; i++ {
		s, e := m.start[i], m.start[i+1]
		if lo >= e {
			continue
		}
		a, b := lo-s, min(hi, e)-s
		op, wrb := &m.ops[i], m.wrb[i]
		if m.panel[i] {
			panelRows(op.Panels, m.nb[i], op.Out, a, b, m.act[i], op.Y)
		} else if f := m.form[i]; f != nil {
			f(op.W[a*wrb:b*wrb], wrb, b-a, m.act[i], m.nb[i], op.Y[a:b])
		} else {
			dot, act, nIn := m.dot[i], m.act[i], m.nIn
			for o := a; o < b; o++ {
				op.Y[o] = dot(nIn, op.W[o*wrb:(o+1)*wrb], act)
			}
		}
		lo = e
	}
}

// matvecPairBytes is the prepared Q8_0 activation of one block pair (see
// prepareMatvecQ8_0).
const matvecPairBytes = 144

// matvecQ8_0PrepBytes is the prepared size of an activation row of nb
// Q8_0 blocks.
func matvecQ8_0PrepBytes(nb int) int { return (nb + 1) / 2 * matvecPairBytes }

// prepareMatvecQ8_0 lays out the Q8_0 activation row a (nb blocks, as
// QuantizeActivation makes it) for the many-row Q8_0 kernel, one 144-byte
// record per block pair (the last one half empty when nb is odd): bytes
// 0-31 the even block's 32 quants and 32-63 the odd block's; bytes 64-127
// sixteen int32, -128 times the sum of each group of four quants in that
// order (the weights go through the kernel offset by 128 to unsigned bytes,
// and this takes the offset back out); bytes 128-135 the two blocks'
// scales as float32.
func prepareMatvecQ8_0(a []byte, nb int, dst []byte) {
	_ = a[nb*sizeQ8_0-1]
	dst = dst[:matvecQ8_0PrepBytes(nb)]
	clear(dst[len(dst)-matvecPairBytes:]) // the odd tail's unused half
	for b := range nb {
		blk := a[b*sizeQ8_0 : (b+1)*sizeQ8_0]
		rec := dst[b/2*matvecPairBytes : (b/2+1)*matvecPairBytes]
		h := b % 2
		copy(rec[32*h:32*h+32], blk[2:])
		for l := range 8 {
			var s int32
			for _, q := range blk[2+4*l : 6+4*l] {
				s += int32(int8(q))
			}
			putU32(rec[64+32*h+4*l:], uint32(-128*s))
		}
		d := tensor.FP16ToFP32(uint16(blk[0]) | uint16(blk[1])<<8)
		putU32(rec[128+4*h:], math.Float32bits(d))
	}
}

func putU32(b []byte, v uint32) {
	_ = b[3]
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

func getU32(b []byte) uint32 {
	_ = b[3]
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// matvecQ8_0Ref is the many-row Q8_0 kernel in plain Go, the reference the
// assembly is tested against: it reads the same prepared layout (the
// weights offset by 128, the stored correction added back) and sums the
// blocks in float64, so it agrees with the assembly to float32 rounding,
// not bit for bit.
func matvecQ8_0Ref(w []byte, wrb, nrows int, prep []byte, nb int, y []float32) {
	for r := range nrows {
		row := w[r*wrb:]
		var sum float64
		for b := range nb {
			blk := row[b*sizeQ8_0 : (b+1)*sizeQ8_0]
			rec := prep[b/2*matvecPairBytes:]
			h := b % 2
			var dot int32
			for l := range 8 {
				acc := int32(getU32(rec[64+32*h+4*l:]))
				for i := 4 * l; i < 4*l+4; i++ {
					acc += int32(blk[2+i]^0x80) * int32(int8(rec[32*h+i]))
				}
				dot += acc
			}
			dw := tensor.FP16ToFP32(uint16(blk[0]) | uint16(blk[1])<<8)
			da := math.Float32frombits(getU32(rec[128+4*h:]))
			sum += float64(dot) * float64(dw) * float64(da)
		}
		y[r] = float32(sum)
	}
}
