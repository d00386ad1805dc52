// Dot products of MXFP4, IQ4_NL, IQ4_XS, Q2_K and Q3_K weight rows with
// quantized activation rows at the AVX2 level (the AVX512 level runs them
// too). Each performs the float operations of ggml's AVX2 kernel for the
// type (ggml_vec_dot_*_q8_0 / _q8_K in ggml-cpu/arch/x86/quants.c) in the
// same order on the same eight lanes, and the lanes' integer sums are
// exact, so each returns ggml's result bit for bit: per block pair (Q8_0
// types) or super-block (Q8_K types) one fused multiply-add of the block
// scale and the converted int32 lanes into float32 lane accumulators, then
// HSUM8. The Go wrappers in amd64.go pass nb >= 1.
//
// The 4-bit table types map nibbles through VPSHUFB and multiply signed
// table values by signed activations with the sign trick (|w| times
// a·sign(w), exact for activations in [-127, 127]); the K-quants multiply
// their unsigned low bits with VPMADDUBSW and weight the int16 pair sums by
// the sub-block scales with VPMADDWD, as ggml does.

#include "textflag.h"
#include "lowbit_amd64.h"

// HSUM8 reduces the 8 floats of Y to its lowest lane (X is Y's low half,
// T a scratch xmm register), as ggml's hsum_float_8.
#define HSUM8(Y, X, T) \
	VEXTRACTF128 $1, Y, T; \
	VADDPS       T, X, X;  \
	VMOVHLPS     X, X, T;  \
	VADDPS       T, X, X;  \
	VMOVSHDUP    X, T;     \
	VADDSS       T, X, X

// HSUMI8 adds the 8 int32 lanes of Y into the low lane of X (T scratch).
#define HSUMI8(Y, X, T) \
	VEXTRACTI128 $1, Y, T;   \
	VPADDD       T, X, X;    \
	VPSHUFD      $0x4e, X, T; \
	VPADDD       T, X, X;    \
	VPSHUFD      $0xb1, X, T; \
	VPADDD       T, X, X

#define ONES16(Y) \
	VPCMPEQW Y, Y, Y; \
	VPSRLW   $15, Y, Y

// BYTES fills Y with the byte pattern of the 32-bit constant C.
#define BYTES(C, Y, X) \
	MOVL         C, AX; \
	VMOVD        AX, X; \
	VPBROADCASTD X, Y

// TLOAD maps the 16 nibble bytes at OFF(SI) through the table in Y13:
// QW's low lane gets the low nibbles' values (elements 0-15 of the block),
// its high lane the high nibbles' (16-31). Y14 = 0x0F bytes.
#define TLOAD(OFF, QW, QWX, TX) \
	VMOVDQU     OFF(SI), QWX;   \
	VPSRLW      $4, QWX, TX;    \
	VINSERTI128 $1, TX, QW, QW; \
	VPAND       Y14, QW, QW;    \
	VPSHUFB     QW, Y13, QW

// SIGNMUL leaves in QW the 16 int16 pair sums of the 32 signed byte
// products QW·QA (QA is clobbered).
#define SIGNMUL(QW, QA) \
	VPSIGNB    QW, QA, QA; \
	VPSIGNB    QW, QW, QW; \
	VPMADDUBSW QA, QW, QW

// The Q8_0-activation table types (IQ4_NL, MXFP4) share one loop, after
// ggml's: block pairs into two accumulators (even and odd blocks), each
// acc = fma(d_w·d_a, float(lanes), acc), then HSUM8 of their sum, then an
// odd last block as sum = fma(d_w·d_a, float(Σ), sum) in scalar (GCC
// contracts ggml's sumf += d·sumi). SCALE(OFF, Y, X) must leave d_w·d_a of
// the block at SI/DI+OFF in every lane of Y (X its low half); QOFF is the
// nibbles' offset in the weight block, BS its size.
#define TABLEDOT(QOFF, BS, SCALE) \
	ONES16(Y15);                   \
	BYTES($0x0F0F0F0F, Y14, X14);  \
	VXORPS Y0, Y0, Y0;             \
	VXORPS Y1, Y1, Y1;             \
	CMPQ   R8, $2;                 \
	JB     tail;                   \
