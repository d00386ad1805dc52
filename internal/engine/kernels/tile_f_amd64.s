// Eight-token F16 and BF16 tiles at the AVX512 level: many weight rows
// (one group per call) against eight tokens whose activations are widened
// to float32 once per tile (prepareTileF8, 16-element groups of the eight
// tokens side by side), so the inner loop is one weight conversion shared
// by eight fused multiply-adds that read the activations from memory. Each
// output equals dotF16AVX512's (dotBF16AVX512's) bit for bit: the row
// kernel adds the 16-element groups 4c+k (c = 0, 1, ...) into accumulator
// k, the groups after the last whole 64 into accumulator 0, then reduces
// (acc0+acc1)+(acc2+acc3), the upper 8 lanes into the lower, and HSUM8.
// The accumulators are independent, so the tile makes four passes over a
// row, one per accumulator, with the eight tokens' accumulators in eight
// registers: (0+1) is kept while 2 and 3 are summed. The elements after the
// last whole group are added in Go, as the row kernels' wrappers do.

#include "textflag.h"

// HSUM8 as in quant_amd64.s.
#define HSUM8(Y, X, T) \
	VEXTRACTF128 $1, Y, T; \
	VADDPS       T, X, X;  \
	VMOVHLPS     X, X, T;  \
	VADDPS       T, X, X;  \
	VMOVSHDUP    X, T;     \
	VADDSS       T, X, X

// F16W widens 16 half-precision values at M into R.
#define F16W(M, R) \
	VCVTPH2PS M, R

// BF16W widens 16 bfloat16 values at M into R.
#define BF16W(M, R) \
	VPMOVZXWD M, R; \
	VPSLLD    $16, R, R

// func dotF16x8RowsAVX512(w *byte, wrb, nrows int, prep *byte, ngroups int, y *float32, ystride int)
// computes, for nrows >= 1 weight rows wrb bytes apart and eight tokens,
// row r's dot over the first 16·ngroups elements (ngroups >= 1) for token
// t into y[r + t·ystride]; prep is the tile's data (see prepareTileF8).
// Each output equals dotF16AVX512's bit for bit.
TEXT ·dotF16x8RowsAVX512(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), R11
	MOVQ wrb+8(FP), R12
	MOVQ nrows+16(FP), R13
	MOVQ y+40(FP), R14
	MOVQ prep+24(FP), R10
	MOVQ ngroups+32(FP), R8
	MOVQ R8, R9
	SHRQ $2, R8 // whole 64-element chunks
	ANDQ $3, R9 // groups after them

row:
	// pass 0: groups 4c+0 and the groups after the chunks
	LEAQ 0(R11), SI
	LEAQ 0(R10), DI
	MOVQ R8, CX
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	TESTQ CX, CX
	JZ    done0

chunk0:
	F16W((SI), Z4)
	VFMADD231PS 0(DI), Z4, Z16
	VFMADD231PS 64(DI), Z4, Z17
	VFMADD231PS 128(DI), Z4, Z18
	VFMADD231PS 192(DI), Z4, Z19
	VFMADD231PS 256(DI), Z4, Z20
	VFMADD231PS 320(DI), Z4, Z21
	VFMADD231PS 384(DI), Z4, Z22
	VFMADD231PS 448(DI), Z4, Z23
	ADDQ $128, SI
	ADDQ $2048, DI
	DECQ CX
	JNZ  chunk0

done0:
	MOVQ  R9, CX
	TESTQ CX, CX
	JZ    pass1

tailgrp:
	F16W((SI), Z4)
	VFMADD231PS 0(DI), Z4, Z16
	VFMADD231PS 64(DI), Z4, Z17
	VFMADD231PS 128(DI), Z4, Z18
	VFMADD231PS 192(DI), Z4, Z19
	VFMADD231PS 256(DI), Z4, Z20
	VFMADD231PS 320(DI), Z4, Z21
	VFMADD231PS 384(DI), Z4, Z22
	VFMADD231PS 448(DI), Z4, Z23
	ADDQ $32, SI
	ADDQ $512, DI
	DECQ CX
	JNZ  tailgrp

pass1:

	// pass 1: groups 4c+1
	LEAQ 32(R11), SI
	LEAQ 512(R10), DI
	MOVQ R8, CX
	VPXORD Z24, Z24, Z24
	VPXORD Z25, Z25, Z25
	VPXORD Z26, Z26, Z26
	VPXORD Z27, Z27, Z27
	VPXORD Z28, Z28, Z28
	VPXORD Z29, Z29, Z29
	VPXORD Z30, Z30, Z30
	VPXORD Z31, Z31, Z31
	TESTQ CX, CX
	JZ    done1

