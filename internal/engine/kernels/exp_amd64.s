// ExpF32 over 8 floats at a time (AVX2): the same float32 operations as
// the Go reference, unfused, so the results are the same bits.

#include "textflag.h"

// STEP does p = p·r + c, c the float32 at OFF(DX) (Y4 is scratch).
#define STEP(OFF) \
	VMULPS       Y2, Y3, Y3; \
	VBROADCASTSS OFF(DX), Y4; \
	VADDPS       Y4, Y3, Y3

// func expShiftAVX2(x *float32, n int, m float32, c *[12]float32)
// x[i] = ExpF32(x[i] - m) for i < n, n a positive multiple of 8.
TEXT ·expShiftAVX2(SB), NOSPLIT, $0-32
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS m+16(FP), Y15
	MOVQ         c+24(FP), DX
	VBROADCASTSS 0(DX), Y14  // cutoff
	VBROADCASTSS 4(DX), Y13  // log2e
	VBROADCASTSS 8(DX), Y12  // 0.5
	VBROADCASTSS 12(DX), Y11 // ln2Hi
	VBROADCASTSS 16(DX), Y10 // ln2Lo
	MOVL         $127, AX
	VMOVD        AX, X9
	VPBROADCASTD X9, Y9

loop:
	VMOVUPS      (SI), Y0
	VSUBPS       Y15, Y0, Y0        // x = v - m
	VCMPPS       $0x11, Y14, Y0, Y8 // x < cutoff (LT_OQ)
	VMULPS       Y13, Y0, Y1
	VADDPS       Y12, Y1, Y1
	VROUNDPS     $1, Y1, Y1         // k = floor(x·log2e + 0.5)
	VMULPS       Y11, Y1, Y2
	VSUBPS       Y2, Y0, Y2         // x - k·ln2Hi
	VMULPS       Y10, Y1, Y3
	VSUBPS       Y3, Y2, Y2         // r
	VBROADCASTSS 20(DX), Y3         // p = 1/720
	STEP(24)
	STEP(28)
	STEP(32)
	STEP(36)
	STEP(40)
	STEP(44)
	VCVTTPS2DQ   Y1, Y1
	VPADDD       Y9, Y1, Y1
	VPSLLD       $23, Y1, Y1        // 2^k
	VMULPS       Y1, Y3, Y3
	VANDNPS      Y3, Y8, Y3         // 0 where x < cutoff
	VMOVUPS      Y3, (SI)
	ADDQ         $32, SI
	SUBQ         $8, CX
	JNE          loop
	VZEROUPPER
	RET
