// The many-row IQ4_XS, Q3_K and Q2_K matrix-vector kernels at the AVX512
// level, after matvec_k_amd64.s: one call dots a chunk of weight rows
// with one Q8_K activation row as QuantizeActivation makes it, two rows at
// a time, row r in the low half of each 512-bit register and row r+1 (off
// bytes further) in the high half, each 32-byte activation piece broadcast
// to both halves. Each output equals the row kernel's (dotIQ4XSAVX2,
// dotQ3KAVX2, dotQ2KAVX2, which VecDot runs at this level) bit for bit: a
// half's eight int32 lanes hold the row kernel's exact integers and get
// the same float operations in the same order, then HSUM8. The integer
// tricks are the eight-token tiles' (tile_lowbit_amd64.s) with two rows in
// place of two tokens.

#include "textflag.h"
#include "lowbit_amd64.h"

// The Q8_K activation block: d_a at 0, the quants at 4, the bsums at 260.
#define MVL_Q 4
#define MVL_BS 260
#define MVL_REC 292

// HSUM8 as in quant_amd64.s.
#define HSUM8(Y, X, T) \
	VEXTRACTF128 $1, Y, T; \
	VADDPS       T, X, X;  \
	VMOVHLPS     X, X, T;  \
	VADDPS       T, X, X;  \
	VMOVSHDUP    X, T;     \
	VADDSS       T, X, X

// MVL2 loads the 32 bytes at OFF of both rows' super-blocks into Z (row
// r's in the low half; Y is Z's low half).
#define MVL2(OFF, Z, Y) \
	VMOVDQU64    OFF(SI), Y; \
	VINSERTI64X4 $1, OFF(SI)(R12*1), Z, Z

// MVLSTART begins a row pair: SI = its first super-block, R10 = the
// activation row, CX = super-blocks, Z16 = 0.
#define MVLSTART \
	MOVQ   R11, SI;          \
	MOVQ   prep+32(FP), R10; \
	MOVQ   nb+40(FP), CX;    \
	VPXORD Z16, Z16, Z16

// MVLSTORE stores the two rows' reductions of Z16 at (R14) and yoff floats
// past it, advances the pair and loops to NEXT while pairs remain.
#define MVLSTORE(NEXT) \
	VEXTRACTF64X4 $0, Z16, Y0;      \
	VEXTRACTF64X4 $1, Z16, Y1;      \
	HSUM8(Y0, X0, X2);              \
	HSUM8(Y1, X1, X2);              \
	MOVQ          yoff+56(FP), AX;  \
	VMOVSS        X0, (R14);        \
	VMOVSS        X1, (R14)(AX*4);  \
	ADDQ          $4, R14;          \
	ADDQ          wrb+8(FP), R11;   \
	DECQ          R13;              \
	JNZ           NEXT

#define MVLARGS \
	MOVQ w+0(FP), R11;       \
	MOVQ off+16(FP), R12;    \
	MOVQ npairs+24(FP), R13; \
	MOVQ y+48(FP), R14

// MVLDW leaves the two rows' f16 d_w at OFF in Z2 (row r's eight lanes,
// then row r+1's) as float32.
#define MVLDW(OFF) \
	VPBROADCASTW OFF(SI), X2;         \
	VPBROADCASTW OFF(SI)(R12*1), X3;  \
	VINSERTI128  $1, X3, Y2, Y2;      \
	VCVTPH2PS    Y2, Z2

// MVLFIN folds the super-block's int sums Z20 into the float sums Z16:
// fma(d_w·d_a, float(Z20), Z16), Z2 = d_w (see MVLDW).
#define MVLFIN \
	VBROADCASTSS (R10), Z21;  \
	VCVTDQ2PS    Z20, Z6;     \
	VMULPS       Z21, Z2, Z8; \
	VFMADD231PS  Z8, Z6, Z16

// MVLSIGNED adds the products of the signed weights in Z5 with the
// activation sub-block S, weighted by the scale words in Z4, to Z20.
#define MVLSIGNED(S) \
	VBROADCASTI64X4 (MVL_Q+32*(S))(R10), Z6; \
	VPMOVB2M        Z5, K1;                  \
	VPABSB          Z5, Z5;                  \
	VPSUBB          Z6, Z31, K1, Z6;         \
	VPMADDUBSW      Z6, Z5, Z6;              \
	VPDPWSSD        Z4, Z6, Z20