chunk1:
	F16W((SI), Z4)
	VFMADD231PS 0(DI), Z4, Z24
	VFMADD231PS 64(DI), Z4, Z25
	VFMADD231PS 128(DI), Z4, Z26
	VFMADD231PS 192(DI), Z4, Z27
	VFMADD231PS 256(DI), Z4, Z28
	VFMADD231PS 320(DI), Z4, Z29
	VFMADD231PS 384(DI), Z4, Z30
	VFMADD231PS 448(DI), Z4, Z31
	ADDQ $128, SI
	ADDQ $2048, DI
	DECQ CX
	JNZ  chunk1

done1:
	VADDPS Z24, Z16, Z16
	VADDPS Z25, Z17, Z17
	VADDPS Z26, Z18, Z18
	VADDPS Z27, Z19, Z19
	VADDPS Z28, Z20, Z20
	VADDPS Z29, Z21, Z21
	VADDPS Z30, Z22, Z22
	VADDPS Z31, Z23, Z23

	// pass 2: groups 4c+2
	LEAQ 64(R11), SI
	LEAQ 1024(R10), DI
	MOVQ R8, CX
	VPXORD Z24, Z24, Z24
	VPXORD Z25, Z25, Z25
	VPXORD Z26, Z26, Z26
	VPXORD Z27, Z27, Z27
	VPXORD Z28, Z28, Z28
	VPXORD Z29, Z29, Z29
	VPXORD Z30, Z30, Z30
	VPXORD Z31, Z31, Z31
	TESTQ CX, CX
	JZ    done2

chunk2:
	F16W((SI), Z4)
	VFMADD231PS 0(DI), Z4, Z24
	VFMADD231PS 64(DI), Z4, Z25
	VFMADD231PS 128(DI), Z4, Z26
	VFMADD231PS 192(DI), Z4, Z27
	VFMADD231PS 256(DI), Z4, Z28
	VFMADD231PS 320(DI), Z4, Z29
	VFMADD231PS 384(DI), Z4, Z30
	VFMADD231PS 448(DI), Z4, Z31
	ADDQ $128, SI
	ADDQ $2048, DI
	DECQ CX
	JNZ  chunk2

done2:

	// pass 3: groups 4c+3
	LEAQ 96(R11), SI
	LEAQ 1536(R10), DI
	MOVQ R8, CX
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	TESTQ CX, CX
	JZ    done3

chunk3:
	F16W((SI), Z4)
	VFMADD231PS 0(DI), Z4, Z8
	VFMADD231PS 64(DI), Z4, Z9
	VFMADD231PS 128(DI), Z4, Z10
	VFMADD231PS 192(DI), Z4, Z11
	VFMADD231PS 256(DI), Z4, Z12
	VFMADD231PS 320(DI), Z4, Z13
	VFMADD231PS 384(DI), Z4, Z14
	VFMADD231PS 448(DI), Z4, Z15
	ADDQ $128, SI
	ADDQ $2048, DI
	DECQ CX
	JNZ  chunk3

done3:
	VADDPS Z8, Z24, Z24
	VADDPS Z9, Z25, Z25
	VADDPS Z10, Z26, Z26
	VADDPS Z11, Z27, Z27
	VADDPS Z12, Z28, Z28
	VADDPS Z13, Z29, Z29
	VADDPS Z14, Z30, Z30
	VADDPS Z15, Z31, Z31
	VADDPS Z24, Z16, Z16
	VADDPS Z25, Z17, Z17
	VADDPS Z26, Z18, Z18
	VADDPS Z27, Z19, Z19
	VADDPS Z28, Z20, Z20
	VADDPS Z29, Z21, Z21
	VADDPS Z30, Z22, Z22
	VADDPS Z31, Z23, Z23

	MOVQ R14, BX
	MOVQ ystride+48(FP), DX
	SHLQ $2, DX
	VEXTRACTF64X4 $1, Z16, Y1
	VADDPS        Y1, Y16, Y0
	HSUM8(Y0, X0, X1)
	VMOVSS        X0, (BX)
	ADDQ          DX, BX
	VEXTRACTF64X4 $1, Z17, Y1
	VADDPS        Y1, Y17, Y0
	HSUM8(Y0, X0, X1)
	VMOVSS        X0, (BX)
	ADDQ          DX, BX
	VEXTRACTF64X4 $1, Z18, Y1
	VADDPS        Y1, Y18, Y0
	HSUM8(Y0, X0, X1)
	VMOVSS        X0, (BX)
	ADDQ          DX, BX
	VEXTRACTF64X4 $1, Z19, Y1
	VADDPS        Y1, Y19, Y0
	HSUM8(Y0, X0, X1)
	VMOVSS        X0, (BX)
	ADDQ          DX, BX
	VEXTRACTF64X4 $1, Z20, Y1
	VADDPS        Y1, Y20, Y0
	HSUM8(Y0, X0, X1)
	VMOVSS        X0, (BX)
	ADDQ          DX, BX
	VEXTRACTF64X4 $1, Z21, Y1
	VADDPS        Y1, Y21, Y0
	HSUM8(Y0, X0, X1)
	VMOVSS        X0, (BX)
	ADDQ          DX, BX
	VEXTRACTF64X4 $1, Z22, Y1
	VADDPS        Y1, Y22, Y0
	HSUM8(Y0, X0, X1)
	VMOVSS        X0, (BX)
	ADDQ          DX, BX
	VEXTRACTF64X4 $1, Z23, Y1
	VADDPS        Y1, Y23, Y0
	HSUM8(Y0, X0, X1)
	VMOVSS        X0, (BX)
	ADDQ          DX, BX
	ADDQ $4, R14
	ADDQ R12, R11
	DECQ R13
	JNZ  row
	VZEROUPPER
	RET

