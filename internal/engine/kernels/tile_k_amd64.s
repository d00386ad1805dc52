// Eight-token K-quant tiles at the AVX512 level: many weight rows (one
// group per call) against eight tokens whose Q8_K rows are laid out by
// prepareTileK8. Each output equals the AVX2 row kernel's (dotQ4KAVX2,
// dotQ5KAVX2, dotQ6KAVX2) bit for bit: the eight int32 lanes of each sum
// hold the same exact integers (VNNI only changes how they are added up),
// and the float operations per lane are the same ones in the same order.
// Two tokens share each register (lanes 0-7 and 8-15): their activations
// are laid out in pairs, so one 64-byte load holds a 32-quant sub-block of
// both, which meets a weight register holding that sub-block twice, and
// their int and float sums need no shuffling.

#include "textflag.h"

// Prepared super-block record (see prepareTileK8): 4 pairs × 8 sub-blocks
// × (32 + 32) quants, then 4 pairs × 16 float32 scales d_a, then 4 pairs ×
// 32 int16 bsums.
#define KT_DA 2048
#define KT_BS 2304
#define KT_SB 2560

// HSUM8 as in quant_amd64.s.
#define HSUM8(Y, X, T) \
	VEXTRACTF128 $1, Y, T; \
	VADDPS       T, X, X;  \
	VMOVHLPS     X, X, T;  \
	VADDPS       T, X, X;  \
	VMOVSHDUP    X, T;     \
	VADDSS       T, X, X

// K8PAIR adds pair P's products of sub-blocks S0 (weights Z5, scale words
// Z4) and S1 (weights W1, scale words SC1) into its int accumulator ACC,
// with OP for the first (VPMADDWD for the first chunk, VPDPWSSD after).
#define K8PAIR(OP, P, S0, W1, SC1, S1, ACC) \
	VPMADDUBSW (512*(P)+64*(S0))(R10), Z5, Z6; \
	OP         Z4, Z6, ACC;                \
	VPMADDUBSW (512*(P)+64*(S1))(R10), W1, Z7; \
	VPDPWSSD   SC1, Z7, ACC

#define K8PAIRS(OP, S0, W1, SC1, S1) \
	K8PAIR(OP, 0, S0, W1, SC1, S1, Z20); \
	K8PAIR(OP, 1, S0, W1, SC1, S1, Z21); \
	K8PAIR(OP, 2, S0, W1, SC1, S1, Z22); \
	K8PAIR(OP, 3, S0, W1, SC1, S1, Z23)

// K4T8FINISH folds pair P's sums ACCI into its float accumulator ACC as
// dotQ4KAVX2 does: Z1 = the mins as word pairs, Z2 = d_w, Z3 = dmin_w.
#define K4T8FINISH(P, ACCI, ACC) \
	VCVTDQ2PS    ACCI, Z6;                 \
	VPMADDWD     (KT_BS+64*P)(R10), Z1, Z7; \
	VCVTDQ2PS    Z7, Z7;                   \
	VMULPS       (KT_DA+64*P)(R10), Z2, Z8; \
	VFMADD231PS  Z8, Z6, ACC;              \
	VMULPS       (KT_DA+64*P)(R10), Z3, Z9; \
	VFNMADD231PS Z9, Z7, ACC

// K8STORE stores the two tokens' reductions of ACC (HSUM8 of each half)
// at (BX) and (BX)+DX, and advances BX by 2·DX.
#define K8STORE(ACC) \
	VEXTRACTF64X4 $0, ACC, Y0; \
	VEXTRACTF64X4 $1, ACC, Y1; \
	HSUM8(Y0, X0, X2);         \
	VMOVSS        X0, (BX);    \
	ADDQ          DX, BX;      \
	HSUM8(Y1, X1, X2);         \
	VMOVSS        X1, (BX);    \
	ADDQ          DX, BX

// K4BPAIR adds pair P's chunk C to its int sums ACC with one VPDPWSSD for
// both sub-blocks: (4·d_hi + 1) << 14 = d_hi·65536 + 16384 from VPDPBUSD
// of the high nibbles × 4 (Z11) on a dword 1 (Z13), then the low nibbles'
// d_lo (Z5) on top, whose low word d_lo + 16384 is in [8764, 24004]: the
// dword holds the words d_lo + 16384 and d_hi, and VPDPWSSD with the
// scale words (Z4: sc_2C, sc_2C+1) adds sc·d exactly plus 16384·sc_2C,
// which the sums' start takes off.
#define K4BPAIR(P, C, ACC) \
	VMOVDQA64 Z13, Z6;                                \
	VPDPBUSD  (512*(P)+64*(2*C+1))(R10), Z11, Z6;     \
	VPSLLD    $14, Z6, Z6;                            \
	VPDPBUSD  (512*(P)+64*(2*C))(R10), Z5, Z6;        \
	VPDPWSSD  Z4, Z6, ACC

