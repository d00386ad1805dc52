// Many-row forms of the AVX-512 half-precision attention kernels. The dot
// form works on four rows at a time with its own reduction order (a row's
// result is the same whatever rows come with it); the axpy form runs the
// same instructions per row as axpyF16AVX512 with y held in registers, so it
// equals row-by-row calls bit for bit.

#include "textflag.h"

// func dotF16RowsAVX512(q, rows *uint16, stride, nrows, n int, scale float32, dst *float32)
// dst[i] = dot(q, rows + i·stride) · scale for i < nrows; n is a positive
// multiple of 16, stride in elements; nrows >= 1. Four rows at a time share
// each converted chunk of q; every row's 16 lane sums are reduced by the
// same tree (halves, then pairs twice, then the two 128-bit halves) whether
// it is one of four or alone, so a row's result does not depend on the
// others.
TEXT ·dotF16RowsAVX512(SB), NOSPLIT, $0-56
	MOVQ         rows+8(FP), R8
	MOVQ         stride+16(FP), R9
	SHLQ         $1, R9
	MOVQ         nrows+24(FP), R10
	VBROADCASTSS scale+40(FP), X15
	MOVQ         dst+48(FP), R11

group4:
	CMPQ   R10, $4
	JB     single
	MOVQ   q+0(FP), SI
	MOVQ   R8, DI
	LEAQ   (DI)(R9*1), BX
	LEAQ   (BX)(R9*1), R12
	LEAQ   (R12)(R9*1), R13
	MOVQ   n+32(FP), CX
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3

g4loop:
	VCVTPH2PS   (SI), Z4
	VCVTPH2PS   (DI), Z5
	VFMADD231PS Z5, Z4, Z0
	VCVTPH2PS   (BX), Z6
	VFMADD231PS Z6, Z4, Z1
	VCVTPH2PS   (R12), Z7
	VFMADD231PS Z7, Z4, Z2
	VCVTPH2PS   (R13), Z8
	VFMADD231PS Z8, Z4, Z3
	ADDQ        $32, SI
	ADDQ        $32, DI
	ADDQ        $32, BX
	ADDQ        $32, R12
	ADDQ        $32, R13
	SUBQ        $16, CX
	JNE         g4loop

	VEXTRACTF64X4 $1, Z0, Y4
	VADDPS        Y4, Y0, Y0
	VEXTRACTF64X4 $1, Z1, Y5
	VADDPS        Y5, Y1, Y1
	VEXTRACTF64X4 $1, Z2, Y6
	VADDPS        Y6, Y2, Y2
	VEXTRACTF64X4 $1, Z3, Y7
	VADDPS        Y7, Y3, Y3
	VHADDPS       Y1, Y0, Y0
	VHADDPS       Y3, Y2, Y2
	VHADDPS       Y2, Y0, Y0
	VEXTRACTF128  $1, Y0, X1
	VADDPS        X1, X0, X0
	VMULPS        X15, X0, X0
	VMOVUPS       X0, (R11)
	ADDQ          $16, R11
	LEAQ          (R8)(R9*4), R8
	SUBQ          $4, R10
	JMP           group4

single:
	TESTQ  R10, R10
	JEQ    done
	MOVQ   q+0(FP), SI
	MOVQ   R8, DI
	MOVQ   n+32(FP), CX
	VXORPS Z0, Z0, Z0

s1loop:
	VCVTPH2PS   (SI), Z4
	VCVTPH2PS   (DI), Z5
	VFMADD231PS Z5, Z4, Z0
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $16, CX
	JNE         s1loop

	VEXTRACTF64X4 $1, Z0, Y4
	VADDPS        Y4, Y0, Y0
	VHADDPS       Y0, Y0, Y0
	VHADDPS       Y0, Y0, Y0
	VEXTRACTF128  $1, Y0, X1
	VADDPS        X1, X0, X0
	VMULSS        X15, X0, X0
	VMOVSS        X0, (R11)
	ADDQ          $4, R11
	ADDQ          R9, R8
	DECQ          R10
	JMP           single

done:
	VZEROUPPER
	RET

// func axpyF16RowsAVX512(w *float32, rows *uint16, stride, nrows int, y *float32, n int)
// y[j] += w[i]·rows[i·stride+j] for i = 0, 1, ... nrows-1 in turn, j < n;
// n a positive multiple of 16, nrows >= 1.
TEXT ·axpyF16RowsAVX512(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), R8
	MOVQ rows+8(FP), SI
	MOVQ stride+16(FP), R9
	SHLQ $1, R9
	MOVQ nrows+24(FP), R10
	MOVQ y+32(FP), DI
	MOVQ n+40(FP), CX

chunk64:
	CMPQ    CX, $64
	JB      chunk16
	VMOVUPS (DI), Z1
	VMOVUPS 64(DI), Z2
	VMOVUPS 128(DI), Z3
	VMOVUPS 192(DI), Z4
	MOVQ    SI, R11
	MOVQ    R8, R12
	MOVQ    R10, R13

r64:
	VBROADCASTSS (R12), Z0
	VCVTPH2PS    (R11), Z5
	VCVTPH2PS    32(R11), Z6
	VCVTPH2PS    64(R11), Z7
	VCVTPH2PS    96(R11), Z8
	VFMADD231PS  Z5, Z0, Z1
	VFMADD231PS  Z6, Z0, Z2
	VFMADD231PS  Z7, Z0, Z3
	VFMADD231PS  Z8, Z0, Z4
	ADDQ         R9, R11
	ADDQ         $4, R12
	DECQ         R13
	JNZ          r64
	VMOVUPS      Z1, (DI)
	VMOVUPS      Z2, 64(DI)
	VMOVUPS      Z3, 128(DI)
	VMOVUPS      Z4, 192(DI)
	ADDQ         $128, SI
	ADDQ         $256, DI
	SUBQ         $64, CX
	JMP          chunk64

chunk16:
	TESTQ   CX, CX
	JEQ     done
	VMOVUPS (DI), Z1
	MOVQ    SI, R11
	MOVQ    R8, R12
	MOVQ    R10, R13

r16:
	VBROADCASTSS (R12), Z0
	VCVTPH2PS    (R11), Z5
	VFMADD231PS  Z5, Z0, Z1
	ADDQ         R9, R11
	ADDQ         $4, R12
	DECQ         R13
	JNZ          r16
	VMOVUPS      Z1, (DI)
	ADDQ         $32, SI
	ADDQ         $64, DI
	SUBQ         $16, CX
	JMP          chunk16

done:
	VZEROUPPER
	RET
