// The many-row Q8_0 matrix-vector kernel at the AVX512 (VNNI) level.

#include "textflag.h"

// HSUM8V reduces the 8 floats of Y to its lowest lane (X is Y's low half,
// T a scratch xmm register), in the order of quant_amd64.s's HSUM8.
#define HSUM8V(Y, X, T) \
	VEXTRACTF128 $1, Y, T; \
	VADDPS       T, X, X;  \
	VMOVHLPS     X, X, T;  \
	VADDPS       T, X, X;  \
	VMOVSHDUP    X, T;     \
	VADDSS       T, X, X

// permLo8Hi8 picks float lane 0 eight times, then lane 1 eight times.
DATA permLo8Hi8<>+0(SB)/8, $0
DATA permLo8Hi8<>+8(SB)/8, $0
DATA permLo8Hi8<>+16(SB)/8, $0
DATA permLo8Hi8<>+24(SB)/8, $0
DATA permLo8Hi8<>+32(SB)/8, $0x0000000100000001
DATA permLo8Hi8<>+40(SB)/8, $0x0000000100000001
DATA permLo8Hi8<>+48(SB)/8, $0x0000000100000001
DATA permLo8Hi8<>+56(SB)/8, $0x0000000100000001
GLOBL permLo8Hi8<>(SB), RODATA|NOPTR, $64

// func matvecQ8_0VNNI(w *byte, wrb, nrows int, prep *byte, nb int, y *float32)
// computes y[r] = Q8_0 weight row r (rows wrb bytes apart) · the activation
// prepared by prepareMatvecQ8_0 (nb blocks), for nrows >= 1 rows, nb >= 1.
// Block pairs go through 512-bit registers, the even block in the low
// half and the odd one in the high half, so the two halves are
// dotQ8_0VNNI's two accumulators and every y[r] equals its result bit for
// bit: per block, the exact int32 lane sums of w·a (the weights offset by
// 128 to unsigned bytes, the activation's -128·Σa per lane added back)
// converted to float and multiplied-added by f32(dw)·f32(da); then the
// accumulators summed and reduced as HSUM8.
//
// Registers: SI weight block, DI prepared pair, CX pairs left, DX y,
// R8 row start, R9 rows left; Z14 = 0x80 bytes, Z15 = permLo8Hi8.
TEXT ·matvecQ8_0VNNI(SB), NOSPLIT, $0-48
	MOVQ         w+0(FP), R8
	MOVQ         nrows+16(FP), R9
	MOVQ         y+40(FP), DX
	MOVL         $0x80808080, AX
	VPBROADCASTD AX, Z14
	VMOVDQU64    permLo8Hi8<>(SB), Z15

rows:
	MOVQ   R8, SI
	MOVQ   prep+24(FP), DI
	MOVQ   nb+32(FP), CX
	SHRQ   $1, CX
	VPXORD Z0, Z0, Z0
	JZ     tail

pairs:
	VMOVDQU      2(SI), Y2
	VINSERTI64X4 $1, 36(SI), Z2, Z2
	VPXORD       Z14, Z2, Z2
	VMOVDQU64    64(DI), Z4
	VPDPBUSD     (DI), Z2, Z4
	VCVTDQ2PS    Z4, Z4
	MOVWLZX      0(SI), AX
	MOVWLZX      34(SI), BX
	SHLL         $16, BX
	ORL          BX, AX
	VMOVD        AX, X5
	VCVTPH2PS    X5, X5
	VMOVQ        128(DI), X6
	VMULPS       X6, X5, X5
	VPERMPS      Z5, Z15, Z5
	VFMADD231PS  Z5, Z4, Z0
	ADDQ         $68, SI
	ADDQ         $144, DI
	DECQ         CX
	JNZ          pairs

tail:
	VEXTRACTF64X4 $1, Z0, Y1
	MOVQ          nb+32(FP), CX
	TESTQ         $1, CX
	JZ            reduce
	VMOVDQU       2(SI), Y2
	VPXORD        Y14, Y2, Y2
	VMOVDQU       64(DI), Y4
	VPDPBUSD      (DI), Y2, Y4
	VCVTDQ2PS     Y4, Y4
	MOVWLZX       0(SI), AX
	VMOVD         AX, X5
	VCVTPH2PS     X5, X5
	VMULSS        128(DI), X5, X5
	VBROADCASTSS  X5, Y5
	VFMADD231PS   Y5, Y4, Y0

reduce:
	VADDPS Y1, Y0, Y0
	HSUM8V(Y0, X0, X1)
	VMOVSS X0, (DX)
	ADDQ   $4, DX
	ADDQ   wrb+8(FP), R8
	DECQ   R9
	JNZ    rows
	VZEROUPPER
	RET