pairs:                             \
	TLOAD(QOFF, Y2, X2, X10);      \
	TLOAD(QOFF+BS, Y6, X6, X11);   \
	VMOVDQU     2(DI), Y3;         \
	VMOVDQU     36(DI), Y7;        \
	SIGNMUL(Y2, Y3);               \
	SIGNMUL(Y6, Y7);               \
	VPMADDWD    Y15, Y2, Y2;       \
	VPMADDWD    Y15, Y6, Y6;       \
	VCVTDQ2PS   Y2, Y2;            \
	VCVTDQ2PS   Y6, Y6;            \
	SCALE(0, 0, Y4, X4);           \
	SCALE(BS, 34, Y8, X8);         \
	VFMADD231PS Y4, Y2, Y0;        \
	VFMADD231PS Y8, Y6, Y1;        \
	ADDQ        $(2*BS), SI;       \
	ADDQ        $68, DI;           \
	SUBQ        $2, R8;            \
	CMPQ        R8, $2;            \
	JAE         pairs;             \
tail:                              \
	VADDPS Y1, Y0, Y0;             \
	HSUM8(Y0, X0, X1);             \
	TESTQ  R8, R8;                 \
	JEQ    done;                   \
	TLOAD(QOFF, Y2, X2, X10);      \
	VMOVDQU      2(DI), Y3;        \
	SIGNMUL(Y2, Y3);               \
	VPMADDWD     Y15, Y2, Y2;      \
	VEXTRACTI128 $1, Y2, X3;       \
	VPADDD       X3, X2, X2;       \
	VPSHUFD      $0x4e, X2, X3;    \
	VPADDD       X3, X2, X2;       \
	VPSHUFD      $0xb1, X2, X3;    \
	VPADDD       X3, X2, X2;       \
	VCVTDQ2PS    X2, X2;           \
	SCALE(0, 0, Y4, X4);           \
	VFMADD231SS  X4, X2, X0;       \
done:                              \
	VMOVSS X0, ret+24(FP);         \
	VZEROUPPER;                    \
	RET

// SCALEF16 leaves f16(WOFF(SI))·f16(AOFF(DI)) in every lane of Y.
#define SCALEF16(WOFF, AOFF, Y, X) \
	VPBROADCASTW WOFF(SI), X;  \
	VPBROADCASTW AOFF(DI), X9; \
	VCVTPH2PS    X, Y;         \
	VCVTPH2PS    X9, Y9;       \
	VMULPS       Y9, Y, Y

// SCALEE8M0 leaves 2^(e−128)·f16(AOFF(DI)) in every lane of Y, e the MXFP4
// exponent byte at WOFF(SI) (LB_E8M0).
#define SCALEE8M0(WOFF, AOFF, Y, X) \
	LB_E8M0(WOFF(SI));         \
	VMOVD        BX, X;        \
	VPBROADCASTD X, Y;         \
	VPBROADCASTW AOFF(DI), X9; \
	VCVTPH2PS    X9, Y9;       \
	VMULPS       Y9, Y, Y

// func dotIQ4NLAVX2(w, a *byte, nb int) float32
TEXT ·dotIQ4NLAVX2(SB), NOSPLIT, $0-28
	MOVQ    w+0(FP), SI
	MOVQ    a+8(FP), DI
	MOVQ    nb+16(FP), R8
	VMOVDQU ·lbKvIQ4(SB), Y13
	TABLEDOT(2, 18, SCALEF16)

// func dotMXFP4AVX2(w, a *byte, nb int) float32
TEXT ·dotMXFP4AVX2(SB), NOSPLIT, $0-28
	MOVQ    w+0(FP), SI
	MOVQ    a+8(FP), DI
	MOVQ    nb+16(FP), R8
	VMOVDQU ·lbKvFP4(SB), Y13
	TABLEDOT(1, 17, SCALEE8M0)

