//go:build amd64

package kernels

import (
	"encoding/binary"

	"golang.org/x/sys/cpu"

	"tandem/internal/engine/tensor"
)

// detectCPU reads the CPU features (x/sys/cpu also checks that the OS saves
// the AVX and AVX-512 register state).
func detectCPU() cpuFeatures {
	x := &cpu.X86
	return cpuFeatures{
		hasAMD64:   true,
		avx2:       x.HasAVX && x.HasAVX2,
		fma:        x.HasFMA,
		f16c:       x.HasF16C,
		avx512f:    x.HasAVX512F,
		avx512bw:   x.HasAVX512BW,
		avx512vl:   x.HasAVX512VL,
		avx512dq:   x.HasAVX512DQ,
		avx512vnni: x.HasAVX512VNNI,
	}
}

// archSet replaces k's entries with level l's assembly kernels (k starts
// as a copy of the level below).
func archSet(l Level, k *kernelSet) {
	switch l {
	case AVX2:
		k.dotF32 = dotF32Vec(dotF32AVX2, 8)
		k.dotF16 = dotF16Vec(dotF16AVX2, 8)
		k.axpyF32 = axpyF32Vec(axpyF32AVX2, 8)
		k.axpyF16 = axpyF16Vec(axpyF16AVX2, 8)
		k.f32ToF16 = f32ToF16Vec
		k.f16ToF32 = f16ToF32Vec
		k.expShift = expShiftVec
		k.swiglu = swigluVec
		k.vecDot[tensor.Q8_0] = blockDot(dotQ8_0AVX2, qk)
		k.vecDot[tensor.Q4_0] = blockDot(dotQ4_0AVX2, qk)
		k.vecDot[tensor.Q4_K] = blockDot(dotQ4KAVX2, qkk)
		k.vecDot[tensor.Q6_K] = blockDot(dotQ6KAVX2, qkk)
		k.vecDot[tensor.Q5_0] = blockDot(dotQ5_0AVX2, qk)
		k.vecDot[tensor.Q4_1] = blockDot(dotQ4_1AVX2, qk)
		k.vecDot[tensor.Q5_1] = blockDot(dotQ5_1AVX2, qk)
		k.vecDot[tensor.Q5_K] = blockDot(dotQ5KAVX2, qkk)
		k.vecDot[tensor.BF16] = bf16Dot(dotBF16AVX2, 8)
		k.vecDot[tensor.IQ4_NL] = blockDot(dotIQ4NLAVX2, qk)
		k.vecDot[tensor.MXFP4] = blockDot(dotMXFP4AVX2, qk)
		k.vecDot[tensor.IQ4_XS] = blockDot(dotIQ4XSAVX2, qkk)
		k.vecDot[tensor.Q2_K] = blockDot(dotQ2KAVX2, qkk)
		k.vecDot[tensor.Q3_K] = blockDot(dotQ3KAVX2, qkk)
		k.dot4[tensor.Q8_0] = q8Dot4(dotQ8_0x4AVX2, sizeQ8_0)
		k.dot4[tensor.Q4_0] = q8Dot4(dotQ4_0x4AVX2, sizeQ4_0)
		k.dot4[tensor.Q5_0] = q8Dot4(dotQ5_0x4AVX2, sizeQ5_0)
		k.dot4[tensor.Q4_K] = kDot4(dotQ4Kx4AVX2, sizeQ4_K)
		k.dot4[tensor.Q6_K] = kDot4(dotQ6Kx4AVX2, sizeQ6_K)
		k.dot4[tensor.Q5_K] = kDot4(dotQ5Kx4AVX2, sizeQ5_K)
		k.quantize[tensor.Q8_0] = quantizeQ8_0AVX2
		k.quantize[tensor.Q8_K] = quantizeQ8_KAVX2
		setAVX2Tiles(k)
	case AVX512:
		k.dotF32 = dotF32Vec(dotF32AVX512, 16)
		k.dotF16 = dotF16Vec(dotF16AVX512, 16)
		k.axpyF32 = axpyF32Vec(axpyF32AVX512, 16)
		k.axpyF16 = axpyF16Vec(axpyF16AVX512, 16)
		k.vecDot[tensor.Q8_0] = blockDot(dotQ8_0VNNI, qk)
		k.vecDot[tensor.Q4_0] = blockDot(dotQ4_0VNNI, qk)
		k.vecDot[tensor.Q5_0] = blockDot(dotQ5_0VNNI, qk)
		k.vecDot[tensor.Q4_1] = blockDot(dotQ4_1VNNI, qk)
		k.vecDot[tensor.Q5_1] = blockDot(dotQ5_1VNNI, qk)
		k.vecDot[tensor.BF16] = bf16Dot(dotBF16AVX512, 16)
		k.dot4Rows[tensor.Q8_0] = q8Dot4Rows(dotQ8_0x4RowsVNNI, sizeQ8_0)
		k.dot4[tensor.Q8_0] = oneRow(k.dot4Rows[tensor.Q8_0])
		k.dot8[tensor.Q8_0] = q8Dot8Rows
		k.signedQ8Tile8 = false // prepareTile8's layout, not AVX2's
		k.dot8[tensor.Q4_K] = kDot8Rows(dotQ4Kx8RowsVNNI, sizeQ4_K)
		k.dot8[tensor.Q6_K] = kDot8Rows(dotQ6Kx8RowsVNNI, sizeQ6_K)
		k.dot8[tensor.Q5_K] = kDot8Rows(dotQ5Kx8RowsVNNI, sizeQ5_K)
		k.dot8[tensor.IQ4_XS] = kDot8Rows(dotIQ4XSx8RowsVNNI, sizeIQ4_XS)
		k.dot8[tensor.Q3_K] = kDot8Rows(dotQ3Kx8RowsVNNI, sizeQ3_K)
		k.dot8[tensor.Q2_K] = kDot8Rows(dotQ2Kx8RowsVNNI, sizeQ2_K)
		k.dot8[tensor.Q4_0] = q8PairDot8Rows(dotQ4_0x8RowsVNNI, sizeQ4_0)
		k.dot8[tensor.Q5_0] = q8PairDot8Rows(dotQ5_0x8RowsVNNI, sizeQ5_0)
		k.dot8[tensor.IQ4_NL] = q8PairDot8Rows(dotIQ4NLx8RowsVNNI, sizeIQ4_NL)
		k.dot8[tensor.MXFP4] = q8PairDot8Rows(dotMXFP4x8RowsVNNI, sizeMXFP4)
		k.dot8[tensor.Q4_1] = q81Dot8Rows(dotQ4_1x8RowsVNNI, sizeQ4_1)
		k.dot8[tensor.Q5_1] = q81Dot8Rows(dotQ5_1x8RowsVNNI, sizeQ5_1)
		k.dot8[tensor.F16] = floatDot8Rows(dotF16x8RowsAVX512, half)
		k.dot8[tensor.BF16] = floatDot8Rows(dotBF16x8RowsAVX512, bf16)
		k.dot4[tensor.Q4_0] = q8Dot4(dotQ4_0x4VNNI, sizeQ4_0)
		k.dot4[tensor.Q5_0] = q8Dot4(dotQ5_0x4VNNI, sizeQ5_0)
		k.dot4[tensor.F16] = f16Dot4(dotF16x4AVX512, 16)
		k.rowsAsm = &rowsAsm{dotF16: dotF16RowsAVX512, axpyF16: axpyF16RowsAVX512}
	}
}

