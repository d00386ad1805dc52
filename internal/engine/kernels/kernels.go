package kernels

import (
	"tandem/internal/engine/tensor"
	"tandem/internal/invariant"
)

// VecDotType returns the type an activation row is converted to before it
// is dotted with weight rows of type wt (ggml's vec_dot_type): F32, F16 and
// BF16 keep their own type, Q8_0/Q4_0/Q5_0/IQ4_NL/MXFP4 use Q8_0, Q4_1/Q5_1
// use Q8_1 and the K-quants and IQ4_XS use Q8_K. It returns wt itself for a
// type the kernels do not support (see Supported).
func VecDotType(wt tensor.Type) tensor.Type {
	switch wt {
	case tensor.Q8_0, tensor.Q4_0, tensor.Q5_0, tensor.IQ4_NL, tensor.MXFP4:
		return tensor.Q8_0
	case tensor.Q4_1, tensor.Q5_1:
		return tensor.Q8_1
	case tensor.Q2_K, tensor.Q3_K, tensor.Q4_K, tensor.Q5_K, tensor.Q6_K, tensor.IQ4_XS:
		return tensor.Q8_K
	}
	return wt
}

// Supported reports whether the kernels can multiply weights of type wt:
// F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K,
// Q6_K, IQ4_NL, IQ4_XS and MXFP4.
func Supported(wt tensor.Type) bool {
	return int(wt) < numTypes && active.Load().vecDot[wt] != nil
}

// ActivationRowBytes returns the byte size of one activation row of n
// elements quantized for weights of type wt, or 0 when wt is unsupported or
// n is not a multiple of its block size.
func ActivationRowBytes(wt tensor.Type, n int) int {
	if !Supported(wt) || n%wt.BlockSize() != 0 {
		return 0
	}
	b, err := VecDotType(wt).RowBytes(n)
	if err != nil {
		return 0
	}
	return b
}

// QuantizeActivation converts the activation row src to the vec dot type vt
// (a result of VecDotType: F32, F16, BF16, Q8_0, Q8_1 or Q8_K) into dst,
// exactly as ggml's reference quantizers do (see quantizeQ8_0 and
// quantizeQ8_K for the rounding rules). len(src) must be a multiple of vt's
// block size and len(dst) at least vt.RowBytes(len(src)); it panics
// otherwise, as these are the caller's own buffers.
func QuantizeActivation(vt tensor.Type, src []float32, dst []byte) {
	var f func([]float32, []byte)
	if int(vt) < numTypes {
		f = active.Load().quantize[vt]
	}
	if f == nil {
		invariant.Failf("kernels", "QuantizeActivation: %s is not a vec dot type", vt)
	}
	need, err := vt.RowBytes(len(src))
	if err != nil {
		invariant.Failf("kernels", "QuantizeActivation: %v", err)
	}
	if len(dst) < need {
		invariant.Failf("kernels", "QuantizeActivation: dst has %d bytes, %d %s elements need %d",
			len(dst), len(src), vt, need)
	}
	f(src, dst[:need])
}

// VecDot returns the dot product of one weight row w of n elements of type
// wt with one activation row a made by QuantizeActivation(VecDotType(wt)).
// Integer parts are exact; the float sum of the per-block products may be
// taken in any order (levels differ in the last bits). Weight bytes may be
// anything a file holds (including -128 quants); activation quants must be
// in [-127, 127] as QuantizeActivation makes them, else the assembly
// kernels' sign trick may differ from the exact result. It panics when n is
// not a multiple of the block size or the rows are too short.
func VecDot(wt tensor.Type, n int, w, a []byte) float32 {
	var f func(int, []byte, []byte) float32
	if int(wt) < numTypes {
		f = active.Load().vecDot[wt]
	}
	if f == nil {
		invariant.Failf("kernels", "VecDot: weight type %s is not supported", wt)
	}
	wb, err := wt.RowBytes(n)
	if err != nil {
		invariant.Failf("kernels", "VecDot: %v", err)
	}
	ab, _ := VecDotType(wt).RowBytes(n)
	if len(w) < wb || len(a) < ab {
		invariant.Failf("kernels", "VecDot: %d %s elements need %d weight and %d activation bytes, got %d and %d",
			n, wt, wb, ab, len(w), len(a))
	}
	if n == 0 {
		return 0
	}
	return f(n, w[:wb], a[:ab])
}

// DotF32 returns Σ a[i]·b[i] in float32 arithmetic. len(b) must be at
// least len(a).
func DotF32(a, b []float32) float32 {
	return active.Load().dotF32(a, b[:len(a)])
}

// DotF16 returns Σ a[i]·b[i] of two half-precision rows, converting to
// float32 and accumulating in float32 (attention q·k on an F16 KV cache).
// len(b) must be at least len(a).
func DotF16(a, b []uint16) float32 {
	return active.Load().dotF16(a, b[:len(a)])
}

// AxpyF32 adds alpha·x[i] to y[i] for every i < len(x). len(y) must be at
// least len(x).
func AxpyF32(alpha float32, x, y []float32) {
	active.Load().axpyF32(alpha, x, y[:len(x)])
}

// AxpyF16 adds alpha·float32(x[i]) to y[i] for every i < len(x), x being
// half precision. len(y) must be at least len(x).
func AxpyF16(alpha float32, x []uint16, y []float32) {
	active.Load().axpyF16(alpha, x, y[:len(x)])
}

// ConvertF32ToF16 rounds src to half precision into dst (nearest even, as
// tensor.FP32ToFP16; a NaN stays a NaN but its payload may differ). len(dst)
// must be at least len(src).
func ConvertF32ToF16(src []float32, dst []uint16) {
	active.Load().f32ToF16(src, dst[:len(src)])
}

// ConvertF16ToF32 widens the half-precision values src into dst (exact).
// len(dst) must be at least len(src).
func ConvertF16ToF32(src []uint16, dst []float32) {
	active.Load().f16ToF32(src, dst[:len(src)])
}