// K4BCHUNK does 64-element chunk C of a Q4_K super-block (sub-blocks 2C
// and 2C+1) for the four pairs: the low nibbles of its 32 bytes twice in
// Z5, the high ones × 4 twice in Z11 (Z15 = 0x0F, Z14 = 0x3C bytes), the
// two scales as the words of each dword of Z4.
#define K4BCHUNK(C) \
	VBROADCASTI64X4 (16+32*C)(SI), Z11; \
	VPANDD          Z15, Z11, Z5;       \
	VPSRLW          $2, Z11, Z11;       \
	VPANDD          Z14, Z11, Z11;      \
	VPBROADCASTD    (4*C)(SP), Z4;      \
	K4BPAIR(0, C, Z20);                 \
	K4BPAIR(1, C, Z21);                 \
	K4BPAIR(2, C, Z22);                 \
	K4BPAIR(3, C, Z23)

// func dotQ4Kx8RowsVNNI(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int)
// computes, for nrows >= 1 Q4_K weight rows wrb bytes apart and eight
// tokens, row r's output for token t into y[r + t·ystride], over nb >= 1
// super-blocks; prep is the tile's data (see prepareTileK8).
TEXT ·dotQ4Kx8RowsVNNI(SB), NOSPLIT, $16-56
	MOVQ         w+0(FP), R11
	MOVQ         wrb+8(FP), R12
	MOVQ         nrows+16(FP), R13
	MOVQ         y+40(FP), R14
	MOVL         $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z15
	MOVL         $0x3C3C3C3C, AX
	VPBROADCASTD AX, Z14
	MOVL         $1, AX
	VPBROADCASTD AX, Z13

k4row:
	MOVQ   R11, SI
	MOVQ   prep+24(FP), R10
	MOVQ   nb+32(FP), CX
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19

k4sb:
	// Scales and mins as dotQ4KAVX2 unpacks them: sc in R8 (0-3), R9
	// (4-7), mins in DI (0-3), AX (4-7).
	MOVL        4(SI), AX
	MOVL        8(SI), BX
	MOVL        12(SI), DX
	MOVL        AX, R8
	ANDL        $0x3f3f3f3f, R8
	MOVL        AX, R9
	SHRL        $6, R9
	ANDL        $0x03030303, R9
	SHLL        $4, R9
	MOVL        DX, DI
	ANDL        $0x0f0f0f0f, DI
	ORL         DI, R9
	MOVL        BX, DI
	ANDL        $0x3f3f3f3f, DI
	MOVL        BX, AX
	SHRL        $6, AX
	ANDL        $0x03030303, AX
	SHLL        $4, AX
	SHRL        $4, DX
	ANDL        $0x0f0f0f0f, DX
	ORL         DX, AX
	VMOVD       R8, X0
	VPINSRD     $1, R9, X0, X0
	VPMOVZXBW   X0, X0
	VMOVDQU     X0, 0(SP)
	VMOVD       DI, X1
	VPINSRD     $1, AX, X1, X1
	VPMOVZXBD   X1, Y1
	VPSLLD      $16, Y1, Y2
	VPOR        Y2, Y1, Y1
	VINSERTI64X4 $1, Y1, Z1, Z1
	// The sums start at -16384·(sc0 + sc2 + sc4 + sc6), the bias the
	// chunks add (see K4BPAIR).
	MOVL         R8, BX
	ANDL         $0x00ff00ff, BX
	MOVL         R9, DX
	ANDL         $0x00ff00ff, DX
	ADDL         DX, BX
	MOVL         BX, DX
	SHRL         $16, DX
	ADDL         DX, BX
	ANDL         $0xffff, BX
	SHLL         $14, BX
	NEGL         BX
	VPBROADCASTD BX, Z12
	VMOVDQA64    Z12, Z20
	VMOVDQA64    Z12, Z21
	VMOVDQA64    Z12, Z22
	VMOVDQA64    Z12, Z23

	K4BCHUNK(0)
	K4BCHUNK(1)
	K4BCHUNK(2)
	K4BCHUNK(3)

	VPBROADCASTW 0(SI), Y2
	VCVTPH2PS    Y2, Z2
	VPBROADCASTW 2(SI), Y3
	VCVTPH2PS    Y3, Z3
	K4T8FINISH(0, Z20, Z16)
	K4T8FINISH(1, Z21, Z17)
	K4T8FINISH(2, Z22, Z18)
	K4T8FINISH(3, Z23, Z19)
	ADDQ         $144, SI
	ADDQ         $KT_SB, R10
	DECQ         CX
	JNZ          k4sb

	MOVQ R14, BX
	MOVQ ystride+48(FP), DX
	SHLQ $2, DX
	K8STORE(Z16)
	K8STORE(Z17)
	K8STORE(Z18)
	K8STORE(Z19)
	ADDQ $4, R14
	ADDQ R12, R11
	DECQ R13
	JNZ  k4row
	VZEROUPPER
	RET

