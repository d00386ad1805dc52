package kernels

import "tandem/internal/invariant"

// rowsAsm is a level's assembly for the many-row attention forms; both take
// a row length that is a positive multiple of 16 and at least one row.
type rowsAsm struct {
	dotF16  func(q, rows *uint16, stride, nrows, n int, scale float32, dst *float32)
	axpyF16 func(w *float32, rows *uint16, stride, nrows int, y *float32, n int)
}

// bindRows sets k's many-row forms: k's assembly where it has some and the
// row length suits it, else k's one-row kernels called row by row.
func bindRows(k *kernelSet) {
	dot, axpy, asm := k.dotF16, k.axpyF16, k.rowsAsm
	k.dotF16Rows = func(q, rows []uint16, stride int, scale float32, dst []float32) {
		if asm != nil && len(q)%16 == 0 && len(q) > 0 && len(dst) > 0 {
			asm.dotF16(&q[0], &rows[0], stride, len(dst), len(q), scale, &dst[0])
			return
		}
		for i := range dst {
			dst[i] = dot(q, rows[i*stride:i*stride+len(q)]) * scale
		}
	}
	k.axpyF16Rows = func(w []float32, rows []uint16, stride int, y []float32) {
		if asm != nil && len(y)%16 == 0 && len(y) > 0 && len(w) > 0 {
			asm.axpyF16(&w[0], &rows[0], stride, len(w), &y[0], len(y))
			return
		}
		for i, a := range w {
			axpy(a, rows[i*stride:i*stride+len(y)], y)
		}
	}
}

// checkRows panics unless rows holds n rows of m elements stride apart.
func checkRows(op string, rows []uint16, stride, n, m int) {
	if n > 0 && (stride < m || len(rows) < (n-1)*stride+m) {
		invariant.Failf("kernels", "%s: %d rows of %d elements at stride %d need %d elements, got %d",
			op, n, m, stride, (n-1)*stride+m, len(rows))
	}
}

// DotF16Rows sets dst[i] = q·rows[i·stride:] · scale for every i <
// len(dst): the scores of one query against len(dst) keys stored stride
// elements apart (a KV page's rows for one head). A row's result depends
// only on q, that row and scale (not on the other rows or their number);
// it equals DotF16's up to float32 rounding (the AVX-512 kernel sums in
// its own order).
func DotF16Rows(q, rows []uint16, stride int, scale float32, dst []float32) {
	checkRows("DotF16Rows", rows, stride, len(dst), len(q))
	active.Load().dotF16Rows(q, rows, stride, scale, dst)
}

// AxpyF16Rows adds w[i]·rows[i·stride : i·stride+len(y)] to y for i = 0, 1,
// ... in turn: the weighted sum of len(w) value rows stored stride elements
// apart. Results equal AxpyF16 called row by row, bit for bit.
func AxpyF16Rows(w []float32, rows []uint16, stride int, y []float32) {
	checkRows("AxpyF16Rows", rows, stride, len(w), len(y))
	active.Load().axpyF16Rows(w, rows, stride, y)
}