// MVXSSUB does sub-block IB of both rows: each row's 16 nibble bytes in
// two 128-bit lanes (row r's in lanes 0-1), the second of each shifted by
// 4 (Z28), masked (Z30 = 0x0F) and mapped through the table (Z29); the
// scale words of each row's sub-block from Z24 (row r's scales in lanes
// 0-1, row r+1's in 2-3) by the mask of word IB.
#define MVXSSUB(IB) \
	VBROADCASTI32X4 (8+16*(IB))(SI), Z5;         \
	VBROADCASTI32X4 (8+16*(IB))(SI)(R12*1), Z7;  \
	VSHUFI64X2      $0, Z7, Z5, Z5;              \
	VPSRLVW         Z28, Z5, Z5;                 \
	VPANDD          Z30, Z5, Z5;                 \
	VPSHUFB         Z5, Z29, Z5;                 \
	VPSHUFB         ·lbShufW+64*(IB)(SB), Z24, Z4; \
	MVLSIGNED(IB)

// func matvecIQ4XSVNNI(w *byte, wrb, off, npairs int, prep *byte, nb int, y *float32, yoff int)
// computes, for the npairs >= 1 row pairs p (row p at w + p·wrb paired
// with the row off bytes past it), y[p] and y[p + yoff] = the rows' dots
// with the Q8_K activation row prep (nb >= 1 super-blocks), as
// matvecQ4KVNNI for IQ4_XS rows.
TEXT ·matvecIQ4XSVNNI(SB), NOSPLIT, $0-64
	MVLARGS
	VPXORD       Z31, Z31, Z31
	VMOVDQU64    ·lbKvIQ4(SB), Z29
	VMOVDQU64    ·lbShift4(SB), Z28
	MOVL         $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z30

mvxspair:
	MVLSTART

mvxssb:
	LB_XS_SCALES8(4(SI), 2(SI), X6, X7, Y7, X8)
	LB_XS_SCALES8(4(SI)(R12*1), 2(SI)(R12*1), X9, X7, Y7, X8)
	VINSERTI128  $1, X6, Y6, Y6
	VINSERTI128  $1, X9, Y9, Y9
	VINSERTI64X4 $1, Y9, Z6, Z24
	VPXORD       Z20, Z20, Z20
	MVXSSUB(0)
	MVXSSUB(1)
	MVXSSUB(2)
	MVXSSUB(3)
	MVXSSUB(4)
	MVXSSUB(5)
	MVXSSUB(6)
	MVXSSUB(7)
	MVLDW(0)
	MVLFIN
	ADDQ $136, SI
	ADDQ $MVL_REC, R10
	DECQ CX
	JNZ  mvxssb

	MVLSTORE(mvxspair)
	VZEROUPPER
	RET

// MVLSC2 lays out the sixteen scale words of both rows (Y6: row r, Y9: row
// r+1) for the chunks: Z24 = subs 0-7 of row r in lanes 0-1 and of row r+1
// in lanes 2-3, Z25 = subs 8-15 likewise.
#define MVLSC2 \
	VPERMQ       $0x44, Y6, Y10;   \
	VPERMQ       $0xee, Y6, Y11;   \
	VPERMQ       $0x44, Y9, Y12;   \
	VPERMQ       $0xee, Y9, Y13;   \
	VINSERTI64X4 $1, Y12, Z10, Z24; \
	VINSERTI64X4 $1, Y13, Z11, Z25

// MVQ3SUB does chunk I of half H for both rows (the qs bytes of the half
// in Z27, the hmask bytes in Z26), as the tiles' Q3SUB.
#define MVQ3SUB(H, I, SC) \
	VPSRLW     $(2*(I)), Z27, Z5;             \
	VPANDD     Z30, Z5, Z5;                   \
	VPSLLW     $(4*(H)+(I)), Z15, Z7;         \
	VPTESTNMB  Z7, Z26, K2;                   \
	VPSUBB     Z29, Z5, K2, Z5;               \
	VPSHUFB    ·lbShufQ3+64*(I)(SB), SC, Z4;  \
	MVLSIGNED(4*(H)+(I))

// func matvecQ3KVNNI(w *byte, wrb, off, npairs int, prep *byte, nb int, y *float32, yoff int)
// is matvecIQ4XSVNNI for Q3_K rows.
TEXT ·matvecQ3KVNNI(SB), NOSPLIT, $0-64
	MVLARGS
	VPXORD       Z31, Z31, Z31
	MOVL         $0x03030303, AX
	VPBROADCASTD AX, Z30
	MOVL         $0x04040404, AX
	VPBROADCASTD AX, Z29
	MOVL         $0x01010101, AX
	VPBROADCASTD AX, Z15