// XSPAIR adds to Y11/Y12 the int32 lanes of sub-blocks 2p and 2p+1 of an
// IQ4_XS super-block: nibbles at 8+32p(SI) and 24+32p(SI), activations at
// 4+64p(DI) and 36+64p(DI), each sub-block's int16 pair sums weighted by
// its scale (word 2p, 2p+1 of Y6, both lanes) with VPMADDWD.
#define XSPAIR(P) \
	TLOAD(8+32*P, Y2, X2, X4);      \
	TLOAD(24+32*P, Y3, X3, X5);     \
	VMOVDQU    4+64*P(DI), Y4;      \
	VMOVDQU    36+64*P(DI), Y5;     \
	SIGNMUL(Y2, Y4);                \
	SIGNMUL(Y3, Y5);                \
	VPSHUFB    ·lbShufW+128*P(SB), Y6, Y7;    \
	VPMADDWD   Y7, Y2, Y2;          \
	VPSHUFB    ·lbShufW+128*P+64(SB), Y6, Y7; \
	VPMADDWD   Y7, Y3, Y3;          \
	VPADDD     Y2, Y11, Y11;        \
	VPADDD     Y3, Y12, Y12

// func dotIQ4XSAVX2(w, a *byte, nb int) float32
//
// Per super-block: acc = fma(d_w·d_a, float(Σ_ib (ls_ib−32)·lanes_ib),
// acc), the eight 6-bit scales ls unpacked into int16 words with vector
// operations: low nibbles from scales_l (4(SI)), high two bits from
// scales_h (2(SI)) shifted per sub-block with VPSRLVD.
TEXT ·dotIQ4XSAVX2(SB), NOSPLIT, $0-28
	MOVQ    w+0(FP), SI
	MOVQ    a+8(FP), DI
	MOVQ    nb+16(FP), R8
	VMOVDQU ·lbKvIQ4(SB), Y13
	BYTES($0x0F0F0F0F, Y14, X14)
	VXORPS  Y0, Y0, Y0

loop:
	LB_XS_SCALES8(4(SI), 2(SI), X6, X7, Y7, X8)
	VINSERTI128  $1, X6, Y6, Y6
	VPXOR        Y11, Y11, Y11
	VPXOR        Y12, Y12, Y12
	XSPAIR(0)
	XSPAIR(1)
	XSPAIR(2)
	XSPAIR(3)
	VPADDD       Y12, Y11, Y11
	VCVTDQ2PS    Y11, Y11
	VPBROADCASTW (SI), X4
	VCVTPH2PS    X4, Y4
	VBROADCASTSS (DI), Y5
	VMULPS       Y5, Y4, Y4
	VFMADD231PS  Y4, Y11, Y0
	ADDQ         $136, SI
	ADDQ         $292, DI
	DECQ         R8
	JNE          loop

	HSUM8(Y0, X0, X1)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// K2Q adds to Y10 the scaled int32 lanes of the 2-bit quants at bits 2I of
// the 32 qs bytes in Y11 (one 128-element half H of the super-block)
// against the 32 activations at 4+128H+32I(DI): VPMADDUBSW of the
// unsigned quants, then VPMADDWD with the scales of 16-element sub-blocks
// 8H+2I (low lane) and 8H+2I+1 (high lane) from SC (the half's eight
// scales as int16 in both lanes). Y12 = 0x03 bytes.
#define K2Q(H, I, SC) \
	VPSRLW     $(2*I), Y11, Y2;          \
	VPAND      Y12, Y2, Y2;              \
	VPMADDUBSW 4+128*H+32*I(DI), Y2, Y2; \
	VPSHUFB    ·lbShufQ3+64*I(SB), SC, Y3; \
	VPMADDWD   Y3, Y2, Y2;               \
	VPADDD     Y2, Y10, Y10

// func dotQ2KAVX2(w, a *byte, nb int) float32
//
// Per super-block, as ggml: acc = fma(−d_a·dmin_w, float(Σ m·bsum lanes),
// acc), then acc = fma(d_a·d_w, float(Σ sc·q·a lanes), acc).
TEXT ·dotQ2KAVX2(SB), NOSPLIT, $0-28
	MOVQ   w+0(FP), SI
	MOVQ   a+8(FP), DI
	MOVQ   nb+16(FP), R8
	BYTES($0x0F0F0F0F, Y14, X14)
	BYTES($0x03030303, Y12, X12)
	BYTES($0x80000000, Y15, X15)
	VXORPS Y0, Y0, Y0

