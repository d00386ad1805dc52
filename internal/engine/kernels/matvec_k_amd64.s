// The many-row K-quant matrix-vector kernels at the AVX512 (VNNI) level:
// one call dots a chunk of Q4_K, Q5_K or Q6_K weight rows with one Q8_K
// activation row as QuantizeActivation makes it. Rows go through in pairs,
// one row in the low half of each 512-bit register and the other in the
// high half, so each 32-byte activation piece, broadcast
// to both halves, meets two rows;
// the Go side (matvecKRows) pairs the first half of a chunk's rows with
// the second, two sequential weight streams. Each output equals the AVX2
// row kernel's (dotQ4KAVX2, dotQ5KAVX2, dotQ6KAVX2, which VecDot runs at
// this level) bit for bit: a half's eight int32 lanes hold the same exact
// integers as the row kernel's (VNNI only changes how they are added up),
// and the float operations per lane are the same ones in the same order,
// then reduced as HSUM8. The integer tricks are those of the eight-token
// tiles (tile_k_amd64.s) with two rows in place of two tokens. "Row r" in
// the comments is the pair's low-half row, "row r+1" its high-half row.

#include "textflag.h"

// The Q8_K activation block as QuantizeActivation makes it: d_a (float32)
// at 0, the 256 quants at 4, the 16 int16 bsums at 260, 292 bytes. The
// kernels broadcast each 32-byte piece to both halves of a register as
// they load it, so the activation needs no layout of its own and stays
// as small as the row kernels' (a layout with every piece stored twice
// ran 1.6x slower on 5632-wide rows, whose doubled activation no longer
// stayed in L1 beside the two weight streams).
#define MVK_Q 4
#define MVK_BS 260
#define MVK_REC 292

// HSUM8 as in quant_amd64.s.
#define HSUM8(Y, X, T) \
	VEXTRACTF128 $1, Y, T; \
	VADDPS       T, X, X;  \
	VMOVHLPS     X, X, T;  \
	VADDPS       T, X, X;  \
	VMOVSHDUP    X, T;     \
	VADDSS       T, X, X

// MVLOAD2 loads the 32 bytes at OFF of both rows' super-blocks into Z
// (row r's in the low half; Y is Z's low half).
#define MVLOAD2(OFF, Z, Y) \
	VMOVDQU      OFF(SI), Y; \
	VINSERTI64X4 $1, OFF(SI)(R12*1), Z, Z

// MVK4SETUP unpacks both rows' Q4_K/Q5_K scales and mins (the 12 bytes
// at 4 of each super-block) with vector operations, as dotQ4KAVX2 does
// with scalar ones: with a = bytes 0-3, b = 4-7, c = 8-11 of a row's
// scale bytes (dwords 0-2 of its lane of Y2), sc 0-3 = a & 0x3f, sc 4-7 =
// (c & 0x0f) | (a >> 6) << 4, mins 0-3 = b & 0x3f, mins 4-7 = (c >> 4) |
// (b >> 6) << 4; Y3's lanes end as those four dwords, one lane per row.
// It leaves Y0 = the scales as 16 words (row r's eight, then row r+1's),
// so dword c of a row holds the scale pair of chunk c; Z1 = the mins as
// word pairs (m_j, m_j), row r's in the low half; Z20 = the int sums'
// start, each half its row's bias -16384·(sc0 + sc2 + sc4 + sc6), which
// the chunks' VPDPWSSD adds 16384 times (see MVK4PAIR). Z19 = 0 and Z23 =
// mvK4bias's index, set once per call. (Unpacking with 32-bit scalar
// operations, as the row kernel does, took about 70 of the 155
// instructions a row pair's super-block costs.)
#define MVK4SETUP \
	VMOVDQU     4(SI), X2;                   \
	VINSERTI128 $1, 4(SI)(R12*1), Y2, Y2;    \
	VPSHUFD     $0x98, Y2, Y3;               \
	VPSRLVD     mvK4shift<>(SB), Y3, Y3;     \
	VPAND       mvK4low<>(SB), Y3, Y3;       \
	VPSHUFD     $0x40, Y2, Y2;               \
	VPSRLD      $2, Y2, Y2;                  \
	VPTERNLOGD  $0xF8, mvK4high<>(SB), Y2, Y3; \
	VPERMQ      $0x08, Y3, Y0;               \
	VPERMQ      $0x0D, Y3, Y1;               \
	VPAND       mvK4even<>(SB), X0, X5;      \
	VPSADBW     X19, X5, X5;                 \
	VPSUBQ      X5, X19, X5;                 \
	VPSLLQ      $14, X5, X5;                 \
	VPERMD      Z5, Z23, Z20;                \
	VPMOVZXBW   X0, Y0;                      \
	VPMOVZXBD   X1, Z1;                      \
	VPSLLD      $16, Z1, Z2;                 \
	VPORD       Z2, Z1, Z1

