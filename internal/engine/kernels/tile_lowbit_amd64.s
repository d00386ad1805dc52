// Eight-token tiles of IQ4_XS, Q3_K and Q2_K weights at the AVX512 level:
// many weight rows (one group per call) against eight tokens whose Q8_K
// rows are laid out by prepareTileK8, as the Q4_K-Q6_K tiles
// (tile_k_amd64.s). Each output equals the row kernel's (dotIQ4XSAVX2,
// dotQ3KAVX2, dotQ2KAVX2: ggml's AVX2 vec_dot) bit for bit: every int32
// lane holds the same exact integer (the sum over the same four elements
// of quant·activation, times the same sub-block scale, over the same
// sub-blocks), and the float operations per lane are the same ones in the
// same order. Two tokens share each register (lanes 0-7 and 8-15) against
// a weight register holding the unpacked sub-block twice, so each
// unpacked weight vector serves eight tokens.
//
// Signed weights (IQ4_XS table values, Q3_K's q−4·(1−hbit)) meet the
// activations with the sign trick in 512-bit form: |w| from VPABSB, the
// activations negated where w < 0 (VPMOVB2M mask, masked VPSUBB), then
// VPMADDUBSW; the sub-block scale weights the int16 pair sums in
// VPDPWSSD. Q2_K's unsigned quants go straight into VPMADDUBSW.

#include "textflag.h"
#include "lowbit_amd64.h"

// Prepared super-block record (see prepareTileK8): pair P's sub-block S at
// 512·P + 64·S, its 16 float32 d_a at KT_DA + 64·P, its 32 int16 bsums at
// KT_BS + 64·P.
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

// LSTORE stores the two tokens' reductions of ACC (HSUM8 of each half)
// at (BX) and (BX)+DX, and advances BX by 2·DX.
#define LSTORE(ACC) \
	VEXTRACTF64X4 $0, ACC, Y0; \
	VEXTRACTF64X4 $1, ACC, Y1; \
	HSUM8(Y0, X0, X2);         \
	VMOVSS        X0, (BX);    \
	ADDQ          DX, BX;      \
	HSUM8(Y1, X1, X2);         \
	VMOVSS        X1, (BX);    \
	ADDQ          DX, BX

// LROWSTART loads the row loop's state: SI = the row, R10 = the tile data,
// CX = super-blocks, float accumulators Z16-Z19 zeroed.
#define LROWSTART \
	MOVQ   R11, SI;           \
	MOVQ   prep+24(FP), R10;  \
	MOVQ   nb+32(FP), CX;     \
	VPXORD Z16, Z16, Z16;     \
	VPXORD Z17, Z17, Z17;     \
	VPXORD Z18, Z18, Z18;     \
	VPXORD Z19, Z19, Z19

#define LZEROI \
	VPXORD Z20, Z20, Z20; \
	VPXORD Z21, Z21, Z21; \
	VPXORD Z22, Z22, Z22; \
	VPXORD Z23, Z23, Z23

// LFIN folds pair P's int sums ACCI into its float accumulator ACC:
// ACC = fma(d_w·d_a, float(ACCI), ACC), with Z2 = 16 × d_w.
#define LFIN(P, ACCI, ACC) \
	VCVTDQ2PS   ACCI, Z6;                 \
	VMULPS      (KT_DA+64*(P))(R10), Z2, Z8; \
	VFMADD231PS Z8, Z6, ACC

#define LFIN4 \
	LFIN(0, Z20, Z16); \
	LFIN(1, Z21, Z17); \
	LFIN(2, Z22, Z18); \
	LFIN(3, Z23, Z19)

// LROWEND stores the row's eight outputs and moves to the next row
// (R14 = &y[row], R12 = wrb, R13 = rows left), jumping to LOOP if any.
#define LROWEND(LOOP) \
	MOVQ R14, BX;            \
	MOVQ ystride+48(FP), DX; \
	SHLQ $2, DX;             \
	LSTORE(Z16);             \
	LSTORE(Z17);             \
	LSTORE(Z18);             \
	LSTORE(Z19);             \
	ADDQ $4, R14;            \
	ADDQ R12, R11;           \
	DECQ R13;                \
	JNZ  LOOP

#define LARGS \
	MOVQ w+0(FP), R11;       \
	MOVQ wrb+8(FP), R12;     \
	MOVQ nrows+16(FP), R13;  \
	MOVQ y+40(FP), R14

// SPAIR adds pair P's products of the signed weights |w| in Z5 (sign mask
// K1) with its sub-block S, weighted by the scale words in Z4, to ACC.
#define SPAIR(P, S, ACC) \
	VMOVDQU64  (512*(P)+64*(S))(R10), Z6; \
	VPSUBB     Z6, Z31, K1, Z6;          \
	VPMADDUBSW Z6, Z5, Z6;               \
	VPDPWSSD   Z4, Z6, ACC