// K5BCHUNK is K4BCHUNK for Q5_K: the nibbles at 48+32C(SI) with their
// 5th bits from the qh bytes (both halves of Z12), moved by SL $NL to bit
// 4 for sub-block 2C (Z10 = 0x10 bytes) and by SH $NH to bit 6 for 2C+1,
// whose quants are taken × 4 (Z24 = 0x3C, Z25 = 0x40 bytes). d_lo + 16384
// stays in [636, 32132] and (4·d_hi + 1) << 14 below 2^31.
#define K5BCHUNK(C, SL, NL, SH, NH) \
	VBROADCASTI64X4 (48+32*C)(SI), Z9;  \
	SL              $NL, Z12, Z5;       \
	VPANDD          Z10, Z5, Z5;        \
	VPTERNLOGD      $0xF8, Z15, Z9, Z5; \
	VPSRLW          $2, Z9, Z9;         \
	SH              $NH, Z12, Z11;      \
	VPANDD          Z25, Z11, Z11;      \
	VPTERNLOGD      $0xF8, Z24, Z9, Z11; \
	VPBROADCASTD    (4*C)(SP), Z4;      \
	K4BPAIR(0, C, Z20);                 \
	K4BPAIR(1, C, Z21);                 \
	K4BPAIR(2, C, Z22);                 \
	K4BPAIR(3, C, Z23)

// func dotQ5Kx8RowsVNNI(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int)
// is dotQ4Kx8RowsVNNI for Q5_K rows.
TEXT ·dotQ5Kx8RowsVNNI(SB), NOSPLIT, $16-56
	MOVQ         w+0(FP), R11
	MOVQ         wrb+8(FP), R12
	MOVQ         nrows+16(FP), R13
	MOVQ         y+40(FP), R14
	MOVL         $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z15
	MOVL         $0x3C3C3C3C, AX
	VPBROADCASTD AX, Z14
	MOVL         $1, AX
	VPBROADCASTD AX, Z13
	MOVL         $0x10101010, AX
	VPBROADCASTD AX, Z10
	MOVL         $0x3C3C3C3C, AX
	VPBROADCASTD AX, Z24
	MOVL         $0x40404040, AX
	VPBROADCASTD AX, Z25

k5row:
	MOVQ   R11, SI
	MOVQ   prep+24(FP), R10
	MOVQ   nb+32(FP), CX
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19