loop:
	VBROADCASTSS (DI), Y5
	VPBROADCASTW 80(SI), X4
	VCVTPH2PS    X4, Y4
	VMULPS       Y4, Y5, Y4
	VPBROADCASTW 82(SI), X3
	VCVTPH2PS    X3, Y3
	VXORPS       Y15, Y5, Y5
	VMULPS       Y3, Y5, Y3
	VMOVDQU      (SI), X6
	VPSRLW       $4, X6, X7
	VPAND        X14, X7, X7
	VPMOVZXBW    X7, Y7
	VPMADDWD     260(DI), Y7, Y7
	VCVTDQ2PS    Y7, Y7
	VFMADD231PS  Y3, Y7, Y0
	VPAND        X14, X6, X6
	VPMOVZXBW    X6, Y6
	VPERMQ       $0x44, Y6, Y8
	VPERMQ       $0xee, Y6, Y9
	VPXOR        Y10, Y10, Y10
	VMOVDQU      16(SI), Y11
	K2Q(0, 0, Y8)
	K2Q(0, 1, Y8)
	K2Q(0, 2, Y8)
	K2Q(0, 3, Y8)
	VMOVDQU      48(SI), Y11
	K2Q(1, 0, Y9)
	K2Q(1, 1, Y9)
	K2Q(1, 2, Y9)
	K2Q(1, 3, Y9)
	VCVTDQ2PS    Y10, Y10
	VFMADD231PS  Y4, Y10, Y0
	ADDQ         $84, SI
	ADDQ         $292, DI
	DECQ         R8
	JNE          loop

	HSUM8(Y0, X0, X1)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// K3Q is K2Q for Q3_K: the low two bits at bits 2I of Y11 and the high bit
// B of the hmask bytes in Y9 (quant q − 4 where the bit is clear), taken
// as ggml does: VPMADDUBSW of the low bits minus VPMADDUBSW of 4·(bit
// clear), both against the activations. Y12 = 0x03 bytes, Y13 = 0x01
// bytes, Y14 = 0x04 bytes.
#define K3Q(H, I, B, SC) \
	VPSRLW     $(2*I), Y11, Y2;          \
	VPAND      Y12, Y2, Y2;              \
	VPSLLW     $(B), Y13, Y3;            \
	VPANDN     Y3, Y9, Y4;               \
	VPCMPEQB   Y3, Y4, Y4;               \
	VPAND      Y14, Y4, Y4;              \
	VMOVDQU    4+128*H+32*I(DI), Y5;     \
	VPMADDUBSW Y5, Y2, Y2;               \
	VPMADDUBSW Y5, Y4, Y4;               \
	VPSUBW     Y4, Y2, Y2;               \
	VPSHUFB    ·lbShufQ3+64*I(SB), SC, Y3; \
	VPMADDWD   Y3, Y2, Y2;               \
	VPADDD     Y2, Y10, Y10

// func dotQ3KAVX2(w, a *byte, nb int) float32
//
// Per super-block: acc = fma(d_a·d_w, float(Σ (sc−32)·q·a lanes), acc),
// the sixteen 6-bit scales unpacked as ggml does (four dwords of bytes from
// the 12 scale bytes at 96(SI), minus 32, widened to int16).
TEXT ·dotQ3KAVX2(SB), NOSPLIT, $0-28
	MOVQ   w+0(FP), SI
	MOVQ   a+8(FP), DI
	MOVQ   nb+16(FP), R8
	BYTES($0x03030303, Y12, X12)
	BYTES($0x01010101, Y13, X13)
	BYTES($0x04040404, Y14, X14)
	VXORPS Y0, Y0, Y0