#define SPAIRS(S) \
	SPAIR(0, S, Z20); \
	SPAIR(1, S, Z21); \
	SPAIR(2, S, Z22); \
	SPAIR(3, S, Z23)

// UPAIR is SPAIR for unsigned weights in Z5 (no sign trick).
#define UPAIR(P, S, ACC) \
	VPMADDUBSW (512*(P)+64*(S))(R10), Z5, Z6; \
	VPDPWSSD   Z4, Z6, ACC

#define UPAIRS(S) \
	UPAIR(0, S, Z20); \
	UPAIR(1, S, Z21); \
	UPAIR(2, S, Z22); \
	UPAIR(3, S, Z23)

// XSSUB unpacks IQ4_XS sub-block IB (nibbles at 8+16·IB(SI)) into its
// table values, twice (Z28 shifts the second and fourth 128-bit lanes'
// words by 4, Z30 = 0x0F bytes, Z29 = the table in every lane), takes
// their signs into K1 and magnitudes into Z5, broadcasts the sub-block's
// scale word (from 2·IB(SP)) into Z4, and adds the four pairs' products.
#define XSSUB(IB) \
	VBROADCASTI32X4 (8+16*(IB))(SI), Z5; \
	VPSRLVW         Z28, Z5, Z5;         \
	VPANDD          Z30, Z5, Z5;         \
	VPSHUFB         Z5, Z29, Z5;         \
	VPMOVB2M        Z5, K1;              \
	VPABSB          Z5, Z5;              \
	VPBROADCASTW    (2*(IB))(SP), Z4;    \
	SPAIRS(IB)

// func dotIQ4XSx8RowsVNNI(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int)
// computes, for nrows >= 1 IQ4_XS weight rows wrb bytes apart and eight
// tokens, row r's output for token t into y[r + t·ystride], over nb >= 1
// super-blocks; prep is the tile's data (see prepareTileK8).
TEXT ·dotIQ4XSx8RowsVNNI(SB), NOSPLIT, $16-56
	LARGS
	VPXORD    Z31, Z31, Z31
	VMOVDQU64 ·lbKvIQ4(SB), Z29
	VMOVDQU64 ·lbShift4(SB), Z28
	MOVL      $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z30

xsrow:
	LROWSTART

xssb:
	// The eight scales ls−32 as dotIQ4XSAVX2 unpacks them, to 0(SP).
	LB_XS_SCALES8(4(SI), 2(SI), X6, X7, Y7, X8)
	VMOVDQU      X6, 0(SP)
	LZEROI
	XSSUB(0)
	XSSUB(1)
	XSSUB(2)
	XSSUB(3)
	XSSUB(4)
	XSSUB(5)
	XSSUB(6)
	XSSUB(7)
	VPBROADCASTW 0(SI), Y2
	VCVTPH2PS    Y2, Z2
	LFIN4
	ADDQ         $136, SI
	ADDQ         $KT_SB, R10
	DECQ         CX
	JNZ          xssb

	LROWEND(xsrow)
	VZEROUPPER
	RET

// LKSCALES16 leaves a K-quant's sixteen int16 sub-block scales, from the
// words at 0(SP) (subs 0-7) and 16(SP) (8-15), in every 128-bit lane of
// Z24 and Z25.
#define LKSCALES16 \
	VBROADCASTI32X4 0(SP), Z24; \
	VBROADCASTI32X4 16(SP), Z25

// Q3SUB does 32-element chunk I of half H of a Q3_K super-block (sub-block
// S = 4H+I of the activations): the low bits at bits 2I of the qs bytes in
// Z27 (Z30 = 0x03 bytes), minus 4 where bit B = 4H+I of the hmask bytes
// (Z26) is clear (Z29 = 0x04, Z26 the hmask twice, Z15 = 0x01 bytes), as
// signed weights; the scales of sub-blocks 2I and 2I+1 of the half from
// SC by the shufQ3 mask I.
#define Q3SUB(H, I, SC) \
	VPSRLW     $(2*(I)), Z27, Z5;         \
	VPANDD     Z30, Z5, Z5;               \
	VPSLLW     $(4*(H)+(I)+0), Z15, Z7;     \
	VPTESTNMB  Z7, Z26, K2;               \
	VPSUBB     Z29, Z5, K2, Z5;           \
	VPMOVB2M   Z5, K1;                    \
	VPABSB     Z5, Z5;                    \
	VPSHUFB    ·lbShufQ3+64*(I)(SB), SC, Z4; \
	SPAIRS(4*(H)+(I))