k5sb:
	// Scales and mins as dotQ5KAVX2 unpacks them: sc in R8 (0-3), R9
	// (4-7), mins in DI (0-3), AX (4-7).
	MOVL        4(SI), AX
	MOVL        8(SI), BX
	MOVL        12(SI), DX
	MOVL        AX, R8
	ANDL        $0x3f3f3f3f, R8
	MOVL        AX, R9
	SHRL        $6, R9
	ANDL        $0x03030303, R9
	SHLL        $4, R9
	MOVL        DX, DI
	ANDL        $0x0f0f0f0f, DI
	ORL         DI, R9
	MOVL        BX, DI
	ANDL        $0x3f3f3f3f, DI
	MOVL        BX, AX
	SHRL        $6, AX
	ANDL        $0x03030303, AX
	SHLL        $4, AX
	SHRL        $4, DX
	ANDL        $0x0f0f0f0f, DX
	ORL         DX, AX
	VMOVD       R8, X0
	VPINSRD     $1, R9, X0, X0
	VPMOVZXBW   X0, X0
	VMOVDQU     X0, 0(SP)
	VMOVD       DI, X1
	VPINSRD     $1, AX, X1, X1
	VPMOVZXBD   X1, Y1
	VPSLLD      $16, Y1, Y2
	VPOR        Y2, Y1, Y1
	VINSERTI64X4 $1, Y1, Z1, Z1
	// The sums start at -16384·(sc0 + sc2 + sc4 + sc6), the bias the
	// chunks add (see K4BPAIR).
	MOVL         R8, BX
	ANDL         $0x00ff00ff, BX
	MOVL         R9, DX
	ANDL         $0x00ff00ff, DX
	ADDL         DX, BX
	MOVL         BX, DX
	SHRL         $16, DX
	ADDL         DX, BX
	ANDL         $0xffff, BX
	SHLL         $14, BX
	NEGL         BX
	VPBROADCASTD BX, Z12
	VMOVDQA64    Z12, Z20
	VMOVDQA64    Z12, Z21
	VMOVDQA64    Z12, Z22
	VMOVDQA64    Z12, Z23

	VBROADCASTI64X4 16(SI), Z12
	K5BCHUNK(0, VPSLLW, 4, VPSLLW, 5)
	K5BCHUNK(1, VPSLLW, 2, VPSLLW, 3)
	K5BCHUNK(2, VPSLLW, 0, VPSLLW, 1)
	K5BCHUNK(3, VPSRLW, 2, VPSRLW, 1)

	VPBROADCASTW 0(SI), Y2
	VCVTPH2PS    Y2, Z2
	VPBROADCASTW 2(SI), Y3
	VCVTPH2PS    Y3, Z3
	K4T8FINISH(0, Z20, Z16)
	K4T8FINISH(1, Z21, Z17)
	K4T8FINISH(2, Z22, Z18)
	K4T8FINISH(3, Z23, Z19)
	ADDQ         $176, SI
	ADDQ         $KT_SB, R10
	DECQ         CX
	JNZ          k5sb

	MOVQ R14, BX
	MOVQ ystride+48(FP), DX
	SHLQ $2, DX
	K8STORE(Z16)
	K8STORE(Z17)
	K8STORE(Z18)
	K8STORE(Z19)
	ADDQ $4, R14
	ADDQ R12, R11
	DECQ R13
	JNZ  k5row
	VZEROUPPER
	RET

// K6T8CHUNK0 builds in Z5 the 64 unsigned 6-bit quants of quarters 0 and
// 1 of a Q6_K half (ql in Z10, qh in both halves of Z11): low nibbles of
// ql, bits 4-5 from qh << 4 (lower half) and qh << 2 (upper half).
#define K6T8CHUNK0 \
	VPSLLVW    k6shl<>(SB), Z11, Z5; \
	VPANDD     Z14, Z5, Z5;          \
	VPTERNLOGD $0xF8, Z15, Z10, Z5

// K6T8CHUNK1 does quarters 2 and 3: high nibbles of ql, bits 4-5 from qh
// (lower half) and qh >> 2 (upper half).
#define K6T8CHUNK1 \
	VPSRLVW    k6shr<>(SB), Z11, Z5; \
	VPANDD     Z14, Z5, Z5;          \
	VPSRLW     $4, Z10, Z7;          \
	VPTERNLOGD $0xF8, Z15, Z7, Z5

// K6T8QUARTERS does quarters G and G+1 of the super-block, built in Z5
// by K6T8CHUNK0/1: each twice in Z8 and Z9, their scale words (from the 16
// in Z13, by the indexes in IG and IG1) in Z4 and Z3.
#define K6T8QUARTERS(OP, G, IG, IG1) \
	VSHUFI64X2 $0xEE, Z5, Z5, Z9; \
	VSHUFI64X2 $0x44, Z5, Z5, Z5; \
	VPERMW     Z13, IG, Z4;       \
	VPERMW     Z13, IG1, Z3;      \
	K8PAIRS(OP, G, Z9, Z3, G+1)

// K6T8FINISH folds pair P's sums ACCI into its float accumulator ACC as
// dotQ6KAVX2 does: Z13 = the 16 scale words (both halves), Z2 = d_w.
#define K6T8FINISH(P, ACCI, ACC) \
	VPMADDWD     (KT_BS+64*P)(R10), Z13, Z7; \
	VPSLLD       $5, Z7, Z7;               \
	VPSUBD       Z7, ACCI, Z6;             \
	VCVTDQ2PS    Z6, Z6;                   \
	VMULPS       (KT_DA+64*P)(R10), Z2, Z8; \
	VFMADD231PS  Z8, Z6, ACC