// MVK4CONST sets the registers MVK4SETUP reads: Z19 = 0, Z23 = the index
// that broadcasts dword 0 to the low half and dword 2 to the high half.
#define MVK4CONST \
	VPXORD    Z19, Z19, Z19; \
	VMOVDQU64 mvK4bias<>(SB), Z23

// MVK4PAIR adds chunk C (sub-blocks 2C and 2C+1: the low quants in Z5,
// the high ones × 4 in Z11, the scale pairs in Z4) to the int sums Z20
// with one VPDPWSSD for both sub-blocks, as the tiles' K4BPAIR: (4·d_hi
// + 1) << 14 = d_hi·65536 + 16384 from VPDPBUSD on a dword 1 (Z13), then
// d_lo on top; the dword holds the words d_lo + 16384 (positive) and
// d_hi, and VPDPWSSD with the scale words adds sc_2C·d_lo + sc_2C+1·d_hi
// exactly plus 16384·sc_2C, which the bias in Z20's start takes off.
#define MVK4PAIR(C) \
	VBROADCASTI64X4 (MVK_Q+32*(2*C+1))(R10), Z17; \
	VBROADCASTI64X4 (MVK_Q+32*(2*C))(R10), Z18;   \
	VMOVDQA64       Z13, Z6;                      \
	VPDPBUSD        Z17, Z11, Z6;                 \
	VPSLLD          $14, Z6, Z6;                  \
	VPDPBUSD        Z18, Z5, Z6;                  \
	VPDPWSSD        Z4, Z6, Z20

// MVK4CHUNK does chunk C of a Q4_K super-block for both rows: the 32
// nibble bytes of each (Z15 = 0x0F, Z14 = 0x3C bytes) and the chunk's
// scale pairs picked from Y0 by IDX.
#define MVK4CHUNK(C, IDX) \
	MVLOAD2(16+32*C, Z11, Y11); \
	VPANDD Z15, Z11, Z5;        \
	VPSRLW $2, Z11, Z11;        \
	VPANDD Z14, Z11, Z11;       \
	VPERMD Z0, IDX, Z4;         \
	MVK4PAIR(C)

// MVK4FINISH folds the super-block's int sums Z20 into the float sums Z16
// as dotQ4KAVX2 does, for both rows: each row's (d_w, dmin_w) half pair
// (at 0 of its super-block) goes to its half of Z2 four times, converted
// and times d_a at once; the even floats then give d_w·d_a, the odd ones
// dmin_w·d_a (the same products as one conversion and multiply each).
#define MVK4FINISH \
	VPBROADCASTD    0(SI), X2;         \
	VPBROADCASTD    0(SI)(R12*1), X3;  \
	VINSERTI128     $1, X3, Y2, Y2;    \
	VCVTPH2PS       Y2, Z2;            \
	VBROADCASTSS    (R10), Z21;        \
	VMULPS          Z21, Z2, Z2;       \
	VMOVSLDUP       Z2, Z8;            \
	VMOVSHDUP       Z2, Z9;            \
	VBROADCASTI64X4 MVK_BS(R10), Z22;  \
	VCVTDQ2PS       Z20, Z6;           \
	VPMADDWD        Z22, Z1, Z7;       \
	VCVTDQ2PS       Z7, Z7;            \
	VFMADD231PS     Z8, Z6, Z16;       \
	VFNMADD231PS    Z9, Z7, Z16

