// Eight-token tiles for the 32-element quant types Q4_0, Q5_0 (against
// Q8_0 activations) and Q4_1, Q5_1 (against Q8_1) at the AVX512 level:
// many weight rows (one group per call) against eight tokens. Each output
// equals the level's row kernel (dotQ4_0VNNI, dotQ5_0VNNI, dotQ4_1VNNI,
// dotQ5_1VNNI) bit for bit: the eight int32 lanes of each block's sum hold
// the same exact integers (byte j of a block is element j, as in the row
// kernels), and the float operations per lane are the same ones in the same
// order: lane scale d_w·d_a, then a fused multiply-add into the lane's
// accumulator, then the same reduction tree.
//
// Q4_0 and Q5_0 read prepareTile8's Q8_0 block-pair records (activation
// quants + 128 as unsigned bytes, 16 lane scales), as dotQ8_0x8RowsVNNI
// does; the weights' block pair is unpacked once per row into one register
// and serves all eight tokens. Q4_0's row kernel adds even blocks into one
// accumulator and odd blocks into another, which is the block-pair
// register's lower and upper half. Q5_0's adds every block into one
// accumulator in order, so its tile moves each token pair's even-block
// halves and odd-block halves together (VSHUFF64X2) and adds them in turn.
//
// Q4_1 and Q5_1 read prepareTileQ8_1x8's records: per block, four token
// pairs' quants (one 64-byte load holds the block of two tokens, against a
// register holding the weight block twice), their lane scales, and the
// eight tokens' s (d·Σq) for the min terms, which the row kernel adds into a
// separate float32 sum that is one lane per token here.

#include "textflag.h"
#include "lowbit_amd64.h"

// HSUM8 as in quant_amd64.s.
#define HSUM8(Y, X, T) \
	VEXTRACTF128 $1, Y, T; \
	VADDPS       T, X, X;  \
	VMOVHLPS     X, X, T;  \
	VADDPS       T, X, X;  \
	VMOVSHDUP    X, T;     \
	VADDSS       T, X, X

// Q81 record (see prepareTileQ8_1x8): quants at 64·p, lane scales at
// Q81_D + 64·p, the eight tokens' s at Q81_S, Q81_REC bytes in all.
#define Q81_D 256
#define Q81_S 512
#define Q81_REC 576

// SETUP loads the constants: Z14 = 0x80 bytes, Z13 = 0, Z15 = 0x0F bytes,
// K3 = the words of 128-bit lanes 1 and 3 (for the nibble shift), Z28 =
// 0x08, Z29 = 0xF0 and Z30 = 0x10 bytes.
#define SETUP \
	MOVL         $0x80808080, AX; \
	VPBROADCASTD AX, Z14;         \
	VPXORD       Z13, Z13, Z13;   \
	MOVL         $0x0F0F0F0F, AX; \
	VPBROADCASTD AX, Z15;         \
	MOVL         $0xFF00FF00, AX; \
	KMOVD        AX, K3;          \
	MOVL         $0x08080808, AX; \
	VPBROADCASTD AX, Z28;         \
	MOVL         $0xF0F0F0F0, AX; \
	VPBROADCASTD AX, Z29;         \
	MOVL         $0x10101010, AX; \
	VPBROADCASTD AX, Z30

// NIBPAIR leaves in Z8 the 64 nibbles of the 16-byte groups at A(SI) and
// B(SI), each low nibbles then high nibbles (element order of a block).
#define NIBPAIR(A, B) \
	VMOVDQU      A(SI), X8;        \
	VINSERTI128  $1, B(SI), Y8, Y8; \
	VSHUFI64X2   $0x50, Z8, Z8, Z8; \
	VPSRLW       $4, Z8, K3, Z8;   \
	VPANDD       Z15, Z8, Z8

// NIBTWICE leaves in Z8 the 32 nibbles of the 16 bytes at A(SI) twice.
#define NIBTWICE(A) \
	VBROADCASTI32X4 A(SI), Z8; \
	VPSRLW          $4, Z8, K3, Z8; \
	VPANDD          Z15, Z8, Z8