// func dotQ6Kx8RowsVNNI(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int)
// is dotQ4Kx8RowsVNNI for Q6_K rows.
TEXT ·dotQ6Kx8RowsVNNI(SB), NOSPLIT, $0-56
	MOVQ         w+0(FP), R11
	MOVQ         wrb+8(FP), R12
	MOVQ         nrows+16(FP), R13
	MOVQ         y+40(FP), R14
	MOVL         $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z15
	MOVL         $0x30303030, AX
	VPBROADCASTD AX, Z14
	VMOVDQU64    k6idx<>+0(SB), Z24
	VMOVDQU64    k6idx<>+64(SB), Z25
	VMOVDQU64    k6idx<>+128(SB), Z26
	VMOVDQU64    k6idx<>+192(SB), Z27
	VMOVDQU64    k6idx<>+256(SB), Z28
	VMOVDQU64    k6idx<>+320(SB), Z29
	VMOVDQU64    k6idx<>+384(SB), Z30
	VMOVDQU64    k6idx<>+448(SB), Z31

k6row:
	MOVQ   R11, SI
	MOVQ   prep+24(FP), R10
	MOVQ   nb+32(FP), CX
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19

k6sb:
	VPMOVSXBW       192(SI), Y13
	VINSERTI64X4    $1, Y13, Z13, Z13
	VMOVDQU64       0(SI), Z10
	VBROADCASTI64X4 128(SI), Z11
	K6T8CHUNK0
	K6T8QUARTERS(VPMADDWD, 0, Z24, Z25)
	K6T8CHUNK1
	K6T8QUARTERS(VPDPWSSD, 2, Z26, Z27)
	VMOVDQU64       64(SI), Z10
	VBROADCASTI64X4 160(SI), Z11
	K6T8CHUNK0
	K6T8QUARTERS(VPDPWSSD, 4, Z28, Z29)
	K6T8CHUNK1
	K6T8QUARTERS(VPDPWSSD, 6, Z30, Z31)

	VPBROADCASTW 208(SI), Y2
	VCVTPH2PS    Y2, Z2
	K6T8FINISH(0, Z20, Z16)
	K6T8FINISH(1, Z21, Z17)
	K6T8FINISH(2, Z22, Z18)
	K6T8FINISH(3, Z23, Z19)
	ADDQ         $210, SI
	ADDQ         $KT_SB, R10
	DECQ         CX
	JNZ          k6sb

	MOVQ R14, BX
	MOVQ ystride+48(FP), DX
	SHLQ $2, DX
	K8STORE(Z16)
	K8STORE(Z17)
	K8STORE(Z18)
	K8STORE(Z19)
	ADDQ $4, R14
	ADDQ R12, R11
	DECQ R13
	JNZ  k6row
	VZEROUPPER
	RET

// k6shl / k6shr: per-word shift counts, 16 words for the lower half and
// 16 for the upper (4 and 2 left; 0 and 2 right).
DATA k6shl<>+0(SB)/8, $0x0004000400040004
DATA k6shl<>+8(SB)/8, $0x0004000400040004
DATA k6shl<>+16(SB)/8, $0x0004000400040004
DATA k6shl<>+24(SB)/8, $0x0004000400040004
DATA k6shl<>+32(SB)/8, $0x0002000200020002
DATA k6shl<>+40(SB)/8, $0x0002000200020002
DATA k6shl<>+48(SB)/8, $0x0002000200020002
DATA k6shl<>+56(SB)/8, $0x0002000200020002
GLOBL k6shl<>(SB), RODATA|NOPTR, $64

DATA k6shr<>+0(SB)/8, $0
DATA k6shr<>+8(SB)/8, $0
DATA k6shr<>+16(SB)/8, $0
DATA k6shr<>+24(SB)/8, $0
DATA k6shr<>+32(SB)/8, $0x0002000200020002
DATA k6shr<>+40(SB)/8, $0x0002000200020002
DATA k6shr<>+48(SB)/8, $0x0002000200020002
DATA k6shr<>+56(SB)/8, $0x0002000200020002
GLOBL k6shr<>(SB), RODATA|NOPTR, $64