loop:
	LB_Q3_SCALES16(96(SI), 100(SI), 104(SI), X6, Y6, AX, BX, DX, R9, R10)
	VPERMQ       $0x44, Y6, Y7
	VPERMQ       $0xee, Y6, Y8
	VMOVDQU      (SI), Y9
	VPXOR        Y10, Y10, Y10
	VMOVDQU      32(SI), Y11
	K3Q(0, 0, 0, Y7)
	K3Q(0, 1, 1, Y7)
	K3Q(0, 2, 2, Y7)
	K3Q(0, 3, 3, Y7)
	VMOVDQU      64(SI), Y11
	K3Q(1, 0, 4, Y8)
	K3Q(1, 1, 5, Y8)
	K3Q(1, 2, 6, Y8)
	K3Q(1, 3, 7, Y8)
	VCVTDQ2PS    Y10, Y10
	VBROADCASTSS (DI), Y5
	VPBROADCASTW 108(SI), X4
	VCVTPH2PS    X4, Y4
	VMULPS       Y4, Y5, Y4
	VFMADD231PS  Y4, Y10, Y0
	ADDQ         $110, SI
	ADDQ         $292, DI
	DECQ         R8
	JNE          loop

	HSUM8(Y0, X0, X1)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// The constants of the low-bit kernels (lowbit_amd64.h), shared by their files.

// lbKvIQ4, lbKvFP4: kvalues_iq4nl and kvalues_mxfp4 in each 128-bit lane.
DATA ·lbKvIQ4+0(SB)/8, $0xf6eaddcfbfad9881
DATA ·lbKvIQ4+8(SB)/8, $0x7159453526190d01
DATA ·lbKvIQ4+16(SB)/8, $0xf6eaddcfbfad9881
DATA ·lbKvIQ4+24(SB)/8, $0x7159453526190d01
DATA ·lbKvIQ4+32(SB)/8, $0xf6eaddcfbfad9881
DATA ·lbKvIQ4+40(SB)/8, $0x7159453526190d01
DATA ·lbKvIQ4+48(SB)/8, $0xf6eaddcfbfad9881
DATA ·lbKvIQ4+56(SB)/8, $0x7159453526190d01
GLOBL ·lbKvIQ4(SB), RODATA|NOPTR, $64

DATA ·lbKvFP4+0(SB)/8, $0x0c08060403020100
DATA ·lbKvFP4+8(SB)/8, $0xf4f8fafcfdfeff00
DATA ·lbKvFP4+16(SB)/8, $0x0c08060403020100
DATA ·lbKvFP4+24(SB)/8, $0xf4f8fafcfdfeff00
DATA ·lbKvFP4+32(SB)/8, $0x0c08060403020100
DATA ·lbKvFP4+40(SB)/8, $0xf4f8fafcfdfeff00
DATA ·lbKvFP4+48(SB)/8, $0x0c08060403020100
DATA ·lbKvFP4+56(SB)/8, $0xf4f8fafcfdfeff00
GLOBL ·lbKvFP4(SB), RODATA|NOPTR, $64

// lbShift4: word shift counts 0 in 128-bit lanes 0 and 2, 4 in lanes 1 and 3.
DATA ·lbShift4+0(SB)/8, $0x0000000000000000
DATA ·lbShift4+8(SB)/8, $0x0000000000000000
DATA ·lbShift4+16(SB)/8, $0x0004000400040004
DATA ·lbShift4+24(SB)/8, $0x0004000400040004
DATA ·lbShift4+32(SB)/8, $0x0000000000000000
DATA ·lbShift4+40(SB)/8, $0x0000000000000000
DATA ·lbShift4+48(SB)/8, $0x0004000400040004
DATA ·lbShift4+56(SB)/8, $0x0004000400040004
GLOBL ·lbShift4(SB), RODATA|NOPTR, $64

// lbXsShift: dword i = 2i, the shift of IQ4_XS sub-block i's high scale
// bits; lbXs30: 0x30 dwords; lbXs32: 32 words.
DATA ·lbXsShift+0(SB)/8, $0x0000000200000000
DATA ·lbXsShift+8(SB)/8, $0x0000000600000004
DATA ·lbXsShift+16(SB)/8, $0x0000000a00000008
DATA ·lbXsShift+24(SB)/8, $0x0000000e0000000c
GLOBL ·lbXsShift(SB), RODATA|NOPTR, $32