// PAIRBIAS sets Z9 = -128·Σw per lane of the signed weights in Z8 and Z10
// to the 16 lane weight scales of the blocks at 0(SI) and B(SI).
#define PAIRBIAS(B) \
	VPXORD       Z9, Z9, Z9;     \
	VPDPBUSD     Z8, Z14, Z9;    \
	VPSUBD       Z9, Z13, Z9;    \
	VPBROADCASTW 0(SI), Y10;     \
	VPBROADCASTW B(SI), Y11;     \
	VINSERTI128  $1, X11, Y10, Y10; \
	VCVTPH2PS    Y10, Z10

// X8TOKEN as in quant_amd64.s: token T's block pair (quants at T·128(R10),
// scales at T·128+64(R10)) into ACC.
#define X8TOKEN(T, ACC) \
	VMOVDQU64   (128*T)(R10), Z12;    \
	VMOVDQA64   Z9, Z11;              \
	VPDPBUSD    Z8, Z12, Z11;         \
	VCVTDQ2PS   Z11, Z11;             \
	VMULPS      (128*T+64)(R10), Z10, Z12; \
	VFMADD231PS Z12, Z11, ACC

// X8STORE as in quant_amd64.s: ACC's odd half added to its even half, then
// HSUM8, stored at (BX); BX advances by DX.
#define X8STORE(ACC, YACC) \
	VEXTRACTF64X4 $1, ACC, Y4; \
	VADDPS        Y4, YACC, Y0; \
	HSUM8(Y0, X0, X1);         \
	VMOVSS        X0, (BX);    \
	ADDQ          DX, BX

// Q8HEAD opens the row and pair loops of a Q8_0-tile kernel; the caller
// then leaves a block pair's signed weights in Z8 and Z9/Z10 set (PAIRBIAS)
// and ends with Q8TAIL.
#define Q8HEAD \
	MOVQ   w+0(FP), R11;         \
	MOVQ   wrb+8(FP), R12;       \
	MOVQ   nrows+16(FP), R13;    \
	MOVQ   y+40(FP), R14;        \
	SETUP;                       \
row:                             \
	MOVQ   R11, SI;              \
	MOVQ   prep+24(FP), R10;     \
	MOVQ   npairs+32(FP), CX;    \
	VPXORD Z16, Z16, Z16;        \
	VPXORD Z17, Z17, Z17;        \
	VPXORD Z18, Z18, Z18;        \
	VPXORD Z19, Z19, Z19;        \
	VPXORD Z20, Z20, Z20;        \
	VPXORD Z21, Z21, Z21;        \
	VPXORD Z22, Z22, Z22;        \
	VPXORD Z23, Z23, Z23;        \
pair:

// Q8TAIL adds the eight tokens' products, steps STEP weight bytes to the
// next pair and stores a row's outputs.
#define Q8TAIL(STEP) \
	X8TOKEN(0, Z16);             \
	X8TOKEN(1, Z17);             \
	X8TOKEN(2, Z18);             \
	X8TOKEN(3, Z19);             \
	X8TOKEN(4, Z20);             \
	X8TOKEN(5, Z21);             \
	X8TOKEN(6, Z22);             \
	X8TOKEN(7, Z23);             \
	ADDQ   $STEP, SI;            \
	ADDQ   $1024, R10;           \
	DECQ   CX;                   \
	JNZ    pair;                 \
	MOVQ   R14, BX;              \
	MOVQ   ystride+48(FP), DX;   \
	SHLQ   $2, DX;               \
	X8STORE(Z16, Y16);           \
	X8STORE(Z17, Y17);           \
	X8STORE(Z18, Y18);           \
	X8STORE(Z19, Y19);           \
	X8STORE(Z20, Y20);           \
	X8STORE(Z21, Y21);           \
	X8STORE(Z22, Y22);           \
	X8STORE(Z23, Y23);           \
	ADDQ   $4, R14;              \
	ADDQ   R12, R11;             \
	DECQ   R13;                  \
	JNZ    row;                  \
	VZEROUPPER;                  \
	RET

// Q4_0 pair (blocks at 0 and 18): nibbles - 8.
#define UNPACKQ4_0 \
	NIBPAIR(2, 20);                \
	VPSUBB       Z28, Z8, Z8;      \
	PAIRBIAS(18)