// blockDot adapts an assembly row kernel over whole blocks of bs elements.
func blockDot(f func(w, a *byte, nb int) float32, bs int) func(n int, w, a []byte) float32 {
	return func(n int, w, a []byte) float32 {
		if n < bs {
			return 0
		}
		return f(&w[0], &a[0], n/bs)
	}
}

// oneRow is a four-token kernel made of a many-row one.
func oneRow(f dot4RowsFunc) dot4Func {
	return func(w, a []byte, _ int, prep []byte, nb int, y []float32, ystride int) {
		f(w, 0, 1, prep, nb, y, ystride)
	}
}

// q8Dot4Rows adapts a many-row four-token kernel for a weight type dotted
// with Q8_0, checking the slice bounds the assembly relies on.
func q8Dot4Rows(f func(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int), wsize int) dot4RowsFunc {
	return func(w []byte, wrb, nrows int, prep []byte, nb int, y []float32, ystride int) {
		if nb <= 0 || nrows <= 0 {
			return
		}
		_ = w[(nrows-1)*wrb+nb*wsize-1]
		_ = prep[nb*prepQ8_0-1]
		_ = y[3*ystride+nrows-1]
		f(&w[0], wrb, nrows, &prep[0], nb, &y[0], ystride)
	}
}

// q8Dot4 adapts a four-token kernel for a weight type dotted with Q8_0
// (blocks of wsize bytes), checking the slice bounds the assembly relies on.
func q8Dot4(f func(w, a *byte, arb int, prep *byte, nb int, y *float32, ystride int), wsize int) dot4Func {
	return func(w, a []byte, arb int, prep []byte, nb int, y []float32, ystride int) {
		if nb <= 0 {
			return
		}
		_ = w[nb*wsize-1]
		_ = a[3*arb+nb*sizeQ8_0-1]
		_ = prep[nb*prepQ8_0-1]
		_ = y[3*ystride]
		f(&w[0], &a[0], arb, &prep[0], nb, &y[0], ystride)
	}
}