// func dotBF16x8RowsAVX512(w *byte, wrb, nrows int, prep *byte, ngroups int, y *float32, ystride int)
// computes, for nrows >= 1 weight rows wrb bytes apart and eight tokens,
// row r's dot over the first 16·ngroups elements (ngroups >= 1) for token
// t into y[r + t·ystride]; prep is the tile's data (see prepareTileF8).
// Each output equals dotBF16AVX512's bit for bit.
TEXT ·dotBF16x8RowsAVX512(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), R11
	MOVQ wrb+8(FP), R12
	MOVQ nrows+16(FP), R13
	MOVQ y+40(FP), R14
	MOVQ prep+24(FP), R10
	MOVQ ngroups+32(FP), R8
	MOVQ R8, R9
	SHRQ $2, R8 // whole 64-element chunks
	ANDQ $3, R9 // groups after them

row:
	// pass 0: groups 4c+0 and the groups after the chunks
	LEAQ 0(R11), SI
	LEAQ 0(R10), DI
	MOVQ R8, CX
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	TESTQ CX, CX
	JZ    done0

chunk0:
	BF16W((SI), Z4)
	VFMADD231PS 0(DI), Z4, Z16
	VFMADD231PS 64(DI), Z4, Z17
	VFMADD231PS 128(DI), Z4, Z18
	VFMADD231PS 192(DI), Z4, Z19
	VFMADD231PS 256(DI), Z4, Z20
	VFMADD231PS 320(DI), Z4, Z21
	VFMADD231PS 384(DI), Z4, Z22
	VFMADD231PS 448(DI), Z4, Z23
	ADDQ $128, SI
	ADDQ $2048, DI
	DECQ CX
	JNZ  chunk0

done0:
	MOVQ  R9, CX
	TESTQ CX, CX
	JZ    pass1

tailgrp:
	BF16W((SI), Z4)
	VFMADD231PS 0(DI), Z4, Z16
	VFMADD231PS 64(DI), Z4, Z17
	VFMADD231PS 128(DI), Z4, Z18
	VFMADD231PS 192(DI), Z4, Z19
	VFMADD231PS 256(DI), Z4, Z20
	VFMADD231PS 320(DI), Z4, Z21
	VFMADD231PS 384(DI), Z4, Z22
	VFMADD231PS 448(DI), Z4, Z23
	ADDQ $32, SI
	ADDQ $512, DI
	DECQ CX
	JNZ  tailgrp

pass1:

	// pass 1: groups 4c+1
	LEAQ 32(R11), SI
	LEAQ 512(R10), DI
	MOVQ R8, CX
	VPXORD Z24, Z24, Z24
	VPXORD Z25, Z25, Z25
	VPXORD Z26, Z26, Z26
	VPXORD Z27, Z27, Z27
	VPXORD Z28, Z28, Z28
	VPXORD Z29, Z29, Z29
	VPXORD Z30, Z30, Z30
	VPXORD Z31, Z31, Z31
	TESTQ CX, CX
	JZ    done1

chunk1:
	BF16W((SI), Z4)
	VFMADD231PS 0(DI), Z4, Z24
	VFMADD231PS 64(DI), Z4, Z25
	VFMADD231PS 128(DI), Z4, Z26
	VFMADD231PS 192(DI), Z4, Z27
	VFMADD231PS 256(DI), Z4, Z28
	VFMADD231PS 320(DI), Z4, Z29
	VFMADD231PS 384(DI), Z4, Z30
	VFMADD231PS 448(DI), Z4, Z31
	ADDQ $128, SI
	ADDQ $2048, DI
	DECQ CX
	JNZ  chunk1