DATA ·lbXs30+0(SB)/8, $0x0000003000000030
DATA ·lbXs30+8(SB)/8, $0x0000003000000030
DATA ·lbXs30+16(SB)/8, $0x0000003000000030
DATA ·lbXs30+24(SB)/8, $0x0000003000000030
GLOBL ·lbXs30(SB), RODATA|NOPTR, $32

DATA ·lbXs32+0(SB)/8, $0x0020002000200020
DATA ·lbXs32+8(SB)/8, $0x0020002000200020
GLOBL ·lbXs32(SB), RODATA|NOPTR, $16

// Byte constants, and lbSign: float32 sign bits.
DATA ·lbC0F+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA ·lbC0F+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA ·lbC0F+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA ·lbC0F+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL ·lbC0F(SB), RODATA|NOPTR, $32

DATA ·lbC01+0(SB)/8, $0x0101010101010101
DATA ·lbC01+8(SB)/8, $0x0101010101010101
DATA ·lbC01+16(SB)/8, $0x0101010101010101
DATA ·lbC01+24(SB)/8, $0x0101010101010101
GLOBL ·lbC01(SB), RODATA|NOPTR, $32

DATA ·lbC04+0(SB)/8, $0x0404040404040404
DATA ·lbC04+8(SB)/8, $0x0404040404040404
DATA ·lbC04+16(SB)/8, $0x0404040404040404
DATA ·lbC04+24(SB)/8, $0x0404040404040404
GLOBL ·lbC04(SB), RODATA|NOPTR, $32

DATA ·lbC20+0(SB)/8, $0x2020202020202020
DATA ·lbC20+8(SB)/8, $0x2020202020202020
GLOBL ·lbC20(SB), RODATA|NOPTR, $16

DATA ·lbSign+0(SB)/8, $0x8000000080000000
DATA ·lbSign+8(SB)/8, $0x8000000080000000
DATA ·lbSign+16(SB)/8, $0x8000000080000000
DATA ·lbSign+24(SB)/8, $0x8000000080000000
GLOBL ·lbSign(SB), RODATA|NOPTR, $32

