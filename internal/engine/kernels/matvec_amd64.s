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

// func matvecQ8_0x2VNNI(w *byte, wrb, off, npairs int, prep *byte, nb int, y *float32, yoff int)
// computes, for r < npairs, y[r] = row r · the prepared activation and
// y[r+yoff] = the row off bytes after it · the activation, the two rows'
// block pairs interleaved: every output is matvecQ8_0VNNI's operations on
// its row, bit for bit, while each prepared pair is loaded once for both
// rows and the two weight streams (off apart) keep two prefetch streams
// going.
//
// Registers: SI row A's block, R10 = off (row B at SI+R10), DI prepared
// pair, CX pairs left, DX y, R8 row start, R9 rows left, R11 yoff·4;
// Z0/Z1 the accumulators of A/B; Z14 = 0x80 bytes, Z15 = permLo8Hi8.
TEXT ·matvecQ8_0x2VNNI(SB), NOSPLIT, $0-64
	MOVQ         w+0(FP), R8
	MOVQ         off+16(FP), R10
	MOVQ         npairs+24(FP), R9
	MOVQ         y+48(FP), DX
	MOVQ         yoff+56(FP), R11
	SHLQ         $2, R11
	MOVL         $0x80808080, AX
	VPBROADCASTD AX, Z14
	VMOVDQU64    permLo8Hi8<>(SB), Z15

x2rows:
	MOVQ   R8, SI
	MOVQ   prep+32(FP), DI
	MOVQ   nb+40(FP), CX
	SHRQ   $1, CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	JZ     x2tail

x2pairs:
	VMOVDQU      2(SI), Y2
	VINSERTI64X4 $1, 36(SI), Z2, Z2
	VPXORD       Z14, Z2, Z2
	VMOVDQU      2(SI)(R10*1), Y3
	VINSERTI64X4 $1, 36(SI)(R10*1), Z3, Z3
	VPXORD       Z14, Z3, Z3
	VMOVDQU64    (DI), Z6
	VMOVDQU64    64(DI), Z4
	VMOVDQA64    Z4, Z7
	VPDPBUSD     Z6, Z2, Z4
	VPDPBUSD     Z6, Z3, Z7
	VCVTDQ2PS    Z4, Z4
	VCVTDQ2PS    Z7, Z7
	VMOVQ        128(DI), X6
	MOVWLZX      0(SI), AX
	MOVWLZX      34(SI), BX
	SHLL         $16, BX
	ORL          BX, AX
	VMOVD        AX, X5
	VCVTPH2PS    X5, X5
	VMULPS       X6, X5, X5
	VPERMPS      Z5, Z15, Z5
	VFMADD231PS  Z5, Z4, Z0
	MOVWLZX      0(SI)(R10*1), AX
	MOVWLZX      34(SI)(R10*1), BX
	SHLL         $16, BX
	ORL          BX, AX
	VMOVD        AX, X8
	VCVTPH2PS    X8, X8
	VMULPS       X6, X8, X8
	VPERMPS      Z8, Z15, Z8
	VFMADD231PS  Z8, Z7, Z1
	ADDQ         $68, SI
	ADDQ         $144, DI
	DECQ         CX
	JNZ          x2pairs

x2tail:
	VEXTRACTF64X4 $1, Z0, Y9
	VEXTRACTF64X4 $1, Z1, Y10
	MOVQ          nb+40(FP), CX
	TESTQ         $1, CX
	JZ            x2reduce
	VMOVDQU       2(SI), Y2
	VPXORD        Y14, Y2, Y2
	VMOVDQU       2(SI)(R10*1), Y3
	VPXORD        Y14, Y3, Y3
	VMOVDQU       (DI), Y6
	VMOVDQU       64(DI), Y4
	VMOVDQA       Y4, Y7
	VPDPBUSD      Y6, Y2, Y4
	VPDPBUSD      Y6, Y3, Y7
	VCVTDQ2PS     Y4, Y4
	VCVTDQ2PS     Y7, Y7
	MOVWLZX       0(SI), AX
	VMOVD         AX, X5
	VCVTPH2PS     X5, X5
	VMULSS        128(DI), X5, X5
	VBROADCASTSS  X5, Y5
	VFMADD231PS   Y5, Y4, Y0
	MOVWLZX       0(SI)(R10*1), AX
	VMOVD         AX, X8
	VCVTPH2PS     X8, X8
	VMULSS        128(DI), X8, X8
	VBROADCASTSS  X8, Y8
	VFMADD231PS   Y8, Y7, Y1

x2reduce:
	VADDPS Y9, Y0, Y0
	HSUM8V(Y0, X0, X9)
	VMOVSS X0, (DX)
	VADDPS Y10, Y1, Y1
	HSUM8V(Y1, X1, X10)
	VMOVSS X1, (DX)(R11*1)
	ADDQ   $4, DX
	ADDQ   wrb+8(FP), R8
	DECQ   R9
	JNZ    x2rows
	VZEROUPPER
	RET