// MVSTORE stores the two rows' reductions of Z16 at (R14) and at yoff
// floats past it, then advances the pair: R14 by one float, R11 by one
// row; it loops to NEXT while pairs remain.
#define MVSTORE(NEXT) \
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

// MVSTART begins a row pair: SI = its first super-block, R10 = the
// row, CX = super-blocks, Z16 = 0.
#define MVSTART \
	MOVQ   R11, SI;          \
	MOVQ   prep+32(FP), R10; \
	MOVQ   nb+40(FP), CX;    \
	VPXORD Z16, Z16, Z16

// func matvecQ4KVNNI(w *byte, wrb, off, npairs int, prep *byte, nb int, y *float32, yoff int)
// computes, for the npairs >= 1 row pairs p (row p at w + p·wrb paired
// with the row off bytes past it), y[p] and y[p + yoff] = the rows' dots
// with the Q8_K activation row prep (nb >= 1 super-blocks).
// Rows are Q4_K. The caller pairs the first half of its rows with the
// second (two sequential streams, which the hardware prefetchers follow;
// pairing neighbouring rows ran at a third of the memory rate), and a last
// odd row with itself (off = yoff = 0: both halves store the same value).
TEXT ·matvecQ4KVNNI(SB), NOSPLIT, $0-64
	MOVQ         w+0(FP), R11
	MOVQ         off+16(FP), R12
	MOVQ         npairs+24(FP), R13
	MOVQ         y+48(FP), R14
	MOVL         $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z15
	MOVL         $0x3C3C3C3C, AX
	VPBROADCASTD AX, Z14
	MOVL         $1, AX
	VPBROADCASTD AX, Z13
	VMOVDQU64    mvK4idx<>+0(SB), Z24
	VMOVDQU64    mvK4idx<>+64(SB), Z25
	VMOVDQU64    mvK4idx<>+128(SB), Z26
	VMOVDQU64    mvK4idx<>+192(SB), Z27
	MVK4CONST

mvk4pair:
	MVSTART

mvk4sb:
	MVK4SETUP
	MVK4CHUNK(0, Z24)
	MVK4CHUNK(1, Z25)
	MVK4CHUNK(2, Z26)
	MVK4CHUNK(3, Z27)
	MVK4FINISH
	ADDQ $144, SI
	ADDQ $MVK_REC, R10
	DECQ CX
	JNZ  mvk4sb

	MVSTORE(mvk4pair)
	VZEROUPPER
	RET

// MVK5CHUNK is MVK4CHUNK for Q5_K: the nibbles at 48+32C with their 5th
// bits from the qh bytes (Z12, both rows'), moved by SL $NL to bit 4 for
// sub-block 2C (Z10 = 0x10 bytes) and by SH $NH to bit 6 for 2C+1, whose
// quants are taken × 4 (Z28 = 0x40 bytes), as the tiles' K5BCHUNK.
#define MVK5CHUNK(C, SL, NL, SH, NH, IDX) \
	MVLOAD2(48+32*C, Z9, Y9);           \
	SL         $NL, Z12, Z5;            \
	VPANDD     Z10, Z5, Z5;             \
	VPTERNLOGD $0xF8, Z15, Z9, Z5;      \
	VPSRLW     $2, Z9, Z9;              \
	SH         $NH, Z12, Z11;           \
	VPANDD     Z28, Z11, Z11;           \
	VPTERNLOGD $0xF8, Z14, Z9, Z11;     \
	VPERMD     Z0, IDX, Z4;             \
	MVK4PAIR(C)

// func matvecQ5KVNNI(w *byte, wrb, off, npairs int, prep *byte, nb int, y *float32, yoff int)
// is matvecQ4KVNNI for Q5_K rows.
TEXT ·matvecQ5KVNNI(SB), NOSPLIT, $0-64
	MOVQ         w+0(FP), R11
	MOVQ         off+16(FP), R12
	MOVQ         npairs+24(FP), R13
	MOVQ         y+48(FP), R14
	MOVL         $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z15
	MOVL         $0x3C3C3C3C, AX
	VPBROADCASTD AX, Z14
	MOVL         $1, AX
	VPBROADCASTD AX, Z13
	MOVL         $0x10101010, AX
	VPBROADCASTD AX, Z10
	MOVL         $0x40404040, AX
	VPBROADCASTD AX, Z28
	VMOVDQU64    mvK4idx<>+0(SB), Z24
	VMOVDQU64    mvK4idx<>+64(SB), Z25
	VMOVDQU64    mvK4idx<>+128(SB), Z26
	VMOVDQU64    mvK4idx<>+192(SB), Z27
	MVK4CONST

