package model

import "unsafe"

// spanOf returns one Linear whose rows are those of ws[0], then ws[1], ...,
// reading their data in place, when the weights share a type and input
// width and their data lie back to back in memory: the tensors follow each
// other in the data section of one GGUF file (Q, K and V; gate and up, as
// converters usually write them), with no alignment padding between them.
// Otherwise it returns the zero Linear. The product of the span equals the
// separate products row for row, bit for bit (kernels.Pool.MatMul's
// outputs do not depend on the other rows), so a multi-token step may run
// one product and one pool round where it would run several.
//
// The span covers only bytes of the weights themselves, which the
// callers' tensors all take from one mapping (FromFile).
func spanOf(ws ...*Linear) Linear {
	w0 := ws[0]
	if len(w0.Data) == 0 {
		return Linear{}
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(w0.Data)))
	bytes, out := 0, 0
	for _, w := range ws {
		if len(w.Data) == 0 || w.Type != w0.Type || w.In != w0.In ||
			uintptr(unsafe.Pointer(unsafe.SliceData(w.Data))) != base+uintptr(bytes) {
			return Linear{}
		}
		bytes += len(w.Data)
		out += w.Out
	}
	return Linear{Name: w0.Name + "+", Type: w0.Type, In: w0.In, Out: out, Data: unsafe.Slice(unsafe.SliceData(w0.Data), bytes)}
}

// qkvWeights returns the one matrix that gives a step of n tokens its
// Q|K|V rows together (the file's fused attn_qkv, or the Q, K and V
// tensors' span for a multi-token step), or nil when the three run apart.
func (ly *Layer) qkvWeights(n int) *Linear {
	switch {
	case ly.QKV.Data != nil:
		return &ly.QKV
	case n > 1 && ly.qkvSpan.Data != nil:
		return &ly.qkvSpan
	}
	return nil
}

// gateUpWeights returns the one matrix that gives a step of n tokens its
// gate|up rows together (phi3's fused ffn_up, or the gate and up tensors'
// span for a multi-token step), or nil when the two run apart.
func (ly *Layer) gateUpWeights(n int) *Linear {
	switch {
	case ly.Gate.Data == nil:
		return &ly.Up
	case n > 1 && ly.gateUpSpan.Data != nil:
		return &ly.gateUpSpan
	}
	return nil
}