// kDot4 adapts a four-token K-quant kernel (nothing prepared: the Q8_K
// rows carry float32 scales and block sums).
func kDot4(f func(w, a *byte, arb int, prep *byte, nb int, y *float32, ystride int), wsize int) dot4Func {
	return func(w, a []byte, arb int, _ []byte, nb int, y []float32, ystride int) {
		if nb <= 0 {
			return
		}
		_ = w[nb*wsize-1]
		_ = a[3*arb+nb*sizeQ8_K-1]
		_ = y[3*ystride]
		f(&w[0], &a[0], arb, nil, nb, &y[0], ystride)
	}
}

// f16Dot4 adapts a four-token F16 kernel that handles a multiple of width
// elements, finishing each token's tail in Go exactly as dotF16Vec does.
func f16Dot4(f func(w, a *byte, arb int, prep *byte, n int, y *float32, ystride int), width int) dot4Func {
	return func(w, a []byte, arb int, _ []byte, n int, y []float32, ystride int) {
		if n <= 0 {
			return
		}
		_ = a[3*arb+2*n-1]
		_ = y[3*ystride]
		m := n / width * width
		if m > 0 {
			f(&w[0], &a[0], arb, nil, m, &y[0], ystride)
		} else {
			for t := range 4 {
				y[t*ystride] = 0
			}
		}
		tab := f16Table
		for t := range 4 {
			row := a[t*arb : t*arb+2*n]
			s := y[t*ystride]
			for i := m; i < n; i++ {
				s += tab[binary.LittleEndian.Uint16(w[2*i:])] * tab[binary.LittleEndian.Uint16(row[2*i:])]
			}
			y[t*ystride] = s
		}
	}
}

// bf16Dot adapts a bfloat16 row kernel (a multiple of width elements) and
// finishes the tail in Go.
func bf16Dot(f func(a, b *byte, n int) float32, width int) func(n int, w, a []byte) float32 {
	return func(n int, w, a []byte) float32 {
		m := n / width * width
		var s float32
		if m > 0 {
			s = f(&w[0], &a[0], m)
		}
		for i := m; i < n; i++ {
			s += bf16(w[2*i:]) * bf16(a[2*i:])
		}
		return s
	}
}

// dotF32Vec runs f on the largest multiple of width elements and finishes
// the tail in Go.
func dotF32Vec(f func(a, b *float32, n int) float32, width int) func(a, b []float32) float32 {
	return func(a, b []float32) float32 {
		b = b[:len(a)]
		m := len(a) / width * width
		var s float32
		if m > 0 {
			s = f(&a[0], &b[0], m)
		}
		for i := m; i < len(a); i++ {
			s += a[i] * b[i]
		}
		return s
	}
}

