// Activation quantizers (float32 rows to Q8_0 and Q8_K blocks) at the AVX2
// level, bit for bit equal to the Go references quantizeQ8_0 and
// quantizeQ8_K: the same float32 operations in the same order for every
// scale, and the same rounding of every quant.

#include "textflag.h"

// ROUNDAWAY rounds the 8 floats of V to integers, halves away from zero (C's
// roundf), in place: t = trunc(v); v = t + (|v-t| >= 0.5 ? copysign(1, v) : 0).
// v - trunc(v) is exact, so the result is exact for every |v| < 2^23.
// Y15 = abs mask, Y14 = sign mask, Y13 = 1.0, Y12 = 0.5; T, U are scratch.
#define ROUNDAWAY(V, T, U) \
	VROUNDPS $3, V, T;      \
	VSUBPS   T, V, U;       \
	VANDPS   Y15, U, U;     \
	VCMPPS   $0x1d, Y12, U, U; \
	VANDPS   Y14, V, V;     \
	VORPS    Y13, V, V;     \
	VANDPS   U, V, V;       \
	VADDPS   T, V, V

// ZERONAN replaces the NaN lanes of V by 0 (T is scratch), as the Go
// references' conversions of a NaN give 0.
#define ZERONAN(V, T) \
	VCMPPS $0, V, V, T; \
	VANDPS T, V, V

// PACK32 packs the int32 lanes of A, B, C, D (8 each, values in
// [-128, 127]) into the 32 bytes of A in order (A's first).
// Y11 holds the dword permutation 0,4,1,5,2,6,3,7.
#define PACK32(A, B, C, D) \
	VPACKSSDW B, A, A;  \
	VPACKSSDW D, C, C;  \
	VPACKSSWB C, A, A;  \
	VPERMD    A, Y11, A

// func quantQ8_0AVX2(src *float32, dst *byte, nb int)
TEXT ·quantQ8_0AVX2(SB), NOSPLIT, $0-24
	MOVQ src+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ nb+16(FP), CX
	MOVL $0x7fffffff, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	MOVL $0x80000000, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	MOVL $0x3f800000, AX // 1.0
	VMOVD AX, X13
	VPBROADCASTD X13, Y13
	MOVL $0x3f000000, AX // 0.5
	VMOVD AX, X12
	VPBROADCASTD X12, Y12
	VMOVDQU perm04<>(SB), Y11
	MOVL $0x42fe0000, AX // 127.0
	VMOVD AX, X10