// Q5_0 pair (blocks at 0 and 22): nibble | 0xF0 where the block's 5th bit
// (qh at 2 and 24, bit j for element j) is clear, i.e. q - 16.
#define UNPACKQ5_0 \
	NIBPAIR(6, 28);                \
	MOVL         2(SI), AX;        \
	MOVL         24(SI), BX;       \
	SHLQ         $32, BX;          \
	ORQ          BX, AX;           \
	NOTQ         AX;               \
	KMOVQ        AX, K2;           \
	VPORD        Z29, Z8, Z7;      \
	VMOVDQU8     Z7, K2, Z8;       \
	PAIRBIAS(22)

// X5PRODS leaves in FL and SC token T's block pair's int sums as floats
// and lane scales (as X8TOKEN, without the accumulation).
#define X5PRODS(T, FL, SC) \
	VMOVDQU64   (128*(T))(R10), SC;     \
	VMOVDQA64   Z9, FL;               \
	VPDPBUSD    Z8, SC, FL;           \
	VCVTDQ2PS   FL, FL;               \
	VMULPS      (128*(T)+64)(R10), Z10, SC

// X5PAIR adds tokens T and T+1's block pair into ACC (lanes 0-7 token T,
// 8-15 token T+1): the even block's products, then the odd block's.
#define X5PAIR(T, ACC) \
	X5PRODS(T, Z11, Z12);               \
	X5PRODS(T+1, Z24, Z25);             \
	VSHUFF64X2  $0x44, Z24, Z11, Z26;   \
	VSHUFF64X2  $0x44, Z25, Z12, Z27;   \
	VFMADD231PS Z27, Z26, ACC;          \
	VSHUFF64X2  $0xEE, Z24, Z11, Z26;   \
	VSHUFF64X2  $0xEE, Z25, Z12, Z27;   \
	VFMADD231PS Z27, Z26, ACC

// X2STORE stores HSUM8 of ACC's lower half at (BX) and of its upper half
// at (BX)(DX), then advances BX by 2·DX.
#define X2STORE(ACC, YACC) \
	VEXTRACTF64X4 $1, ACC, Y4; \
	VMOVAPS       YACC, Y0;    \
	HSUM8(Y0, X0, X1);         \
	VMOVSS        X0, (BX);    \
	ADDQ          DX, BX;      \
	HSUM8(Y4, X4, X1);         \
	VMOVSS        X4, (BX);    \
	ADDQ          DX, BX

// X1PAIR adds token pair P's block (unsigned weight quants Z8, lane weight
// scales Z10) into ACC, with FL and SC as scratch.
#define X1PAIR(P, ACC, FL, SC) \
	VPXORD      FL, FL, FL;                 \
	VPDPBUSD    (64*(P))(R10), Z8, FL;        \
	VCVTDQ2PS   FL, FL;                     \
	VMULPS      (Q81_D+64*(P))(R10), Z10, SC; \
	VFMADD231PS SC, FL, ACC

// X1STORE stores, for token pair P (ACC, lanes 0-7 token 2P, 8-15 token
// 2P+1), HSUM8 of each half plus the token's min sum (lanes 2P and 2P+1 of
// Y20) at (BX) and (BX)(DX), then advances BX by 2·DX.
#define X1STORE(P, ACC, YACC) \
	VEXTRACTF64X4 $1, ACC, Y4;     \
	VMOVAPS       YACC, Y0;        \
	HSUM8(Y0, X0, X1);             \
	VPERMPS       Y20, Y5, Y2;     \
	VADDSS        X2, X0, X0;      \
	VMOVSS        X0, (BX);        \
	ADDQ          DX, BX;          \
	HSUM8(Y4, X4, X1);             \
	VPERMPS       Y20, Y6, Y2;     \
	VADDSS        X2, X4, X4;      \
	VMOVSS        X4, (BX);        \
	ADDQ          DX, BX;          \
	VPADDD        Y7, Y5, Y5;      \
	VPADDD        Y7, Y6, Y6