func dotF16Vec(f func(a, b *uint16, n int) float32, width int) func(a, b []uint16) float32 {
	return func(a, b []uint16) float32 {
		b = b[:len(a)]
		m := len(a) / width * width
		var s float32
		if m > 0 {
			s = f(&a[0], &b[0], m)
		}
		t := f16Table
		for i := m; i < len(a); i++ {
			s += t[a[i]] * t[b[i]]
		}
		return s
	}
}

func axpyF32Vec(f func(alpha float32, x, y *float32, n int), width int) func(alpha float32, x, y []float32) {
	return func(alpha float32, x, y []float32) {
		y = y[:len(x)]
		m := len(x) / width * width
		if m > 0 {
			f(alpha, &x[0], &y[0], m)
		}
		for i := m; i < len(x); i++ {
			y[i] += alpha * x[i]
		}
	}
}

func axpyF16Vec(f func(alpha float32, x *uint16, y *float32, n int), width int) func(alpha float32, x []uint16, y []float32) {
	return func(alpha float32, x []uint16, y []float32) {
		y = y[:len(x)]
		m := len(x) / width * width
		if m > 0 {
			f(alpha, &x[0], &y[0], m)
		}
		t := f16Table
		for i := m; i < len(x); i++ {
			y[i] += alpha * t[x[i]]
		}
	}
}

func f32ToF16Vec(src []float32, dst []uint16) {
	dst = dst[:len(src)]
	m := len(src) &^ 7
	if m > 0 {
		f32ToF16AVX2(&src[0], &dst[0], m)
	}
	for i := m; i < len(src); i++ {
		dst[i] = tensor.FP32ToFP16(src[i])
	}
}

func f16ToF32Vec(src []uint16, dst []float32) {
	dst = dst[:len(src)]
	m := len(src) &^ 7
	if m > 0 {
		f16ToF32AVX2(&src[0], &dst[0], m)
	}
	t := f16Table
	for i := m; i < len(src); i++ {
		dst[i] = t[src[i]]
	}
}

// Assembly kernels (float_amd64.s, quant_amd64.s). Float kernels take a
// positive multiple of their vector width (8 or 16); block kernels take a
// positive block count.

//go:noescape
func dotF32AVX2(a, b *float32, n int) float32

//go:noescape
func dotF32AVX512(a, b *float32, n int) float32

//go:noescape
func dotF16AVX2(a, b *uint16, n int) float32

//go:noescape
func dotF16AVX512(a, b *uint16, n int) float32

//go:noescape
func axpyF32AVX2(alpha float32, x, y *float32, n int)

//go:noescape
func axpyF32AVX512(alpha float32, x, y *float32, n int)

//go:noescape
func axpyF16AVX2(alpha float32, x *uint16, y *float32, n int)

//go:noescape
func axpyF16AVX512(alpha float32, x *uint16, y *float32, n int)

//go:noescape
func f32ToF16AVX2(src *float32, dst *uint16, n int)

//go:noescape
func f16ToF32AVX2(src *uint16, dst *float32, n int)

//go:noescape
func dotQ8_0AVX2(w, a *byte, nb int) float32

//go:noescape
func dotQ8_0VNNI(w, a *byte, nb int) float32

//go:noescape
func dotQ4_0AVX2(w, a *byte, nb int) float32

//go:noescape
func dotQ4_0VNNI(w, a *byte, nb int) float32

//go:noescape
func dotQ4KAVX2(w, a *byte, nb int) float32

//go:noescape
func dotQ6KAVX2(w, a *byte, nb int) float32

//go:noescape
func dotQ5_0AVX2(w, a *byte, nb int) float32

//go:noescape
func dotQ5_0VNNI(w, a *byte, nb int) float32

//go:noescape
func dotQ4_1AVX2(w, a *byte, nb int) float32

//go:noescape
func dotQ4_1VNNI(w, a *byte, nb int) float32

//go:noescape
func dotQ5_1AVX2(w, a *byte, nb int) float32