// lbShufW mask j (64 bytes at 64·j) broadcasts int16 word j of each 128-bit
// lane to the lane; its first 32 bytes are the 256-bit mask.
DATA ·lbShufW+0(SB)/8, $0x0100010001000100
DATA ·lbShufW+8(SB)/8, $0x0100010001000100
DATA ·lbShufW+16(SB)/8, $0x0100010001000100
DATA ·lbShufW+24(SB)/8, $0x0100010001000100
DATA ·lbShufW+32(SB)/8, $0x0100010001000100
DATA ·lbShufW+40(SB)/8, $0x0100010001000100
DATA ·lbShufW+48(SB)/8, $0x0100010001000100
DATA ·lbShufW+56(SB)/8, $0x0100010001000100
DATA ·lbShufW+64(SB)/8, $0x0302030203020302
DATA ·lbShufW+72(SB)/8, $0x0302030203020302
DATA ·lbShufW+80(SB)/8, $0x0302030203020302
DATA ·lbShufW+88(SB)/8, $0x0302030203020302
DATA ·lbShufW+96(SB)/8, $0x0302030203020302
DATA ·lbShufW+104(SB)/8, $0x0302030203020302
DATA ·lbShufW+112(SB)/8, $0x0302030203020302
DATA ·lbShufW+120(SB)/8, $0x0302030203020302
DATA ·lbShufW+128(SB)/8, $0x0504050405040504
DATA ·lbShufW+136(SB)/8, $0x0504050405040504
DATA ·lbShufW+144(SB)/8, $0x0504050405040504
DATA ·lbShufW+152(SB)/8, $0x0504050405040504
DATA ·lbShufW+160(SB)/8, $0x0504050405040504
DATA ·lbShufW+168(SB)/8, $0x0504050405040504
DATA ·lbShufW+176(SB)/8, $0x0504050405040504
DATA ·lbShufW+184(SB)/8, $0x0504050405040504
DATA ·lbShufW+192(SB)/8, $0x0706070607060706
DATA ·lbShufW+200(SB)/8, $0x0706070607060706
DATA ·lbShufW+208(SB)/8, $0x0706070607060706
DATA ·lbShufW+216(SB)/8, $0x0706070607060706
DATA ·lbShufW+224(SB)/8, $0x0706070607060706
DATA ·lbShufW+232(SB)/8, $0x0706070607060706
DATA ·lbShufW+240(SB)/8, $0x0706070607060706
DATA ·lbShufW+248(SB)/8, $0x0706070607060706
DATA ·lbShufW+256(SB)/8, $0x0908090809080908
DATA ·lbShufW+264(SB)/8, $0x0908090809080908
DATA ·lbShufW+272(SB)/8, $0x0908090809080908
DATA ·lbShufW+280(SB)/8, $0x0908090809080908
DATA ·lbShufW+288(SB)/8, $0x0908090809080908
DATA ·lbShufW+296(SB)/8, $0x0908090809080908
DATA ·lbShufW+304(SB)/8, $0x0908090809080908
DATA ·lbShufW+312(SB)/8, $0x0908090809080908
DATA ·lbShufW+320(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA ·lbShufW+328(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA ·lbShufW+336(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA ·lbShufW+344(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA ·lbShufW+352(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA ·lbShufW+360(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA ·lbShufW+368(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA ·lbShufW+376(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA ·lbShufW+384(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA ·lbShufW+392(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA ·lbShufW+400(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA ·lbShufW+408(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA ·lbShufW+416(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA ·lbShufW+424(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA ·lbShufW+432(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA ·lbShufW+440(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA ·lbShufW+448(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA ·lbShufW+456(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA ·lbShufW+464(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA ·lbShufW+472(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA ·lbShufW+480(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA ·lbShufW+488(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA ·lbShufW+496(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA ·lbShufW+504(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL ·lbShufW(SB), RODATA|NOPTR, $512

// lbShufQ3 mask i (ggml's get_scale_shuffle_q3k(i), 64 bytes at 64·i)
// broadcasts word 2i over 128-bit lanes 0 and 2 and word 2i+1 over lanes 1
// and 3; its first 32 bytes are the 256-bit mask.
DATA ·lbShufQ3+0(SB)/8, $0x0100010001000100
DATA ·lbShufQ3+8(SB)/8, $0x0100010001000100
DATA ·lbShufQ3+16(SB)/8, $0x0302030203020302
DATA ·lbShufQ3+24(SB)/8, $0x0302030203020302
DATA ·lbShufQ3+32(SB)/8, $0x0100010001000100
DATA ·lbShufQ3+40(SB)/8, $0x0100010001000100
DATA ·lbShufQ3+48(SB)/8, $0x0302030203020302
DATA ·lbShufQ3+56(SB)/8, $0x0302030203020302
DATA ·lbShufQ3+64(SB)/8, $0x0504050405040504
DATA ·lbShufQ3+72(SB)/8, $0x0504050405040504
DATA ·lbShufQ3+80(SB)/8, $0x0706070607060706
DATA ·lbShufQ3+88(SB)/8, $0x0706070607060706
DATA ·lbShufQ3+96(SB)/8, $0x0504050405040504
DATA ·lbShufQ3+104(SB)/8, $0x0504050405040504
DATA ·lbShufQ3+112(SB)/8, $0x0706070607060706
DATA ·lbShufQ3+120(SB)/8, $0x0706070607060706
DATA ·lbShufQ3+128(SB)/8, $0x0908090809080908
DATA ·lbShufQ3+136(SB)/8, $0x0908090809080908
DATA ·lbShufQ3+144(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA ·lbShufQ3+152(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA ·lbShufQ3+160(SB)/8, $0x0908090809080908
DATA ·lbShufQ3+168(SB)/8, $0x0908090809080908
DATA ·lbShufQ3+176(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA ·lbShufQ3+184(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA ·lbShufQ3+192(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA ·lbShufQ3+200(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA ·lbShufQ3+208(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA ·lbShufQ3+216(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA ·lbShufQ3+224(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA ·lbShufQ3+232(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA ·lbShufQ3+240(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA ·lbShufQ3+248(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL ·lbShufQ3(SB), RODATA|NOPTR, $256