// Q1HEAD opens the row and block loops of a Q8_1-tile kernel; the caller
// then leaves a block's unsigned weight quants twice in Z8 and ends with
// Q1TAIL(STEP), STEP the bytes per block (d_w at 0, m_w at 2).
#define Q1HEAD \
	MOVQ   w+0(FP), R11;            \
	MOVQ   wrb+8(FP), R12;          \
	MOVQ   nrows+16(FP), R13;       \
	MOVQ   y+40(FP), R14;           \
	SETUP;                          \
	MOVL   $2, AX;                  \
	VPBROADCASTD AX, Y7;            \
row:                                \
	MOVQ   R11, SI;                 \
	MOVQ   prep+24(FP), R10;        \
	MOVQ   nb+32(FP), CX;           \
	VPXORD Z16, Z16, Z16;           \
	VPXORD Z17, Z17, Z17;           \
	VPXORD Z18, Z18, Z18;           \
	VPXORD Z19, Z19, Z19;           \
	VPXORD Z20, Z20, Z20;           \
blk:

// Q1TAIL adds the eight tokens' products of a block (and its min terms),
// steps STEP weight bytes to the next block and stores a row's outputs.
#define Q1TAIL(STEP) \
	VPBROADCASTW 0(SI), Y10;        \
	VCVTPH2PS    Y10, Z10;          \
	VPBROADCASTW 2(SI), X9;         \
	VCVTPH2PS    X9, Y9;            \
	X1PAIR(0, Z16, Z11, Z12);       \
	X1PAIR(1, Z17, Z21, Z22);       \
	X1PAIR(2, Z18, Z23, Z24);       \
	X1PAIR(3, Z19, Z25, Z26);       \
	VFMADD231PS Q81_S(R10), Y9, Y20; \
	ADDQ   $STEP, SI;               \
	ADDQ   $Q81_REC, R10;           \
	DECQ   CX;                      \
	JNZ    blk;                     \
	MOVQ   R14, BX;                 \
	MOVQ   ystride+48(FP), DX;      \
	SHLQ   $2, DX;                  \
	VPXORD Y5, Y5, Y5;              \
	MOVL   $1, AX;                  \
	VPBROADCASTD AX, Y6;            \
	X1STORE(0, Z16, Y16);           \
	X1STORE(1, Z17, Y17);           \
	X1STORE(2, Z18, Y18);           \
	X1STORE(3, Z19, Y19);           \
	ADDQ   $4, R14;                 \
	ADDQ   R12, R11;                \
	DECQ   R13;                     \
	JNZ    row;                     \
	VZEROUPPER;                     \
	RET

// Q4_1 block: nibbles at 4.
#define UNPACKQ4_1 \
	NIBTWICE(4)

// Q5_1 block: nibbles at 8, or 0x10 where the 5th bit (qh at 4) is set.
#define UNPACKQ5_1 \
	NIBTWICE(8);                   \
	MOVL         4(SI), AX;        \
	MOVQ         AX, BX;           \
	SHLQ         $32, BX;          \
	ORQ          BX, AX;           \
	KMOVQ        AX, K2;           \
	VPORD        Z30, Z8, Z27;     \
	VMOVDQU8     Z27, K2, Z8

// func dotQ4_0x8RowsVNNI(w *byte, wrb, nrows int, prep *byte, npairs int, y *float32, ystride int)
// computes, for nrows >= 1 Q4_0 weight rows wrb bytes apart and eight
// tokens, row r's output for token t into y[r + t·ystride], over npairs >= 1
// block pairs; prep is the tile's data (see prepareTile8). Each output
// equals dotQ4_0VNNI's bit for bit.
TEXT ·dotQ4_0x8RowsVNNI(SB), NOSPLIT, $0-56
	Q8HEAD
	UNPACKQ4_0
	Q8TAIL(36)

// func dotQ5_0x8RowsVNNI(w *byte, wrb, nrows int, prep *byte, npairs int, y *float32, ystride int)
// is dotQ4_0x8RowsVNNI for Q5_0 weights; each output equals dotQ5_0VNNI's
// bit for bit.
TEXT ·dotQ5_0x8RowsVNNI(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), R11
	MOVQ wrb+8(FP), R12
	MOVQ nrows+16(FP), R13
	MOVQ y+40(FP), R14
	SETUP