mvk5pair:
	MVSTART

mvk5sb:
	MVK4SETUP
	MVLOAD2(16, Z12, Y12)
	MVK5CHUNK(0, VPSLLW, 4, VPSLLW, 5, Z24)
	MVK5CHUNK(1, VPSLLW, 2, VPSLLW, 3, Z25)
	MVK5CHUNK(2, VPSLLW, 0, VPSLLW, 1, Z26)
	MVK5CHUNK(3, VPSRLW, 2, VPSRLW, 1, Z27)
	MVK4FINISH
	ADDQ $176, SI
	ADDQ $MVK_REC, R10
	DECQ CX
	JNZ  mvk5sb

	MVSTORE(mvk5pair)
	VZEROUPPER
	RET

// MVK6Q adds the 32-quant sub-block S of both rows (6-bit quants, unsigned,
// in Z5) to the int sums Z20 with OP (VPMADDWD for the first, VPDPWSSD
// after), each 16 quants times their scale word, picked from the 32 in Z13
// by IDX.
#define MVK6Q(OP, S, IDX) \
	VBROADCASTI64X4 (MVK_Q+32*(S))(R10), Z17; \
	VPERMW          Z13, IDX, Z4;             \
	VPMADDUBSW      Z17, Z5, Z6;              \
	OP              Z4, Z6, Z20

// MVK6HALF does half H of a Q6_K super-block (sub-blocks 4H to 4H+3) for
// both rows, building the quants as dotQ6KAVX2 does: low nibbles of ql
// (Z10: bytes 0-31 of the half, Z9: 32-63) for quarters 0 and 1, high
// nibbles for 2 and 3, bits 4-5 from bit pairs 0-3 of qh (Z11); Z15 =
// 0x0F, Z14 = 0x30 bytes.
#define MVK6HALF(H, OP0, I0, I1, I2, I3) \
	MVLOAD2(64*H, Z10, Y10);                \
	MVLOAD2(64*H+32, Z9, Y9);               \
	MVLOAD2(128+32*H, Z11, Y11);            \
	VPSLLW     $4, Z11, Z5;                 \
	VPANDD     Z14, Z5, Z5;                 \
	VPTERNLOGD $0xF8, Z15, Z10, Z5;         \
	MVK6Q(OP0, 4*H, I0);                    \
	VPSLLW     $2, Z11, Z5;                 \
	VPANDD     Z14, Z5, Z5;                 \
	VPTERNLOGD $0xF8, Z15, Z9, Z5;          \
	MVK6Q(VPDPWSSD, 4*H+1, I1);             \
	VPANDD     Z14, Z11, Z5;                \
	VPSRLW     $4, Z10, Z7;                 \
	VPTERNLOGD $0xF8, Z15, Z7, Z5;          \
	MVK6Q(VPDPWSSD, 4*H+2, I2);             \
	VPSRLW     $2, Z11, Z5;                 \
	VPANDD     Z14, Z5, Z5;                 \
	VPSRLW     $4, Z9, Z7;                  \
	VPTERNLOGD $0xF8, Z15, Z7, Z5;          \
	MVK6Q(VPDPWSSD, 4*H+3, I3)