done1:
	VADDPS Z24, Z16, Z16
	VADDPS Z25, Z17, Z17
	VADDPS Z26, Z18, Z18
	VADDPS Z27, Z19, Z19
	VADDPS Z28, Z20, Z20
	VADDPS Z29, Z21, Z21
	VADDPS Z30, Z22, Z22
	VADDPS Z31, Z23, Z23

	// pass 2: groups 4c+2
	LEAQ 64(R11), SI
	LEAQ 1024(R10), DI
	MOVQ R8, CX
	VPXORD Z24, Z24, Z24
	VPXORD Z25, Z25, Z25
	VPXORD Z26, Z26, Z26
	VPXORD Z27, Z27, Z27
	VPXORD Z28, Z28, Z28
	VPXORD Z29, Z29, Z29
	VPXORD Z30, Z30, Z30
	VPXORD Z31, Z31, Z31
	TESTQ CX, CX
	JZ    done2

chunk2:
	BF16W((SI), Z4)
	VFMADD231PS 0(DI), Z4, Z24
	VFMADD231PS 64(DI), Z4, Z25
	VFMADD231PS 128(DI), Z4, Z26
	VFMADD231PS 192(DI), Z4, Z27
	VFMADD231PS 256(DI), Z4, Z28
	VFMADD231PS 320(DI), Z4, Z29
	VFMADD231PS 384(DI), Z4, Z30
	VFMADD231PS 448(DI), Z4, Z31
	ADDQ $128, SI
	ADDQ $2048, DI
	DECQ CX
	JNZ  chunk2

done2:

	// pass 3: groups 4c+3
	LEAQ 96(R11), SI
	LEAQ 1536(R10), DI
	MOVQ R8, CX
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	TESTQ CX, CX
	JZ    done3

chunk3:
	BF16W((SI), Z4)
	VFMADD231PS 0(DI), Z4, Z8
	VFMADD231PS 64(DI), Z4, Z9
	VFMADD231PS 128(DI), Z4, Z10
	VFMADD231PS 192(DI), Z4, Z11
	VFMADD231PS 256(DI), Z4, Z12
	VFMADD231PS 320(DI), Z4, Z13
	VFMADD231PS 384(DI), Z4, Z14
	VFMADD231PS 448(DI), Z4, Z15
	ADDQ $128, SI
	ADDQ $2048, DI
	DECQ CX
	JNZ  chunk3

done3:
	VADDPS Z8, Z24, Z24
	VADDPS Z9, Z25, Z25
	VADDPS Z10, Z26, Z26
	VADDPS Z11, Z27, Z27
	VADDPS Z12, Z28, Z28
	VADDPS Z13, Z29, Z29
	VADDPS Z14, Z30, Z30
	VADDPS Z15, Z31, Z31
	VADDPS Z24, Z16, Z16
	VADDPS Z25, Z17, Z17
	VADDPS Z26, Z18, Z18
	VADDPS Z27, Z19, Z19
	VADDPS Z28, Z20, Z20
	VADDPS Z29, Z21, Z21
	VADDPS Z30, Z22, Z22
	VADDPS Z31, Z23, Z23

	MOVQ R14, BX
	MOVQ ystride+48(FP), DX
	SHLQ $2, DX
	VEXTRACTF64X4 $1, Z16, Y1
	VADDPS        Y1, Y16, Y0
	HSUM8(Y0, X0, X1)
	VMOVSS        X0, (BX)
	ADDQ          DX, BX
	VEXTRACTF64X4 $1, Z17, Y1
	VADDPS        Y1, Y17, Y0
	HSUM8(Y0, X0, X1)
	VMOVSS        X0, (BX)
	ADDQ          DX, BX
	VEXTRACTF64X4 $1, Z18, Y1
	VADDPS        Y1, Y18, Y0
	HSUM8(Y0, X0, X1)
	VMOVSS        X0, (BX)
	ADDQ          DX, BX
	VEXTRACTF64X4 $1, Z19, Y1
	VADDPS        Y1, Y19, Y0
	HSUM8(Y0, X0, X1)
	VMOVSS        X0, (BX)
	ADDQ          DX, BX
	VEXTRACTF64X4 $1, Z20, Y1
	VADDPS        Y1, Y20, Y0
	HSUM8(Y0, X0, X1)
	VMOVSS        X0, (BX)
	ADDQ          DX, BX
	VEXTRACTF64X4 $1, Z21, Y1
	VADDPS        Y1, Y21, Y0
	HSUM8(Y0, X0, X1)
	VMOVSS        X0, (BX)
	ADDQ          DX, BX
	VEXTRACTF64X4 $1, Z22, Y1
	VADDPS        Y1, Y22, Y0
	HSUM8(Y0, X0, X1)
	VMOVSS        X0, (BX)
	ADDQ          DX, BX
	VEXTRACTF64X4 $1, Z23, Y1
	VADDPS        Y1, Y23, Y0
	HSUM8(Y0, X0, X1)
	VMOVSS        X0, (BX)
	ADDQ          DX, BX
	ADDQ $4, R14
	ADDQ R12, R11
	DECQ R13
	JNZ  row
	VZEROUPPER
	RET
