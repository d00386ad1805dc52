// ExpF32 over 8 floats at a time (AVX2), for softmax (expShiftAVX2) and
// SwiGLU (swigluAVX2): the same float32 operations as the Go references,
// unfused, so the results are the same bits.

#include "textflag.h"

// STEP does p = p·r + c, c the float32 at OFF(DX) (Y4 is scratch).
#define STEP(OFF) \
	VMULPS       Y2, Y3, Y3;  \
	VBROADCASTSS OFF(DX), Y4; \
	VADDPS       Y4, Y3, Y3

// EXP8 sets Y3 = ExpF32(Y0) in 8 lanes (Y1, Y2, Y4, Y8 scratch; DX points
// at expConsts, Y9-Y14 hold the constants LOADEXP loads).
#define EXP8 \
	VCMPPS       $0x11, Y14, Y0, Y8; \
	VMULPS       Y13, Y0, Y1;        \
	VADDPS       Y12, Y1, Y1;        \
	VROUNDPS     $1, Y1, Y1;         \
	VMULPS       Y11, Y1, Y2;        \
	VSUBPS       Y2, Y0, Y2;         \
	VMULPS       Y10, Y1, Y3;        \
	VSUBPS       Y3, Y2, Y2;         \
	VBROADCASTSS 20(DX), Y3;         \
	STEP(24);                        \
	STEP(28);                        \
	STEP(32);                        \
	STEP(36);                        \
	STEP(40);                        \
	STEP(44);                        \
	VCVTTPS2DQ   Y1, Y1;             \
	VPADDD       Y9, Y1, Y1;         \
	VPSLLD       $23, Y1, Y1;        \
	VMULPS       Y1, Y3, Y3;         \
	VANDNPS      Y3, Y8, Y3

// LOADEXP loads EXP8's constants from expConsts at DX.
#define LOADEXP \
	VBROADCASTSS 0(DX), Y14;  \
	VBROADCASTSS 4(DX), Y13;  \
	VBROADCASTSS 8(DX), Y12;  \
	VBROADCASTSS 12(DX), Y11; \
	VBROADCASTSS 16(DX), Y10; \
	MOVL         $127, AX;    \
	VMOVD        AX, X9;      \
	VPBROADCASTD X9, Y9

// func expShiftAVX2(x *float32, n int, m float32, c *[13]float32)
// x[i] = ExpF32(x[i] - m) for i < n, n a positive multiple of 8.
TEXT ·expShiftAVX2(SB), NOSPLIT, $0-32
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS m+16(FP), Y15
	MOVQ         c+24(FP), DX
	LOADEXP

eloop:
	VMOVUPS (SI), Y0
	VSUBPS  Y15, Y0, Y0
	EXP8
	VMOVUPS Y3, (SI)
	ADDQ    $32, SI
	SUBQ    $8, CX
	JNE     eloop
	VZEROUPPER
	RET

// func swigluAVX2(gp, u *float32, n int, c *[13]float32)
// gp[i] = swigluGo's value for gp[i], u[i], for i < n, n a positive
// multiple of 8.
TEXT ·swigluAVX2(SB), NOSPLIT, $0-32
	MOVQ         gp+0(FP), SI
	MOVQ         u+8(FP), DI
	MOVQ         n+16(FP), CX
	MOVQ         c+24(FP), DX
	LOADEXP
	VBROADCASTSS 48(DX), Y15 // clamp
	VBROADCASTSS 40(DX), Y7  // 1

sloop:
	VMOVUPS (SI), Y5
	VXORPS  signs<>(SB), Y5, Y0 // x = -v
	VCMPPS  $0x1e, Y15, Y0, Y6  // x > clamp (GT_OQ)
	VANDNPS Y5, Y6, Y5          // v = 0 there
	VMINPS  Y0, Y15, Y0         // min(x, clamp), NaN kept
	EXP8
	VADDPS  Y7, Y3, Y3      // 1 + e
	VDIVPS  Y3, Y5, Y3      // v / (1 + e)
	VMULPS  (DI), Y3, Y3    // · u
	VMOVUPS Y3, (SI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNE     sloop
	VZEROUPPER
	RET

DATA signs<>+0(SB)/8, $0x8000000080000000
DATA signs<>+8(SB)/8, $0x8000000080000000
DATA signs<>+16(SB)/8, $0x8000000080000000
DATA signs<>+24(SB)/8, $0x8000000080000000
GLOBL signs<>(SB), RODATA|NOPTR, $32