// func matvecQ6KVNNI(w *byte, wrb, off, npairs int, prep *byte, nb int, y *float32, yoff int)
// is matvecQ4KVNNI for Q6_K rows. Per super-block and row, as dotQ6KAVX2:
// d_w·d_a·(Σ_i sc_i·Σ u·q8 − 32·Σ_i sc_i·bsum_i) with u = q+32.
TEXT ·matvecQ6KVNNI(SB), NOSPLIT, $0-64
	MOVQ         w+0(FP), R11
	MOVQ         off+16(FP), R12
	MOVQ         npairs+24(FP), R13
	MOVQ         y+48(FP), R14
	MOVL         $0x0F0F0F0F, AX
	VPBROADCASTD AX, Z15
	MOVL         $0x30303030, AX
	VPBROADCASTD AX, Z14
	VMOVDQU64    mvK6idx<>+0(SB), Z24
	VMOVDQU64    mvK6idx<>+64(SB), Z25
	VMOVDQU64    mvK6idx<>+128(SB), Z26
	VMOVDQU64    mvK6idx<>+192(SB), Z27
	VMOVDQU64    mvK6idx<>+256(SB), Z28
	VMOVDQU64    mvK6idx<>+320(SB), Z29
	VMOVDQU64    mvK6idx<>+384(SB), Z30
	VMOVDQU64    mvK6idx<>+448(SB), Z31

mvk6pair:
	MVSTART

mvk6sb:
	VPMOVSXBW    192(SI), Y13
	VPMOVSXBW    192(SI)(R12*1), Y12
	VINSERTI64X4 $1, Y12, Z13, Z13
	MVK6HALF(0, VPMADDWD, Z24, Z25, Z26, Z27)
	MVK6HALF(1, VPDPWSSD, Z28, Z29, Z30, Z31)
	VBROADCASTI64X4 MVK_BS(R10), Z22
	VPMADDWD     Z22, Z13, Z7
	VPSLLD       $5, Z7, Z7
	VPSUBD       Z7, Z20, Z6
	VCVTDQ2PS    Z6, Z6
	VPBROADCASTW 208(SI), X2
	VPBROADCASTW 208(SI)(R12*1), X3
	VINSERTI128  $1, X3, Y2, Y2
	VCVTPH2PS    Y2, Z2
	VBROADCASTSS (R10), Z21
	VMULPS       Z21, Z2, Z8
	VFMADD231PS  Z8, Z6, Z16
	ADDQ         $210, SI
	ADDQ         $MVK_REC, R10
	DECQ         CX
	JNZ          mvk6sb

	MVSTORE(mvk6pair)
	VZEROUPPER
	RET

// mvK4idx chunk c (64 bytes): dwords 0-7 pick dword c of Y0 (row r's
// scale pair of chunk c), dwords 8-15 dword 4+c (row r+1's).
DATA mvK4idx<>+0(SB)/8, $0x0000000000000000
DATA mvK4idx<>+8(SB)/8, $0x0000000000000000
DATA mvK4idx<>+16(SB)/8, $0x0000000000000000
DATA mvK4idx<>+24(SB)/8, $0x0000000000000000
DATA mvK4idx<>+32(SB)/8, $0x0000000400000004
DATA mvK4idx<>+40(SB)/8, $0x0000000400000004
DATA mvK4idx<>+48(SB)/8, $0x0000000400000004
DATA mvK4idx<>+56(SB)/8, $0x0000000400000004
DATA mvK4idx<>+64(SB)/8, $0x0000000100000001
DATA mvK4idx<>+72(SB)/8, $0x0000000100000001
DATA mvK4idx<>+80(SB)/8, $0x0000000100000001
DATA mvK4idx<>+88(SB)/8, $0x0000000100000001
DATA mvK4idx<>+96(SB)/8, $0x0000000500000005
DATA mvK4idx<>+104(SB)/8, $0x0000000500000005
DATA mvK4idx<>+112(SB)/8, $0x0000000500000005
DATA mvK4idx<>+120(SB)/8, $0x0000000500000005
DATA mvK4idx<>+128(SB)/8, $0x0000000200000002
DATA mvK4idx<>+136(SB)/8, $0x0000000200000002
DATA mvK4idx<>+144(SB)/8, $0x0000000200000002
DATA mvK4idx<>+152(SB)/8, $0x0000000200000002
DATA mvK4idx<>+160(SB)/8, $0x0000000600000006
DATA mvK4idx<>+168(SB)/8, $0x0000000600000006
DATA mvK4idx<>+176(SB)/8, $0x0000000600000006
DATA mvK4idx<>+184(SB)/8, $0x0000000600000006
DATA mvK4idx<>+192(SB)/8, $0x0000000300000003
DATA mvK4idx<>+200(SB)/8, $0x0000000300000003
DATA mvK4idx<>+208(SB)/8, $0x0000000300000003
DATA mvK4idx<>+216(SB)/8, $0x0000000300000003
DATA mvK4idx<>+224(SB)/8, $0x0000000700000007
DATA mvK4idx<>+232(SB)/8, $0x0000000700000007
DATA mvK4idx<>+240(SB)/8, $0x0000000700000007
DATA mvK4idx<>+248(SB)/8, $0x0000000700000007
GLOBL mvK4idx<>(SB), RODATA|NOPTR, $256