// k6idx quarter G (64 bytes): words 0-7 and 16-23 pick scale word 2G,
// words 8-15 and 24-31 scale word 2G+1 (a quarter's two sub-blocks of
// 16, for both tokens of a pair).
DATA k6idx<>+0(SB)/8, $0x0000000000000000
DATA k6idx<>+8(SB)/8, $0x0000000000000000
DATA k6idx<>+16(SB)/8, $0x0001000100010001
DATA k6idx<>+24(SB)/8, $0x0001000100010001
DATA k6idx<>+32(SB)/8, $0x0000000000000000
DATA k6idx<>+40(SB)/8, $0x0000000000000000
DATA k6idx<>+48(SB)/8, $0x0001000100010001
DATA k6idx<>+56(SB)/8, $0x0001000100010001
DATA k6idx<>+64(SB)/8, $0x0002000200020002
DATA k6idx<>+72(SB)/8, $0x0002000200020002
DATA k6idx<>+80(SB)/8, $0x0003000300030003
DATA k6idx<>+88(SB)/8, $0x0003000300030003
DATA k6idx<>+96(SB)/8, $0x0002000200020002
DATA k6idx<>+104(SB)/8, $0x0002000200020002
DATA k6idx<>+112(SB)/8, $0x0003000300030003
DATA k6idx<>+120(SB)/8, $0x0003000300030003
DATA k6idx<>+128(SB)/8, $0x0004000400040004
DATA k6idx<>+136(SB)/8, $0x0004000400040004
DATA k6idx<>+144(SB)/8, $0x0005000500050005
DATA k6idx<>+152(SB)/8, $0x0005000500050005
DATA k6idx<>+160(SB)/8, $0x0004000400040004
DATA k6idx<>+168(SB)/8, $0x0004000400040004
DATA k6idx<>+176(SB)/8, $0x0005000500050005
DATA k6idx<>+184(SB)/8, $0x0005000500050005
DATA k6idx<>+192(SB)/8, $0x0006000600060006
DATA k6idx<>+200(SB)/8, $0x0006000600060006
DATA k6idx<>+208(SB)/8, $0x0007000700070007
DATA k6idx<>+216(SB)/8, $0x0007000700070007
DATA k6idx<>+224(SB)/8, $0x0006000600060006
DATA k6idx<>+232(SB)/8, $0x0006000600060006
DATA k6idx<>+240(SB)/8, $0x0007000700070007
DATA k6idx<>+248(SB)/8, $0x0007000700070007
DATA k6idx<>+256(SB)/8, $0x0008000800080008
DATA k6idx<>+264(SB)/8, $0x0008000800080008
DATA k6idx<>+272(SB)/8, $0x0009000900090009
DATA k6idx<>+280(SB)/8, $0x0009000900090009
DATA k6idx<>+288(SB)/8, $0x0008000800080008
DATA k6idx<>+296(SB)/8, $0x0008000800080008
DATA k6idx<>+304(SB)/8, $0x0009000900090009
DATA k6idx<>+312(SB)/8, $0x0009000900090009
DATA k6idx<>+320(SB)/8, $0x000a000a000a000a
DATA k6idx<>+328(SB)/8, $0x000a000a000a000a
DATA k6idx<>+336(SB)/8, $0x000b000b000b000b
DATA k6idx<>+344(SB)/8, $0x000b000b000b000b
DATA k6idx<>+352(SB)/8, $0x000a000a000a000a
DATA k6idx<>+360(SB)/8, $0x000a000a000a000a
DATA k6idx<>+368(SB)/8, $0x000b000b000b000b
DATA k6idx<>+376(SB)/8, $0x000b000b000b000b
DATA k6idx<>+384(SB)/8, $0x000c000c000c000c
DATA k6idx<>+392(SB)/8, $0x000c000c000c000c
DATA k6idx<>+400(SB)/8, $0x000d000d000d000d
DATA k6idx<>+408(SB)/8, $0x000d000d000d000d
DATA k6idx<>+416(SB)/8, $0x000c000c000c000c
DATA k6idx<>+424(SB)/8, $0x000c000c000c000c
DATA k6idx<>+432(SB)/8, $0x000d000d000d000d
DATA k6idx<>+440(SB)/8, $0x000d000d000d000d
DATA k6idx<>+448(SB)/8, $0x000e000e000e000e
DATA k6idx<>+456(SB)/8, $0x000e000e000e000e
DATA k6idx<>+464(SB)/8, $0x000f000f000f000f
DATA k6idx<>+472(SB)/8, $0x000f000f000f000f
DATA k6idx<>+480(SB)/8, $0x000e000e000e000e
DATA k6idx<>+488(SB)/8, $0x000e000e000e000e
DATA k6idx<>+496(SB)/8, $0x000f000f000f000f
DATA k6idx<>+504(SB)/8, $0x000f000f000f000f
GLOBL k6idx<>(SB), RODATA|NOPTR, $512