//go:noescape
func dotQ5_1VNNI(w, a *byte, nb int) float32

//go:noescape
func dotQ5KAVX2(w, a *byte, nb int) float32

// Row kernels of the table and low-bit K types (lowbit_amd64.s), bit for
// bit ggml's AVX2 vec_dot.

//go:noescape
func dotIQ4NLAVX2(w, a *byte, nb int) float32

//go:noescape
func dotMXFP4AVX2(w, a *byte, nb int) float32

//go:noescape
func dotIQ4XSAVX2(w, a *byte, nb int) float32

//go:noescape
func dotQ2KAVX2(w, a *byte, nb int) float32

//go:noescape
func dotQ3KAVX2(w, a *byte, nb int) float32

//go:noescape
func dotBF16AVX2(a, b *byte, n int) float32

//go:noescape
func dotBF16AVX512(a, b *byte, n int) float32

//go:noescape
func dotQ8_0x4AVX2(w, a *byte, arb int, prep *byte, nb int, y *float32, ystride int)

//go:noescape
func dotQ4Kx4AVX2(w, a *byte, arb int, prep *byte, nb int, y *float32, ystride int)

//go:noescape
func dotQ6Kx4AVX2(w, a *byte, arb int, prep *byte, nb int, y *float32, ystride int)

//go:noescape
func dotF16x4AVX512(w, a *byte, arb int, prep *byte, n int, y *float32, ystride int)

//go:noescape
func dotQ4_0x4AVX2(w, a *byte, arb int, prep *byte, nb int, y *float32, ystride int)

//go:noescape
func dotQ4_0x4VNNI(w, a *byte, arb int, prep *byte, nb int, y *float32, ystride int)

//go:noescape
func dotQ5_0x4AVX2(w, a *byte, arb int, prep *byte, nb int, y *float32, ystride int)

//go:noescape
func dotQ5_0x4VNNI(w, a *byte, arb int, prep *byte, nb int, y *float32, ystride int)

//go:noescape
func dotQ5Kx4AVX2(w, a *byte, arb int, prep *byte, nb int, y *float32, ystride int)

//go:noescape
func dotF16RowsAVX512(q, rows *uint16, stride, nrows, n int, scale float32, dst *float32)

//go:noescape
func axpyF16RowsAVX512(w *float32, rows *uint16, stride, nrows int, y *float32, n int)

//go:noescape
func dotQ8_0x4RowsVNNI(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int)

//go:noescape
func expShiftAVX2(x *float32, n int, m float32, c *[13]float32)

// expShiftVec runs the AVX2 exp on the largest multiple of 8 elements and
// the Go reference on the rest.
func expShiftVec(x []float32, m float32) {
	n := len(x) &^ 7
	if n > 0 {
		expShiftAVX2(&x[0], n, m, &expConsts)
	}
	expShiftGo(x[n:], m)
}

//go:noescape
func dotQ8_0x8RowsVNNI(w *byte, wrb, nrows int, prep *byte, npairs int, y *float32, ystride int)

// q8Dot8Rows checks the slice bounds dotQ8_0x8RowsVNNI relies on and calls
// it (nb is the blocks per row, even).
func q8Dot8Rows(w []byte, wrb, nrows int, prep []byte, nb int, y []float32, ystride int) {
	if nb <= 0 || nrows <= 0 {
		return
	}
	_ = w[(nrows-1)*wrb+nb*sizeQ8_0-1]
	_ = prep[nb/2*prep8PairBytes-1]
	_ = y[7*ystride+nrows-1]
	dotQ8_0x8RowsVNNI(&w[0], wrb, nrows, &prep[0], nb/2, &y[0], ystride)
}

//go:noescape
func swigluAVX2(gp, u *float32, n int, c *[13]float32)

// swigluVec runs the AVX2 SwiGLU on the largest multiple of 8 elements and
// the Go reference on the rest.
func swigluVec(g, u []float32) {
	n := len(g) &^ 7
	if n > 0 {
		swigluAVX2(&g[0], &u[0], n, &expConsts)
	}
	swigluGo(g[n:], u[n:])
}