// mvK4shift, mvK4low, mvK4high: MVK4SETUP's per-dword shift counts and
// byte masks for the lane (a, c, b, c) and the lane (a, a, a, b) >> 2.
DATA mvK4shift<>+0(SB)/8, $0x0000000000000000
DATA mvK4shift<>+8(SB)/8, $0x0000000400000000
DATA mvK4shift<>+16(SB)/8, $0x0000000000000000
DATA mvK4shift<>+24(SB)/8, $0x0000000400000000
GLOBL mvK4shift<>(SB), RODATA|NOPTR, $32
DATA mvK4low<>+0(SB)/8, $0x0f0f0f0f3f3f3f3f
DATA mvK4low<>+8(SB)/8, $0x0f0f0f0f3f3f3f3f
DATA mvK4low<>+16(SB)/8, $0x0f0f0f0f3f3f3f3f
DATA mvK4low<>+24(SB)/8, $0x0f0f0f0f3f3f3f3f
GLOBL mvK4low<>(SB), RODATA|NOPTR, $32
DATA mvK4high<>+0(SB)/8, $0x3030303000000000
DATA mvK4high<>+8(SB)/8, $0x3030303000000000
DATA mvK4high<>+16(SB)/8, $0x3030303000000000
DATA mvK4high<>+24(SB)/8, $0x3030303000000000
GLOBL mvK4high<>(SB), RODATA|NOPTR, $32

// mvK4even keeps the even bytes (sc0, sc2, sc4, sc6 of each row's qword).
DATA mvK4even<>+0(SB)/8, $0x00ff00ff00ff00ff
DATA mvK4even<>+8(SB)/8, $0x00ff00ff00ff00ff
GLOBL mvK4even<>(SB), RODATA|NOPTR, $16

// mvK4bias: dword 0 to dwords 0-7, dword 2 to dwords 8-15.
DATA mvK4bias<>+0(SB)/8, $0x0000000000000000
DATA mvK4bias<>+8(SB)/8, $0x0000000000000000
DATA mvK4bias<>+16(SB)/8, $0x0000000000000000
DATA mvK4bias<>+24(SB)/8, $0x0000000000000000
DATA mvK4bias<>+32(SB)/8, $0x0000000200000002
DATA mvK4bias<>+40(SB)/8, $0x0000000200000002
DATA mvK4bias<>+48(SB)/8, $0x0000000200000002
DATA mvK4bias<>+56(SB)/8, $0x0000000200000002
GLOBL mvK4bias<>(SB), RODATA|NOPTR, $64