q80loop:
	TESTQ CX, CX
	JZ    q80done
	VMOVUPS 0(SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3

	// amax over |x|, NaNs skipped: acc = (|v| > acc) ? |v| : acc.
	VXORPS Y8, Y8, Y8
	VANDPS Y15, Y0, Y4
	VMAXPS Y8, Y4, Y8
	VANDPS Y15, Y1, Y4
	VMAXPS Y8, Y4, Y8
	VANDPS Y15, Y2, Y4
	VMAXPS Y8, Y4, Y8
	VANDPS Y15, Y3, Y4
	VMAXPS Y8, Y4, Y8
	VEXTRACTF128 $1, Y8, X9
	VMAXPS       X9, X8, X8
	VPERMILPS    $0x4e, X8, X9
	VMAXPS       X9, X8, X8
	VPERMILPS    $0xb1, X8, X9
	VMAXPS       X9, X8, X8

	// d = amax/127 (stored as f16), id = d != 0 ? 1/d : 0.
	VDIVSS    X10, X8, X9
	VCVTPS2PH $0, X9, X4
	VPEXTRW   $0, X4, AX
	MOVW      AX, 0(DI)
	VXORPS    X5, X5, X5
	VUCOMISS  X5, X9
	JEQ       q80zero
	VDIVSS    X9, X13, X5

q80zero:
	VBROADCASTSS X5, Y5
	VMULPS       Y5, Y0, Y0
	VMULPS       Y5, Y1, Y1
	VMULPS       Y5, Y2, Y2
	VMULPS       Y5, Y3, Y3
	ZERONAN(Y0, Y7)
	ZERONAN(Y1, Y7)
	ZERONAN(Y2, Y7)
	ZERONAN(Y3, Y7)
	ROUNDAWAY(Y0, Y4, Y6)
	ROUNDAWAY(Y1, Y4, Y6)
	ROUNDAWAY(Y2, Y4, Y6)
	ROUNDAWAY(Y3, Y4, Y6)
	VCVTTPS2DQ Y0, Y0
	VCVTTPS2DQ Y1, Y1
	VCVTTPS2DQ Y2, Y2
	VCVTTPS2DQ Y3, Y3
	PACK32(Y0, Y1, Y2, Y3)
	VMOVDQU Y0, 2(DI)

	ADDQ $128, SI
	ADDQ $34, DI
	DECQ CX
	JMP  q80loop

q80done:
	VZEROUPPER
	RET

// func quantQ8_KAVX2(src *float32, dst *byte, nb int, iscale *float32)
// Writes the quants and bsums of nb super-blocks of 256; the scales come
// from the caller (iscale[b] = -127/max of block b, 0 for an all-zero
// block, which gets zero quants and sums), who also stores d = 1/iscale.
TEXT ·quantQ8_KAVX2(SB), NOSPLIT, $0-32
	MOVQ src+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ nb+16(FP), CX
	MOVQ iscale+24(FP), DX
	VMOVDQU perm04<>(SB), Y11
	MOVL $127, AX
	VMOVD AX, X10
	VPBROADCASTD X10, Y10

q8kblock:
	TESTQ CX, CX
	JZ    q8kdone
	VBROADCASTSS 0(DX), Y9
	LEAQ 4(DI), R8   // quants
	LEAQ 260(DI), R9 // bsums
	MOVQ $8, BX      // 8 groups of 32 elements

q8kgroup:
	VMULPS     0(SI), Y9, Y0
	VMULPS     32(SI), Y9, Y1
	VMULPS     64(SI), Y9, Y2
	VMULPS     96(SI), Y9, Y3
	ZERONAN(Y0, Y6)
	ZERONAN(Y1, Y6)
	ZERONAN(Y2, Y6)
	ZERONAN(Y3, Y6)
	VCVTPS2DQ  Y0, Y0 // nearest even (MXCSR default)
	VCVTPS2DQ  Y1, Y1
	VCVTPS2DQ  Y2, Y2
	VCVTPS2DQ  Y3, Y3
	VPMINSD    Y10, Y0, Y0
	VPMINSD    Y10, Y1, Y1
	VPMINSD    Y10, Y2, Y2
	VPMINSD    Y10, Y3, Y3

	// bsums of elements 0-15 and 16-31.
	VPADDD       Y1, Y0, Y4
	VPADDD       Y3, Y2, Y5
	VPHADDD      Y5, Y4, Y4
	VPHADDD      Y4, Y4, Y4
	VEXTRACTI128 $1, Y4, X5
	VPADDD       X5, X4, X4
	VPEXTRD      $0, X4, AX
	MOVW         AX, 0(R9)
	VPEXTRD      $1, X4, AX
	MOVW         AX, 2(R9)

	PACK32(Y0, Y1, Y2, Y3)
	VMOVDQU Y0, 0(R8)

	ADDQ $128, SI
	ADDQ $32, R8
	ADDQ $4, R9
	DECQ BX
	JNZ  q8kgroup

	ADDQ $292, DI
	ADDQ $4, DX
	DECQ CX
	JMP  q8kblock

q8kdone:
	VZEROUPPER
	RET

DATA perm04<>+0(SB)/4, $0
DATA perm04<>+4(SB)/4, $4
DATA perm04<>+8(SB)/4, $1
DATA perm04<>+12(SB)/4, $5
DATA perm04<>+16(SB)/4, $2
DATA perm04<>+20(SB)/4, $6
DATA perm04<>+24(SB)/4, $3
DATA perm04<>+28(SB)/4, $7
GLOBL perm04<>(SB), RODATA|NOPTR, $32

// func maxMinAVX2(src *float32, nb int) (mx, mn float32)
// Returns the largest and the smallest of the nb*32 floats at src and 0
// (NaNs skipped: acc = (v > acc) ? v : acc).
TEXT ·maxMinAVX2(SB), NOSPLIT, $0-24
	MOVQ   src+0(FP), SI
	MOVQ   nb+8(FP), CX
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9

mmloop:
	TESTQ CX, CX
	JZ    mmdone
	VMOVUPS 0(SI), Y0
	VMAXPS  Y8, Y0, Y8
	VMINPS  Y9, Y0, Y9
	VMOVUPS 32(SI), Y0
	VMAXPS  Y8, Y0, Y8
	VMINPS  Y9, Y0, Y9
	VMOVUPS 64(SI), Y0
	VMAXPS  Y8, Y0, Y8
	VMINPS  Y9, Y0, Y9
	VMOVUPS 96(SI), Y0
	VMAXPS  Y8, Y0, Y8
	VMINPS  Y9, Y0, Y9
	ADDQ    $128, SI
	DECQ    CX
	JMP     mmloop

mmdone:
	VEXTRACTF128 $1, Y8, X0
	VMAXPS       X0, X8, X8
	VPERMILPS    $0x4e, X8, X0
	VMAXPS       X0, X8, X8
	VPERMILPS    $0xb1, X8, X0
	VMAXPS       X0, X8, X8
	VEXTRACTF128 $1, Y9, X0
	VMINPS       X0, X9, X9
	VPERMILPS    $0x4e, X9, X0
	VMINPS       X0, X9, X9
	VPERMILPS    $0xb1, X9, X0
	VMINPS       X0, X9, X9
	VMOVSS       X8, mx+16(FP)
	VMOVSS       X9, mn+20(FP)
	VZEROUPPER
	RET