mvq3pair:
	MVLSTART

mvq3sb:
	LB_Q3_SCALES16(96(SI), 100(SI), 104(SI), X6, Y6, AX, BX, DX, R8, R9)
	LB_Q3_SCALES16(96(SI)(R12*1), 100(SI)(R12*1), 104(SI)(R12*1), X9, Y9, AX, BX, DX, R8, R9)
	MVLSC2
	MVL2(0, Z26, Y26)
	VPXORD       Z20, Z20, Z20
	MVL2(32, Z27, Y27)
	MVQ3SUB(0, 0, Z24)
	MVQ3SUB(0, 1, Z24)
	MVQ3SUB(0, 2, Z24)
	MVQ3SUB(0, 3, Z24)
	MVL2(64, Z27, Y27)
	MVQ3SUB(1, 0, Z25)
	MVQ3SUB(1, 1, Z25)
	MVQ3SUB(1, 2, Z25)
	MVQ3SUB(1, 3, Z25)
	MVLDW(108)
	MVLFIN
	ADDQ $110, SI
	ADDQ $MVL_REC, R10
	DECQ CX
	JNZ  mvq3sb

	MVLSTORE(mvq3pair)
	VZEROUPPER
	RET

// MVQ2SUB does chunk I of half H of both rows' Q2_K super-blocks: the
// unsigned quants at bits 2I of Z27 against the activation sub-block 4H+I.
#define MVQ2SUB(H, I, SC) \
	VPSRLW          $(2*(I)), Z27, Z5;                \
	VPANDD          Z30, Z5, Z5;                      \
	VPSHUFB         ·lbShufQ3+64*(I)(SB), SC, Z4;     \
	VBROADCASTI64X4 (MVL_Q+32*(4*(H)+(I)))(R10), Z6;  \
	VPMADDUBSW      Z6, Z5, Z6;                       \
	VPDPWSSD        Z4, Z6, Z20

// func matvecQ2KVNNI(w *byte, wrb, off, npairs int, prep *byte, nb int, y *float32, yoff int)
// is matvecIQ4XSVNNI for Q2_K rows, with the min terms folded in first as
// dotQ2KAVX2 does: fma(−d_a·dmin_w, float(Σ m·bsum lanes), sum).
TEXT ·matvecQ2KVNNI(SB), NOSPLIT, $0-64
	MVLARGS
	MOVL         $0x03030303, AX
	VPBROADCASTD AX, Z30
	MOVL         $0x80000000, AX
	VPBROADCASTD AX, Z28

mvq2pair:
	MVLSTART

mvq2sb:
	VBROADCASTSS    (R10), Z21
	MVLDW(82)
	VPXORD          Z28, Z2, Z3
	VMOVDQU         (SI), X6
	VMOVDQU         (SI)(R12*1), X9
	VPSRLW          $4, X6, X10
	VPAND           ·lbC0F(SB), X10, X10
	VPMOVZXBW       X10, Y10
	VPSRLW          $4, X9, X11
	VPAND           ·lbC0F(SB), X11, X11
	VPMOVZXBW       X11, Y11
	VINSERTI64X4    $1, Y11, Z10, Z7
	VBROADCASTI64X4 MVL_BS(R10), Z8
	VPMADDWD        Z8, Z7, Z8
	VCVTDQ2PS       Z8, Z8
	VMULPS          Z21, Z3, Z12
	VFMADD231PS     Z12, Z8, Z16
	VPAND           ·lbC0F(SB), X6, X6
	VPMOVZXBW       X6, Y6
	VPAND           ·lbC0F(SB), X9, X9
	VPMOVZXBW       X9, Y9
	MVLSC2
	VPXORD          Z20, Z20, Z20
	MVL2(16, Z27, Y27)
	MVQ2SUB(0, 0, Z24)
	MVQ2SUB(0, 1, Z24)
	MVQ2SUB(0, 2, Z24)
	MVQ2SUB(0, 3, Z24)
	MVL2(48, Z27, Y27)
	MVQ2SUB(1, 0, Z25)
	MVQ2SUB(1, 1, Z25)
	MVQ2SUB(1, 2, Z25)
	MVQ2SUB(1, 3, Z25)
	MVLDW(80)
	MVLFIN
	ADDQ $84, SI
	ADDQ $MVL_REC, R10
	DECQ CX
	JNZ  mvq2sb

	MVLSTORE(mvq2pair)
	VZEROUPPER
	RET