q5row:
	MOVQ   R11, SI
	MOVQ   prep+24(FP), R10
	MOVQ   npairs+32(FP), CX
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19

q5pair:
	UNPACKQ5_0
	X5PAIR(0, Z16)
	X5PAIR(2, Z17)
	X5PAIR(4, Z18)
	X5PAIR(6, Z19)
	ADDQ $44, SI
	ADDQ $1024, R10
	DECQ CX
	JNZ  q5pair

	MOVQ R14, BX
	MOVQ ystride+48(FP), DX
	SHLQ $2, DX
	X2STORE(Z16, Y16)
	X2STORE(Z17, Y17)
	X2STORE(Z18, Y18)
	X2STORE(Z19, Y19)
	ADDQ $4, R14
	ADDQ R12, R11
	DECQ R13
	JNZ  q5row
	VZEROUPPER
	RET

// func dotQ4_1x8RowsVNNI(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int)
// computes, for nrows >= 1 Q4_1 weight rows wrb bytes apart and eight
// tokens, row r's output for token t into y[r + t·ystride], over nb >= 1
// blocks; prep is the tile's data (see prepareTileQ8_1x8). Each output
// equals dotQ4_1VNNI's bit for bit.
TEXT ·dotQ4_1x8RowsVNNI(SB), NOSPLIT, $0-56
	Q1HEAD
	UNPACKQ4_1
	Q1TAIL(20)

// func dotQ5_1x8RowsVNNI(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int)
// is dotQ4_1x8RowsVNNI for Q5_1 weights; each output equals dotQ5_1VNNI's
// bit for bit.
TEXT ·dotQ5_1x8RowsVNNI(SB), NOSPLIT, $0-56
	Q1HEAD
	UNPACKQ5_1
	Q1TAIL(24)

// IQ4_NL pair (blocks at 0 and 18): the nibbles mapped through
// kvalues_iq4nl (Z31).
#define UNPACKIQ4NL \
	NIBPAIR(2, 20);                \
	VPSHUFB      Z8, Z31, Z8;      \
	PAIRBIAS(18)

// func dotIQ4NLx8RowsVNNI(w *byte, wrb, nrows int, prep *byte, npairs int, y *float32, ystride int)
// is dotQ4_0x8RowsVNNI for IQ4_NL weights; each output equals
// dotIQ4NLAVX2's (the level's row kernel, ggml's AVX2 float operations:
// even and odd blocks in two accumulators) bit for bit.
TEXT ·dotIQ4NLx8RowsVNNI(SB), NOSPLIT, $0-56
	VMOVDQU64 ·lbKvIQ4(SB), Z31
	Q8HEAD
	UNPACKIQ4NL
	Q8TAIL(36)

// MXFP4 pair (blocks at 0 and 17): the nibbles mapped through
// kvalues_mxfp4 (Z31); the lane weight scales are the blocks' E8M0 halves.
#define UNPACKMXFP4 \
	NIBPAIR(1, 18);                 \
	VPSHUFB      Z8, Z31, Z8;       \
	VPXORD       Z9, Z9, Z9;        \
	VPDPBUSD     Z8, Z14, Z9;       \
	VPSUBD       Z9, Z13, Z9;       \
	LB_E8M0(0(SI));                 \
	VPBROADCASTD BX, Y10;           \
	LB_E8M0(17(SI));                \
	VPBROADCASTD BX, Y11;           \
	VINSERTI64X4 $1, Y11, Z10, Z10

// func dotMXFP4x8RowsVNNI(w *byte, wrb, nrows int, prep *byte, npairs int, y *float32, ystride int)
// is dotIQ4NLx8RowsVNNI for MXFP4 weights (bit for bit dotMXFP4AVX2).
TEXT ·dotMXFP4x8RowsVNNI(SB), NOSPLIT, $0-56
	VMOVDQU64 ·lbKvFP4(SB), Z31
	Q8HEAD
	UNPACKMXFP4
	Q8TAIL(34)