// func dotQ3Kx8RowsVNNI(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int)
// is dotIQ4XSx8RowsVNNI for Q3_K rows.
TEXT ·dotQ3Kx8RowsVNNI(SB), NOSPLIT, $32-56
	LARGS
	VPXORD Z31, Z31, Z31
	MOVL   $0x03030303, AX
	VPBROADCASTD AX, Z30
	MOVL   $0x04040404, AX
	VPBROADCASTD AX, Z29
	MOVL   $0x01010101, AX
	VPBROADCASTD AX, Z15

q3row:
	LROWSTART

q3sb:
	// The sixteen scales sc−32 as dotQ3KAVX2 unpacks them, to 0(SP).
	LB_Q3_SCALES16(96(SI), 100(SI), 104(SI), X6, Y6, AX, BX, DX, R8, R9)
	VMOVDQU      Y6, 0(SP)
	LKSCALES16
	VBROADCASTI64X4 (SI), Z26
	LZEROI
	VBROADCASTI64X4 32(SI), Z27
	Q3SUB(0, 0, Z24)
	Q3SUB(0, 1, Z24)
	Q3SUB(0, 2, Z24)
	Q3SUB(0, 3, Z24)
	VBROADCASTI64X4 64(SI), Z27
	Q3SUB(1, 0, Z25)
	Q3SUB(1, 1, Z25)
	Q3SUB(1, 2, Z25)
	Q3SUB(1, 3, Z25)
	VPBROADCASTW 108(SI), Y2
	VCVTPH2PS    Y2, Z2
	LFIN4
	ADDQ         $110, SI
	ADDQ         $KT_SB, R10
	DECQ         CX
	JNZ          q3sb

	LROWEND(q3row)
	VZEROUPPER
	RET

// Q2SUB is Q3SUB for Q2_K: the unsigned 2-bit quants at bits 2I of Z27.
#define Q2SUB(H, I, SC) \
	VPSRLW     $(2*(I)), Z27, Z5;         \
	VPANDD     Z30, Z5, Z5;               \
	VPSHUFB    ·lbShufQ3+64*(I)(SB), SC, Z4; \
	UPAIRS(4*(H)+(I))

// Q2MINS folds pair P's min terms into its float accumulator first, as
// dotQ2KAVX2 does: ACC = fma(−d_a·dmin_w, float(Σ m·bsum lanes), ACC),
// with Z7 = the sixteen mins as words in both halves, Z3 = 16 × −dmin_w.
#define Q2MINS(P, ACC) \
	VPMADDWD    (KT_BS+64*(P))(R10), Z7, Z8; \
	VCVTDQ2PS   Z8, Z8;                      \
	VMULPS      (KT_DA+64*(P))(R10), Z3, Z9; \
	VFMADD231PS Z9, Z8, ACC

// func dotQ2Kx8RowsVNNI(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int)
// is dotIQ4XSx8RowsVNNI for Q2_K rows.
TEXT ·dotQ2Kx8RowsVNNI(SB), NOSPLIT, $32-56
	LARGS
	MOVL   $0x03030303, AX
	VPBROADCASTD AX, Z30
	MOVL   $0x80000000, AX
	VPBROADCASTD AX, Z28

q2row:
	LROWSTART

q2sb:
	VPBROADCASTW 82(SI), Y3
	VCVTPH2PS    Y3, Z3
	VPXORD       Z28, Z3, Z3
	VMOVDQU      (SI), X6
	VPSRLW       $4, X6, X7
	VPAND        ·lbC0F(SB), X7, X7
	VPMOVZXBW    X7, Y7
	VINSERTI64X4 $1, Y7, Z7, Z7
	Q2MINS(0, Z16)
	Q2MINS(1, Z17)
	Q2MINS(2, Z18)
	Q2MINS(3, Z19)
	VPAND        ·lbC0F(SB), X6, X6
	VPMOVZXBW    X6, Y6
	VMOVDQU      Y6, 0(SP)
	LKSCALES16
	LZEROI
	VBROADCASTI64X4 16(SI), Z27
	Q2SUB(0, 0, Z24)
	Q2SUB(0, 1, Z24)
	Q2SUB(0, 2, Z24)
	Q2SUB(0, 3, Z24)
	VBROADCASTI64X4 48(SI), Z27
	Q2SUB(1, 0, Z25)
	Q2SUB(1, 1, Z25)
	Q2SUB(1, 2, Z25)
	Q2SUB(1, 3, Z25)
	VPBROADCASTW 80(SI), Y2
	VCVTPH2PS    Y2, Z2
	LFIN4
	ADDQ         $84, SI
	ADDQ         $KT_SB, R10
	DECQ         CX
	JNZ          q2sb

	LROWEND(q2row)
	VZEROUPPER
	RET
