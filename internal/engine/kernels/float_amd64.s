// Float kernels: f32 and f16 dot products, axpy and f16 conversion, at the
// AVX2 (+FMA +F16C) and AVX-512 levels. The Go wrappers in amd64.go pass a
// positive element count that is a multiple of the vector width (8 for
// AVX2, 16 for AVX-512) and finish the tail in Go.

#include "textflag.h"

// HSUM8 reduces the 8 floats of Y to its lowest lane (X is Y's low half,
// T a scratch xmm register).
#define HSUM8(Y, X, T) \
	VEXTRACTF128 $1, Y, T; \
	VADDPS       T, X, X;  \
	VMOVHLPS     X, X, T;  \
	VADDPS       T, X, X;  \
	VMOVSHDUP    X, T;     \
	VADDSS       T, X, X

// func dotF32AVX2(a, b *float32, n int) float32
TEXT ·dotF32AVX2(SB), NOSPLIT, $0-28
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	CMPQ   CX, $32
	JB     tail

loop32:
	VMOVUPS     (SI), Y4
	VMOVUPS     32(SI), Y5
	VMOVUPS     64(SI), Y6
	VMOVUPS     96(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	CMPQ        CX, $32
	JAE         loop32

tail:
	TESTQ CX, CX
	JEQ   reduce

loop8:
	VMOVUPS     (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JNE         loop8

reduce:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM8(Y0, X0, X1)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func dotF32AVX512(a, b *float32, n int) float32
TEXT ·dotF32AVX512(SB), NOSPLIT, $0-28
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	CMPQ   CX, $64
	JB     tail

loop64:
	VMOVUPS     (SI), Z4
	VMOVUPS     64(SI), Z5
	VMOVUPS     128(SI), Z6
	VMOVUPS     192(SI), Z7
	VFMADD231PS (DI), Z4, Z0
	VFMADD231PS 64(DI), Z5, Z1
	VFMADD231PS 128(DI), Z6, Z2
	VFMADD231PS 192(DI), Z7, Z3
	ADDQ        $256, SI
	ADDQ        $256, DI
	SUBQ        $64, CX
	CMPQ        CX, $64
	JAE         loop64

tail:
	TESTQ CX, CX
	JEQ   reduce

loop16:
	VMOVUPS     (SI), Z4
	VFMADD231PS (DI), Z4, Z0
	ADDQ        $64, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JNE         loop16

reduce:
	VADDPS        Z1, Z0, Z0
	VADDPS        Z3, Z2, Z2
	VADDPS        Z2, Z0, Z0
	VEXTRACTF64X4 $1, Z0, Y1
	VADDPS        Y1, Y0, Y0
	HSUM8(Y0, X0, X1)
	VMOVSS        X0, ret+24(FP)
	VZEROUPPER
	RET

// func dotF16AVX2(a, b *uint16, n int) float32
TEXT ·dotF16AVX2(SB), NOSPLIT, $0-28
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	CMPQ   CX, $32
	JB     tail

loop32:
	VCVTPH2PS   (SI), Y4
	VCVTPH2PS   16(SI), Y5
	VCVTPH2PS   32(SI), Y6
	VCVTPH2PS   48(SI), Y7
	VCVTPH2PS   (DI), Y8
	VCVTPH2PS   16(DI), Y9
	VCVTPH2PS   32(DI), Y10
	VCVTPH2PS   48(DI), Y11
	VFMADD231PS Y8, Y4, Y0
	VFMADD231PS Y9, Y5, Y1
	VFMADD231PS Y10, Y6, Y2
	VFMADD231PS Y11, Y7, Y3
	ADDQ        $64, SI
	ADDQ        $64, DI
	SUBQ        $32, CX
	CMPQ        CX, $32
	JAE         loop32

tail:
	TESTQ CX, CX
	JEQ   reduce

loop8:
	VCVTPH2PS   (SI), Y4
	VCVTPH2PS   (DI), Y8
	VFMADD231PS Y8, Y4, Y0
	ADDQ        $16, SI
	ADDQ        $16, DI
	SUBQ        $8, CX
	JNE         loop8

reduce:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM8(Y0, X0, X1)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func dotF16AVX512(a, b *uint16, n int) float32
TEXT ·dotF16AVX512(SB), NOSPLIT, $0-28
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	CMPQ   CX, $64
	JB     tail

loop64:
	VCVTPH2PS   (SI), Z4
	VCVTPH2PS   32(SI), Z5
	VCVTPH2PS   64(SI), Z6
	VCVTPH2PS   96(SI), Z7
	VCVTPH2PS   (DI), Z8
	VCVTPH2PS   32(DI), Z9
	VCVTPH2PS   64(DI), Z10
	VCVTPH2PS   96(DI), Z11
	VFMADD231PS Z8, Z4, Z0
	VFMADD231PS Z9, Z5, Z1
	VFMADD231PS Z10, Z6, Z2
	VFMADD231PS Z11, Z7, Z3
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $64, CX
	CMPQ        CX, $64
	JAE         loop64

tail:
	TESTQ CX, CX
	JEQ   reduce

loop16:
	VCVTPH2PS   (SI), Z4
	VCVTPH2PS   (DI), Z8
	VFMADD231PS Z8, Z4, Z0
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $16, CX
	JNE         loop16

reduce:
	VADDPS        Z1, Z0, Z0
	VADDPS        Z3, Z2, Z2
	VADDPS        Z2, Z0, Z0
	VEXTRACTF64X4 $1, Z0, Y1
	VADDPS        Y1, Y0, Y0
	HSUM8(Y0, X0, X1)
	VMOVSS        X0, ret+24(FP)
	VZEROUPPER
	RET

// func axpyF32AVX2(alpha float32, x, y *float32, n int)
TEXT ·axpyF32AVX2(SB), NOSPLIT, $0-32
	VBROADCASTSS alpha+0(FP), Y0
	MOVQ         x+8(FP), SI
	MOVQ         y+16(FP), DI
	MOVQ         n+24(FP), CX
	CMPQ         CX, $32
	JB           tail

loop32:
	VMOVUPS     (SI), Y1
	VMOVUPS     32(SI), Y2
	VMOVUPS     64(SI), Y3
	VMOVUPS     96(SI), Y4
	VFMADD213PS (DI), Y0, Y1
	VFMADD213PS 32(DI), Y0, Y2
	VFMADD213PS 64(DI), Y0, Y3
	VFMADD213PS 96(DI), Y0, Y4
	VMOVUPS     Y1, (DI)
	VMOVUPS     Y2, 32(DI)
	VMOVUPS     Y3, 64(DI)
	VMOVUPS     Y4, 96(DI)
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	CMPQ        CX, $32
	JAE         loop32

tail:
	TESTQ CX, CX
	JEQ   done

loop8:
	VMOVUPS     (SI), Y1
	VFMADD213PS (DI), Y0, Y1
	VMOVUPS     Y1, (DI)
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JNE         loop8

done:
	VZEROUPPER
	RET

// func axpyF32AVX512(alpha float32, x, y *float32, n int)
TEXT ·axpyF32AVX512(SB), NOSPLIT, $0-32
	VBROADCASTSS alpha+0(FP), Z0
	MOVQ         x+8(FP), SI
	MOVQ         y+16(FP), DI
	MOVQ         n+24(FP), CX
	CMPQ         CX, $64
	JB           tail

loop64:
	VMOVUPS     (SI), Z1
	VMOVUPS     64(SI), Z2
	VMOVUPS     128(SI), Z3
	VMOVUPS     192(SI), Z4
	VFMADD213PS (DI), Z0, Z1
	VFMADD213PS 64(DI), Z0, Z2
	VFMADD213PS 128(DI), Z0, Z3
	VFMADD213PS 192(DI), Z0, Z4
	VMOVUPS     Z1, (DI)
	VMOVUPS     Z2, 64(DI)
	VMOVUPS     Z3, 128(DI)
	VMOVUPS     Z4, 192(DI)
	ADDQ        $256, SI
	ADDQ        $256, DI
	SUBQ        $64, CX
	CMPQ        CX, $64
	JAE         loop64

tail:
	TESTQ CX, CX
	JEQ   done

loop16:
	VMOVUPS     (SI), Z1
	VFMADD213PS (DI), Z0, Z1
	VMOVUPS     Z1, (DI)
	ADDQ        $64, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JNE         loop16

done:
	VZEROUPPER
	RET

// func axpyF16AVX2(alpha float32, x *uint16, y *float32, n int)
TEXT ·axpyF16AVX2(SB), NOSPLIT, $0-32
	VBROADCASTSS alpha+0(FP), Y0
	MOVQ         x+8(FP), SI
	MOVQ         y+16(FP), DI
	MOVQ         n+24(FP), CX
	CMPQ         CX, $32
	JB           tail

loop32:
	VCVTPH2PS   (SI), Y1
	VCVTPH2PS   16(SI), Y2
	VCVTPH2PS   32(SI), Y3
	VCVTPH2PS   48(SI), Y4
	VFMADD213PS (DI), Y0, Y1
	VFMADD213PS 32(DI), Y0, Y2
	VFMADD213PS 64(DI), Y0, Y3
	VFMADD213PS 96(DI), Y0, Y4
	VMOVUPS     Y1, (DI)
	VMOVUPS     Y2, 32(DI)
	VMOVUPS     Y3, 64(DI)
	VMOVUPS     Y4, 96(DI)
	ADDQ        $64, SI
	ADDQ        $128, DI
	SUBQ        $32, CX
	CMPQ        CX, $32
	JAE         loop32

tail:
	TESTQ CX, CX
	JEQ   done

loop8:
	VCVTPH2PS   (SI), Y1
	VFMADD213PS (DI), Y0, Y1
	VMOVUPS     Y1, (DI)
	ADDQ        $16, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JNE         loop8

done:
	VZEROUPPER
	RET

// func axpyF16AVX512(alpha float32, x *uint16, y *float32, n int)
TEXT ·axpyF16AVX512(SB), NOSPLIT, $0-32
	VBROADCASTSS alpha+0(FP), Z0
	MOVQ         x+8(FP), SI
	MOVQ         y+16(FP), DI
	MOVQ         n+24(FP), CX
	CMPQ         CX, $64
	JB           tail

loop64:
	VCVTPH2PS   (SI), Z1
	VCVTPH2PS   32(SI), Z2
	VCVTPH2PS   64(SI), Z3
	VCVTPH2PS   96(SI), Z4
	VFMADD213PS (DI), Z0, Z1
	VFMADD213PS 64(DI), Z0, Z2
	VFMADD213PS 128(DI), Z0, Z3
	VFMADD213PS 192(DI), Z0, Z4
	VMOVUPS     Z1, (DI)
	VMOVUPS     Z2, 64(DI)
	VMOVUPS     Z3, 128(DI)
	VMOVUPS     Z4, 192(DI)
	ADDQ        $128, SI
	ADDQ        $256, DI
	SUBQ        $64, CX
	CMPQ        CX, $64
	JAE         loop64

tail:
	TESTQ CX, CX
	JEQ   done

loop16:
	VCVTPH2PS   (SI), Z1
	VFMADD213PS (DI), Z0, Z1
	VMOVUPS     Z1, (DI)
	ADDQ        $32, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	JNE         loop16

done:
	VZEROUPPER
	RET

// func f32ToF16AVX2(src *float32, dst *uint16, n int)
TEXT ·f32ToF16AVX2(SB), NOSPLIT, $0-24
	MOVQ src+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ n+16(FP), CX

loop8:
	VMOVUPS   (SI), Y1
	VCVTPS2PH $0, Y1, (DI) // imm 0: round to nearest even
	ADDQ      $32, SI
	ADDQ      $16, DI
	SUBQ      $8, CX
	JNE       loop8
	VZEROUPPER
	RET

// func f16ToF32AVX2(src *uint16, dst *float32, n int)
TEXT ·f16ToF32AVX2(SB), NOSPLIT, $0-24
	MOVQ src+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ n+16(FP), CX

loop8:
	VCVTPH2PS (SI), Y1
	VMOVUPS   Y1, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	SUBQ      $8, CX
	JNE       loop8
	VZEROUPPER
	RET

// BF16LOAD widens 8 (AVX2) or 16 (AVX-512) bfloat16 values at M into
// float32s in R.
#define BF16LOAD(M, R) \
	VPMOVZXWD M, R; \
	VPSLLD    $16, R, R

// func dotBF16AVX2(a, b *byte, n int) float32
TEXT ·dotBF16AVX2(SB), NOSPLIT, $0-28
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	CMPQ   CX, $32
	JB     tail

loop32:
	BF16LOAD((SI), Y4)
	BF16LOAD(16(SI), Y5)
	BF16LOAD(32(SI), Y6)
	BF16LOAD(48(SI), Y7)
	BF16LOAD((DI), Y8)
	BF16LOAD(16(DI), Y9)
	BF16LOAD(32(DI), Y10)
	BF16LOAD(48(DI), Y11)
	VFMADD231PS Y8, Y4, Y0
	VFMADD231PS Y9, Y5, Y1
	VFMADD231PS Y10, Y6, Y2
	VFMADD231PS Y11, Y7, Y3
	ADDQ        $64, SI
	ADDQ        $64, DI
	SUBQ        $32, CX
	CMPQ        CX, $32
	JAE         loop32

tail:
	TESTQ CX, CX
	JEQ   reduce

loop8:
	BF16LOAD((SI), Y4)
	BF16LOAD((DI), Y8)
	VFMADD231PS Y8, Y4, Y0
	ADDQ        $16, SI
	ADDQ        $16, DI
	SUBQ        $8, CX
	JNE         loop8

reduce:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	HSUM8(Y0, X0, X1)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func dotBF16AVX512(a, b *byte, n int) float32
TEXT ·dotBF16AVX512(SB), NOSPLIT, $0-28
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DI
	MOVQ   n+16(FP), CX
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	CMPQ   CX, $64
	JB     tail

loop64:
	BF16LOAD((SI), Z4)
	BF16LOAD(32(SI), Z5)
	BF16LOAD(64(SI), Z6)
	BF16LOAD(96(SI), Z7)
	BF16LOAD((DI), Z8)
	BF16LOAD(32(DI), Z9)
	BF16LOAD(64(DI), Z10)
	BF16LOAD(96(DI), Z11)
	VFMADD231PS Z8, Z4, Z0
	VFMADD231PS Z9, Z5, Z1
	VFMADD231PS Z10, Z6, Z2
	VFMADD231PS Z11, Z7, Z3
	ADDQ        $128, SI
	ADDQ        $128, DI
	SUBQ        $64, CX
	CMPQ        CX, $64
	JAE         loop64

tail:
	TESTQ CX, CX
	JEQ   reduce

loop16:
	BF16LOAD((SI), Z4)
	BF16LOAD((DI), Z8)
	VFMADD231PS Z8, Z4, Z0
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $16, CX
	JNE         loop16

reduce:
	VADDPS        Z1, Z0, Z0
	VADDPS        Z3, Z2, Z2
	VADDPS        Z2, Z0, Z0
	VEXTRACTF64X4 $1, Z0, Y1
	VADDPS        Y1, Y0, Y0
	HSUM8(Y0, X0, X1)
	VMOVSS        X0, ret+24(FP)
	VZEROUPPER
	RET

// F16X4TOKEN adds the four converted weight vectors Z4-Z7 times one
// token's activations (f16 at ROW0-ROW3, converted into Z8-Z11) to its
// accumulators A0-A3.
#define F16X4TOKEN(ROW0, ROW1, ROW2, ROW3, A0, A1, A2, A3) \
	VCVTPH2PS   ROW0, Z8;   \
	VCVTPH2PS   ROW1, Z9;   \
	VCVTPH2PS   ROW2, Z10;  \
	VCVTPH2PS   ROW3, Z11;  \
	VFMADD231PS Z8, Z4, A0; \
	VFMADD231PS Z9, Z5, A1; \
	VFMADD231PS Z10, Z6, A2; \
	VFMADD231PS Z11, Z7, A3

// F16X4REDUCE reduces one token's accumulators as dotF16AVX512 does and
// stores the result at (BX), advancing BX by DX.
#define F16X4REDUCE(A0, A1, A2, A3) \
	VADDPS        A1, A0, A0; \
	VADDPS        A3, A2, A2; \
	VADDPS        A2, A0, A0; \
	VMOVAPS       A0, Z0;     \
	VEXTRACTF64X4 $1, Z0, Y1; \
	VADDPS        Y1, Y0, Y0; \
	HSUM8(Y0, X0, X1);        \
	VMOVSS        X0, (BX);   \
	ADDQ          DX, BX

// func dotF16x4AVX512(w, a *byte, arb int, prep *byte, n int, y *float32, ystride int)
//
// Four tokens at once for F16 weights: the weights are converted once and
// multiplied by each token's f16 activations (rows at a, stride arb). n is
// a positive multiple of 16. Per token it repeats dotF16AVX512's float
// operations.
TEXT ·dotF16x4AVX512(SB), NOSPLIT, $0-56
	MOVQ   w+0(FP), SI
	MOVQ   a+8(FP), DI
	MOVQ   arb+16(FP), R8
	LEAQ   (R8)(R8*2), R9
	MOVQ   n+32(FP), CX
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	VPXORD Z24, Z24, Z24
	VPXORD Z25, Z25, Z25
	VPXORD Z26, Z26, Z26
	VPXORD Z27, Z27, Z27
	VPXORD Z28, Z28, Z28
	VPXORD Z29, Z29, Z29
	VPXORD Z30, Z30, Z30
	VPXORD Z31, Z31, Z31
	CMPQ   CX, $64
	JB     tail

loop64:
	VCVTPH2PS (SI), Z4
	VCVTPH2PS 32(SI), Z5
	VCVTPH2PS 64(SI), Z6
	VCVTPH2PS 96(SI), Z7
	F16X4TOKEN((DI), 32(DI), 64(DI), 96(DI), Z16, Z17, Z18, Z19)
	F16X4TOKEN((DI)(R8*1), 32(DI)(R8*1), 64(DI)(R8*1), 96(DI)(R8*1), Z20, Z21, Z22, Z23)
	F16X4TOKEN((DI)(R8*2), 32(DI)(R8*2), 64(DI)(R8*2), 96(DI)(R8*2), Z24, Z25, Z26, Z27)
	F16X4TOKEN((DI)(R9*1), 32(DI)(R9*1), 64(DI)(R9*1), 96(DI)(R9*1), Z28, Z29, Z30, Z31)
	ADDQ      $128, SI
	ADDQ      $128, DI
	SUBQ      $64, CX
	CMPQ      CX, $64
	JAE       loop64

tail:
	TESTQ CX, CX
	JEQ   reduce

loop16:
	VCVTPH2PS   (SI), Z4
	VCVTPH2PS   (DI), Z8
	VCVTPH2PS   (DI)(R8*1), Z9
	VCVTPH2PS   (DI)(R8*2), Z10
	VCVTPH2PS   (DI)(R9*1), Z11
	VFMADD231PS Z8, Z4, Z16
	VFMADD231PS Z9, Z4, Z20
	VFMADD231PS Z10, Z4, Z24
	VFMADD231PS Z11, Z4, Z28
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $16, CX
	JNE         loop16

reduce:
	MOVQ y+40(FP), BX
	MOVQ ystride+48(FP), DX
	SHLQ $2, DX
	F16X4REDUCE(Z16, Z17, Z18, Z19)
	F16X4REDUCE(Z20, Z21, Z22, Z23)
	F16X4REDUCE(Z24, Z25, Z26, Z27)
	F16X4REDUCE(Z28, Z29, Z30, Z31)
	VZEROUPPER
	RET
