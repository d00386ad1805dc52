// Many-row forms of the AVX-512 half-precision attention kernels: the same
// instructions, per row, as dotF16AVX512 and axpyF16AVX512, without a call
// per row (and, for axpy, with y held in registers across the rows), so
// results equal row-by-row calls bit for bit.

#include "textflag.h"

// func dotF16RowsAVX512(q, rows *uint16, stride, nrows, n int, scale float32, dst *float32)
// dst[i] = dot(q, rows + i·stride) · scale for i < nrows; n is a positive
// multiple of 16, stride in elements; nrows >= 1.
TEXT ·dotF16RowsAVX512(SB), NOSPLIT, $0-56
	MOVQ         rows+8(FP), R8
	MOVQ         stride+16(FP), R9
	SHLQ         $1, R9
	MOVQ         nrows+24(FP), R10
	VBROADCASTSS scale+40(FP), X15
	MOVQ         dst+48(FP), R11

row:
	MOVQ   q+0(FP), SI
	MOVQ   R8, DI
	MOVQ   n+32(FP), CX
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
	VEXTRACTF128  $1, Y0, X1
	VADDPS        X1, X0, X0
	VMOVHLPS      X0, X0, X1
	VADDPS        X1, X0, X0
	VMOVSHDUP     X0, X1
	VADDSS        X1, X0, X0
	VMULSS        X15, X0, X0
	VMOVSS        X0, (R11)
	ADDQ          $4, R11
	ADDQ          R9, R8
	DECQ          R10
	JNZ           row
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