// mvK6idx sub-block s (64 bytes): words 0-7 pick scale word 2s of Z13,
// words 8-15 word 2s+1 (the sub-block's two groups of 16, row r), words
// 16-23 and 24-31 words 16+2s and 17+2s (the same for row r+1).
DATA mvK6idx<>+0(SB)/8, $0x0000000000000000
DATA mvK6idx<>+8(SB)/8, $0x0000000000000000
DATA mvK6idx<>+16(SB)/8, $0x0001000100010001
DATA mvK6idx<>+24(SB)/8, $0x0001000100010001
DATA mvK6idx<>+32(SB)/8, $0x0010001000100010
DATA mvK6idx<>+40(SB)/8, $0x0010001000100010
DATA mvK6idx<>+48(SB)/8, $0x0011001100110011
DATA mvK6idx<>+56(SB)/8, $0x0011001100110011
DATA mvK6idx<>+64(SB)/8, $0x0002000200020002
DATA mvK6idx<>+72(SB)/8, $0x0002000200020002
DATA mvK6idx<>+80(SB)/8, $0x0003000300030003
DATA mvK6idx<>+88(SB)/8, $0x0003000300030003
DATA mvK6idx<>+96(SB)/8, $0x0012001200120012
DATA mvK6idx<>+104(SB)/8, $0x0012001200120012
DATA mvK6idx<>+112(SB)/8, $0x0013001300130013
DATA mvK6idx<>+120(SB)/8, $0x0013001300130013
DATA mvK6idx<>+128(SB)/8, $0x0004000400040004
DATA mvK6idx<>+136(SB)/8, $0x0004000400040004
DATA mvK6idx<>+144(SB)/8, $0x0005000500050005
DATA mvK6idx<>+152(SB)/8, $0x0005000500050005
DATA mvK6idx<>+160(SB)/8, $0x0014001400140014
DATA mvK6idx<>+168(SB)/8, $0x0014001400140014
DATA mvK6idx<>+176(SB)/8, $0x0015001500150015
DATA mvK6idx<>+184(SB)/8, $0x0015001500150015
DATA mvK6idx<>+192(SB)/8, $0x0006000600060006
DATA mvK6idx<>+200(SB)/8, $0x0006000600060006
DATA mvK6idx<>+208(SB)/8, $0x0007000700070007
DATA mvK6idx<>+216(SB)/8, $0x0007000700070007
DATA mvK6idx<>+224(SB)/8, $0x0016001600160016
DATA mvK6idx<>+232(SB)/8, $0x0016001600160016
DATA mvK6idx<>+240(SB)/8, $0x0017001700170017
DATA mvK6idx<>+248(SB)/8, $0x0017001700170017
DATA mvK6idx<>+256(SB)/8, $0x0008000800080008
DATA mvK6idx<>+264(SB)/8, $0x0008000800080008
DATA mvK6idx<>+272(SB)/8, $0x0009000900090009
DATA mvK6idx<>+280(SB)/8, $0x0009000900090009
DATA mvK6idx<>+288(SB)/8, $0x0018001800180018
DATA mvK6idx<>+296(SB)/8, $0x0018001800180018
DATA mvK6idx<>+304(SB)/8, $0x0019001900190019
DATA mvK6idx<>+312(SB)/8, $0x0019001900190019
DATA mvK6idx<>+320(SB)/8, $0x000a000a000a000a
DATA mvK6idx<>+328(SB)/8, $0x000a000a000a000a
DATA mvK6idx<>+336(SB)/8, $0x000b000b000b000b
DATA mvK6idx<>+344(SB)/8, $0x000b000b000b000b
DATA mvK6idx<>+352(SB)/8, $0x001a001a001a001a
DATA mvK6idx<>+360(SB)/8, $0x001a001a001a001a
DATA mvK6idx<>+368(SB)/8, $0x001b001b001b001b
DATA mvK6idx<>+376(SB)/8, $0x001b001b001b001b
DATA mvK6idx<>+384(SB)/8, $0x000c000c000c000c
DATA mvK6idx<>+392(SB)/8, $0x000c000c000c000c
DATA mvK6idx<>+400(SB)/8, $0x000d000d000d000d
DATA mvK6idx<>+408(SB)/8, $0x000d000d000d000d
DATA mvK6idx<>+416(SB)/8, $0x001c001c001c001c
DATA mvK6idx<>+424(SB)/8, $0x001c001c001c001c
DATA mvK6idx<>+432(SB)/8, $0x001d001d001d001d
DATA mvK6idx<>+440(SB)/8, $0x001d001d001d001d
DATA mvK6idx<>+448(SB)/8, $0x000e000e000e000e
DATA mvK6idx<>+456(SB)/8, $0x000e000e000e000e
DATA mvK6idx<>+464(SB)/8, $0x000f000f000f000f
DATA mvK6idx<>+472(SB)/8, $0x000f000f000f000f
DATA mvK6idx<>+480(SB)/8, $0x001e001e001e001e
DATA mvK6idx<>+488(SB)/8, $0x001e001e001e001e
DATA mvK6idx<>+496(SB)/8, $0x001f001f001f001f
DATA mvK6idx<>+504(SB)/8, $0x001f001f001f001f
GLOBL mvK6idx<>(SB), RODATA|NOPTR, $512
