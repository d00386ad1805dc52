// Eight-token K-quant tiles at the AVX2 level: many weight rows (one group
// per call) against eight tokens whose Q8_K rows are laid out by
// prepareTileK8 (the AVX512 tiles' layout: every token's 32-quant
// sub-block, its 8 × d_a and its 16 bsums are each one 32-byte load). Each
// output equals the AVX2 row kernel's (dotQ4KAVX2, dotQ5KAVX2, dotQ6KAVX2)
// bit for bit: the int32 lanes of each super-block sum are the same exact
// integers (VPMADDUBSW + VPMADDWD with the sub-block scale, as there), and
// the float operations per lane are the same ones in the same order.
//
// Y0-Y7 hold the eight tokens' int32 super-block sums: each unpacked weight
// register serves eight tokens, twice the four-token kernels' reuse. The
// eight float accumulators live in the frame (0-255(SP)), loaded and stored
// once per super-block and token.

#include "textflag.h"
#include "lowbit_amd64.h"

// Prepared super-block record (see prepareTileK8): token t's sub-block s
// at 512·(t/2) + 32·(t%2) + 64·s, its 8 × d_a at T2_DA + 32·t, its bsums
// at T2_BS + 32·t.
#define T2_DA 2048
#define T2_BS 2304
#define T2_SB 2560

// T2Q is the offset of token T's sub-block S in the record.
#define T2Q(T, S) (512*((T)/2)+32*((T)%2)+64*(S))

// HSUM8 as in quant_amd64.s.
#define HSUM8(Y, X, T) \
	VEXTRACTF128 $1, Y, T; \
	VADDPS       T, X, X;  \
	VMOVHLPS     X, X, T;  \
	VADDPS       T, X, X;  \
	VMOVSHDUP    X, T;     \
	VADDSS       T, X, X

// T2MAC adds VPMADDWD(VPMADDUBSW(Q, token T's sub-block S), SC) to ACC
// (Y10 scratch).
#define T2MAC(Q, SC, T, S, ACC) \
	VPMADDUBSW T2Q(T, S)(DI), Q, Y10; \
	VPMADDWD   SC, Y10, Y10;          \
	VPADDD     Y10, ACC, ACC

// T2MAC8 is T2MAC for the eight tokens (accumulators Y0-Y7).
#define T2MAC8(Q, SC, S) \
	T2MAC(Q, SC, 0, S, Y0); \
	T2MAC(Q, SC, 1, S, Y1); \
	T2MAC(Q, SC, 2, S, Y2); \
	T2MAC(Q, SC, 3, S, Y3); \
	T2MAC(Q, SC, 4, S, Y4); \
	T2MAC(Q, SC, 5, S, Y5); \
	T2MAC(Q, SC, 6, S, Y6); \
	T2MAC(Q, SC, 7, S, Y7)

#define T2ZERO8 \
	VPXOR Y0, Y0, Y0; \
	VPXOR Y1, Y1, Y1; \
	VPXOR Y2, Y2, Y2; \
	VPXOR Y3, Y3, Y3; \
	VPXOR Y4, Y4, Y4; \
	VPXOR Y5, Y5, Y5; \
	VPXOR Y6, Y6, Y6; \
	VPXOR Y7, Y7, Y7

// T2ACCZERO zeroes the eight float accumulators in the frame (Y8 scratch).
#define T2ACCZERO \
	VXORPS  Y8, Y8, Y8;   \
	VMOVUPS Y8, 0(SP);    \
	VMOVUPS Y8, 32(SP);   \
	VMOVUPS Y8, 64(SP);   \
	VMOVUPS Y8, 96(SP);   \
	VMOVUPS Y8, 128(SP);  \
	VMOVUPS Y8, 160(SP);  \
	VMOVUPS Y8, 192(SP);  \
	VMOVUPS Y8, 224(SP)

// T2STORE1 reduces token T's float accumulator and stores it at (AX),
// advancing AX by DX.
#define T2STORE1(T) \
	VMOVUPS (32*(T))(SP), Y8; \
	HSUM8(Y8, X8, X9);        \
	VMOVSS  X8, (AX);         \
	ADDQ    DX, AX

// T2STORE8 stores the eight results of the row at (BX), stride DX bytes.
#define T2STORE8 \
	MOVQ BX, AX; \
	T2STORE1(0); \
	T2STORE1(1); \
	T2STORE1(2); \
	T2STORE1(3); \
	T2STORE1(4); \
	T2STORE1(5); \
	T2STORE1(6); \
	T2STORE1(7)

// T2ROWSETUP loads the arguments common to the kernels: R8 = row, R9 =
// wrb, R14 = rows left, BX = &y[row], DX = ystride in bytes.
#define T2ROWSETUP \
	MOVQ w+0(FP), R8;        \
	MOVQ wrb+8(FP), R9;      \
	MOVQ nrows+16(FP), R14;  \
	MOVQ y+40(FP), BX;       \
	MOVQ ystride+48(FP), DX; \
	SHLQ $2, DX

// T2K4SCALES unpacks the Q4_K/Q5_K scales and mins at (SI) as dotQ4KAVX2
// does: Y8 = the 8 int16 scales in both lanes, Y14 = the 8 int32 mins.
#define T2K4SCALES \
	MOVL        4(SI), AX;        \
	MOVL        8(SI), R10;       \
	MOVL        12(SI), R11;      \
	MOVL        AX, R12;          \
	ANDL        $0x3f3f3f3f, R12; \
	SHRL        $6, AX;           \
	ANDL        $0x03030303, AX;  \
	SHLL        $4, AX;           \
	MOVL        R11, R13;         \
	ANDL        $0x0f0f0f0f, R13; \
	ORL         R13, AX;          \
	VMOVD       R12, X8;          \
	VPINSRD     $1, AX, X8, X8;   \
	VPMOVZXBW   X8, X8;           \
	VINSERTI128 $1, X8, Y8, Y8;   \
	MOVL        R10, R12;         \
	ANDL        $0x3f3f3f3f, R12; \
	SHRL        $6, R10;          \
	ANDL        $0x03030303, R10; \
	SHLL        $4, R10;          \
	SHRL        $4, R11;          \
	ANDL        $0x0f0f0f0f, R11; \
	ORL         R11, R10;         \
	VMOVD       R12, X14;         \
	VPINSRD     $1, R10, X14, X14; \
	VPMOVZXBD   X14, Y14

// T2K4FIN folds token T's super-block sums SUMI into its float accumulator
// exactly as dotQ4KAVX2 does: Y11 = 8 × d_w, Y12 = 8 × dmin_w, Y14 = the
// mins, Y15 = int16 ones (Y8-Y10 scratch).
#define T2K4FIN(T, SUMI) \
	VPMADDWD     (T2_BS+32*(T))(DI), Y15, Y10; \
	VPMULLD      Y14, Y10, Y10;                \
	VCVTDQ2PS    Y10, Y10;                     \
	VCVTDQ2PS    SUMI, SUMI;                   \
	VMULPS       (T2_DA+32*(T))(DI), Y11, Y9;  \
	VMOVUPS      (32*(T))(SP), Y8;             \
	VFMADD231PS  Y9, SUMI, Y8;                 \
	VMULPS       (T2_DA+32*(T))(DI), Y12, Y9;  \
	VFNMADD231PS Y9, Y10, Y8;                  \
	VMOVUPS      Y8, (32*(T))(SP)

// T2K4FIN8 loads d_w and dmin_w of the super-block at (SI) and folds the
// eight tokens' sums.
#define T2K4FIN8 \
	VPBROADCASTW (SI), X11;  \
	VCVTPH2PS    X11, Y11;   \
	VPBROADCASTW 2(SI), X12; \
	VCVTPH2PS    X12, Y12;   \
	T2K4FIN(0, Y0);          \
	T2K4FIN(1, Y1);          \
	T2K4FIN(2, Y2);          \
	T2K4FIN(3, Y3);          \
	T2K4FIN(4, Y4);          \
	T2K4FIN(5, Y5);          \
	T2K4FIN(6, Y6);          \
	T2K4FIN(7, Y7)

// T2K4CHUNK does one 64-element chunk C of a Q4_K super-block (nibbles at
// 16+32·C(SI): sub-blocks 2C and 2C+1) for the eight tokens; M0, M1 pick
// the two scales (Y13 = 0x0F bytes).
#define T2K4CHUNK(C, M0, M1) \
	VMOVDQU (16+32*(C))(SI), Y11; \
	VPSRLW  $4, Y11, Y12;         \
	VPAND   Y13, Y11, Y11;        \
	VPAND   Y13, Y12, Y12;        \
	VPSHUFB M0, Y8, Y9;           \
	T2MAC8(Y11, Y9, 2*(C));       \
	VPSHUFB M1, Y8, Y9;           \
	T2MAC8(Y12, Y9, 2*(C)+1)

// T2CONSTS sets Y13 = 0x0F bytes and Y15 = int16 ones.
#define T2CONSTS \
	MOVL         $0x0F0F0F0F, AX; \
	VMOVD        AX, X13;         \
	VPBROADCASTD X13, Y13;        \
	VPCMPEQW     Y15, Y15, Y15;   \
	VPSRLW       $15, Y15, Y15

// T2LKSCALES (the Q3_K and Q2_K tiles, below) stores the sixteen scale words in Y0 (sub-blocks 0-15) for
// the halves: sub-blocks 0-7 in both lanes at 256(SP), 8-15 at 288(SP).
#define T2LKSCALES \
	VPERMQ  $0x44, Y0, Y1;  \
	VMOVDQU Y1, 256(SP);    \
	VPERMQ  $0xee, Y0, Y1;  \
	VMOVDQU Y1, 288(SP)

// func dotQ4Kx8RowsAVX2(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int)
// computes, for nrows >= 1 Q4_K weight rows wrb bytes apart and eight
// tokens, row r's output for token t into y[r + t·ystride], over nb >= 1
// super-blocks; prep is the tile's data (see prepareTileK8).
TEXT ·dotQ4Kx8RowsAVX2(SB), NOSPLIT, $256-56
	T2ROWSETUP
	T2CONSTS

q4row:
	MOVQ R8, SI
	MOVQ prep+24(FP), DI
	MOVQ nb+32(FP), CX
	T2ACCZERO

q4sb:
	T2K4SCALES
	T2ZERO8
	T2K4CHUNK(0, t2ShufK4<>+0(SB), t2ShufK4<>+32(SB))
	T2K4CHUNK(1, t2ShufK4<>+64(SB), t2ShufK4<>+96(SB))
	T2K4CHUNK(2, t2ShufK4<>+128(SB), t2ShufK4<>+160(SB))
	T2K4CHUNK(3, t2ShufK4<>+192(SB), t2ShufK4<>+224(SB))
	T2K4FIN8
	ADDQ $144, SI
	ADDQ $T2_SB, DI
	DECQ CX
	JNE  q4sb

	T2STORE8
	ADDQ $4, BX
	ADDQ R9, R8
	DECQ R14
	JNE  q4row
	VZEROUPPER
	RET

// T2K5CHUNK is T2K4CHUNK for Q5_K: the nibbles at 48+32·C(SI), their 5th
// bits from the qh bytes at 16(SI), moved to bit 4 by SL $NL (sub-block
// 2C) and SH $NH (2C+1) as dotQ5KAVX2 does.
#define T2K5CHUNK(C, M0, M1, SL, NL, SH, NH) \
	VMOVDQU (48+32*(C))(SI), Y11; \
	VPSRLW  $4, Y11, Y12;         \
	VPAND   Y13, Y11, Y11;        \
	VPAND   Y13, Y12, Y12;        \
	VMOVDQU 16(SI), Y9;           \
	SL      $NL, Y9, Y9;          \
	VPAND   t2c10<>(SB), Y9, Y9;  \
	VPOR    Y9, Y11, Y11;         \
	VMOVDQU 16(SI), Y9;           \
	SH      $NH, Y9, Y9;          \
	VPAND   t2c10<>(SB), Y9, Y9;  \
	VPOR    Y9, Y12, Y12;         \
	VPSHUFB M0, Y8, Y9;           \
	T2MAC8(Y11, Y9, 2*(C));       \
	VPSHUFB M1, Y8, Y9;           \
	T2MAC8(Y12, Y9, 2*(C)+1)

// func dotQ5Kx8RowsAVX2(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int)
// is dotQ4Kx8RowsAVX2 for Q5_K rows.
TEXT ·dotQ5Kx8RowsAVX2(SB), NOSPLIT, $256-56
	T2ROWSETUP
	T2CONSTS

q5row:
	MOVQ R8, SI
	MOVQ prep+24(FP), DI
	MOVQ nb+32(FP), CX
	T2ACCZERO

q5sb:
	T2K4SCALES
	T2ZERO8
	T2K5CHUNK(0, t2ShufK4<>+0(SB), t2ShufK4<>+32(SB), VPSLLW, 4, VPSLLW, 3)
	T2K5CHUNK(1, t2ShufK4<>+64(SB), t2ShufK4<>+96(SB), VPSLLW, 2, VPSLLW, 1)
	T2K5CHUNK(2, t2ShufK4<>+128(SB), t2ShufK4<>+160(SB), VPSLLW, 0, VPSRLW, 1)
	T2K5CHUNK(3, t2ShufK4<>+192(SB), t2ShufK4<>+224(SB), VPSRLW, 2, VPSRLW, 3)
	T2K4FIN8
	ADDQ $176, SI
	ADDQ $T2_SB, DI
	DECQ CX
	JNE  q5sb

	T2STORE8
	ADDQ $4, BX
	ADDQ R9, R8
	DECQ R14
	JNE  q5row
	VZEROUPPER
	RET

// Q6_K: Y8 = ql0, Y9 = ql1, Y10 = qh of a 128-element half, Y11 = its 8
// int16 scales in both lanes, Y12 = the quarter's quants, Y13 temp, Y14 =
// the quarter's two scales, Y15 scratch (constants from memory).

// T2MAC6 is T2MAC with Y15 as scratch.
#define T2MAC6(T, S, ACC) \
	VPMADDUBSW T2Q(T, S)(DI), Y12, Y15; \
	VPMADDWD   Y14, Y15, Y15;           \
	VPADDD     Y15, ACC, ACC

// T2K6QUARTER adds the products of the quarter built by BUILD (sub-block
// S of the super-block, scales picked by MASK) for the eight tokens.
#define T2K6QUARTER(BUILD, MASK, S) \
	BUILD;                    \
	VPSHUFB MASK, Y11, Y14;   \
	T2MAC6(0, S, Y0);         \
	T2MAC6(1, S, Y1);         \
	T2MAC6(2, S, Y2);         \
	T2MAC6(3, S, Y3);         \
	T2MAC6(4, S, Y4);         \
	T2MAC6(5, S, Y5);         \
	T2MAC6(6, S, Y6);         \
	T2MAC6(7, S, Y7)

// The quarters as dotQ6KAVX2 builds them: the 6-bit quants unsigned.
#define T2K6Q0 \
	VPAND  t2c0F<>(SB), Y8, Y12;  \
	VPAND  t2c03<>(SB), Y10, Y13; \
	VPSLLW $4, Y13, Y13;          \
	VPOR   Y13, Y12, Y12

#define T2K6Q1 \
	VPAND  t2c0F<>(SB), Y9, Y12;  \
	VPSLLW $2, Y10, Y13;          \
	VPAND  t2c30<>(SB), Y13, Y13; \
	VPOR   Y13, Y12, Y12

#define T2K6Q2 \
	VPSRLW $4, Y8, Y12;           \
	VPAND  t2c0F<>(SB), Y12, Y12; \
	VPAND  t2c30<>(SB), Y10, Y13; \
	VPOR   Y13, Y12, Y12

#define T2K6Q3 \
	VPSRLW $4, Y9, Y12;           \
	VPAND  t2c0F<>(SB), Y12, Y12; \
	VPSRLW $2, Y10, Y13;          \
	VPAND  t2c30<>(SB), Y13, Y13; \
	VPOR   Y13, Y12, Y12

// T2K6HALF does one 128-element half H (ql at QL(SI), qh at QH(SI), scales
// at SC(SI): sub-blocks 4H to 4H+3) for the eight tokens.
#define T2K6HALF(QL, QH, SC, H) \
	VMOVDQU     QL(SI), Y8;       \
	VMOVDQU     QL+32(SI), Y9;    \
	VMOVDQU     QH(SI), Y10;      \
	VPMOVSXBW   SC(SI), X11;      \
	VINSERTI128 $1, X11, Y11, Y11; \
	T2K6QUARTER(T2K6Q0, t2ShufK6<>+0(SB), 4*(H));    \
	T2K6QUARTER(T2K6Q1, t2ShufK6<>+32(SB), 4*(H)+1); \
	T2K6QUARTER(T2K6Q2, t2ShufK6<>+64(SB), 4*(H)+2); \
	T2K6QUARTER(T2K6Q3, t2ShufK6<>+96(SB), 4*(H)+3)

// T2K6FIN folds token T's super-block sums SUMI into its float accumulator
// exactly as dotQ6KAVX2 does: Y8 = the 16 int16 scales, Y9 = 8 × d_w
// (Y10, Y11 scratch).
#define T2K6FIN(T, SUMI) \
	VPMADDWD    (T2_BS+32*(T))(DI), Y8, Y10; \
	VPSLLD      $5, Y10, Y10;                \
	VPSUBD      Y10, SUMI, SUMI;             \
	VCVTDQ2PS   SUMI, SUMI;                  \
	VMULPS      (T2_DA+32*(T))(DI), Y9, Y10; \
	VMOVUPS     (32*(T))(SP), Y11;           \
	VFMADD231PS Y10, SUMI, Y11;              \
	VMOVUPS     Y11, (32*(T))(SP)

// func dotQ6Kx8RowsAVX2(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int)
// is dotQ4Kx8RowsAVX2 for Q6_K rows.
TEXT ·dotQ6Kx8RowsAVX2(SB), NOSPLIT, $256-56
	T2ROWSETUP

q6row:
	MOVQ R8, SI
	MOVQ prep+24(FP), DI
	MOVQ nb+32(FP), CX
	T2ACCZERO

q6sb:
	T2ZERO8
	T2K6HALF(0, 128, 192, 0)
	T2K6HALF(64, 160, 200, 1)
	VPMOVSXBW    192(SI), Y8
	VPBROADCASTW 208(SI), X9
	VCVTPH2PS    X9, Y9
	T2K6FIN(0, Y0)
	T2K6FIN(1, Y1)
	T2K6FIN(2, Y2)
	T2K6FIN(3, Y3)
	T2K6FIN(4, Y4)
	T2K6FIN(5, Y5)
	T2K6FIN(6, Y6)
	T2K6FIN(7, Y7)
	ADDQ $210, SI
	ADDQ $T2_SB, DI
	DECQ CX
	JNE  q6sb

	T2STORE8
	ADDQ $4, BX
	ADDQ R9, R8
	DECQ R14
	JNE  q6row
	VZEROUPPER
	RET

DATA t2c0F<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA t2c0F<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA t2c0F<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA t2c0F<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL t2c0F<>(SB), RODATA|NOPTR, $32

DATA t2c03<>+0(SB)/8, $0x0303030303030303
DATA t2c03<>+8(SB)/8, $0x0303030303030303
DATA t2c03<>+16(SB)/8, $0x0303030303030303
DATA t2c03<>+24(SB)/8, $0x0303030303030303
GLOBL t2c03<>(SB), RODATA|NOPTR, $32

DATA t2c30<>+0(SB)/8, $0x3030303030303030
DATA t2c30<>+8(SB)/8, $0x3030303030303030
DATA t2c30<>+16(SB)/8, $0x3030303030303030
DATA t2c30<>+24(SB)/8, $0x3030303030303030
GLOBL t2c30<>(SB), RODATA|NOPTR, $32

DATA t2c10<>+0(SB)/8, $0x1010101010101010
DATA t2c10<>+8(SB)/8, $0x1010101010101010
DATA t2c10<>+16(SB)/8, $0x1010101010101010
DATA t2c10<>+24(SB)/8, $0x1010101010101010
GLOBL t2c10<>(SB), RODATA|NOPTR, $32

// t2ShufK4 mask j (32 bytes) broadcasts int16 word j of each 128-bit lane
// to the whole lane (Q4_K/Q5_K sub-block scale j), as shufK4 does.
DATA t2ShufK4<>+0(SB)/8, $0x0100010001000100
DATA t2ShufK4<>+8(SB)/8, $0x0100010001000100
DATA t2ShufK4<>+16(SB)/8, $0x0100010001000100
DATA t2ShufK4<>+24(SB)/8, $0x0100010001000100
DATA t2ShufK4<>+32(SB)/8, $0x0302030203020302
DATA t2ShufK4<>+40(SB)/8, $0x0302030203020302
DATA t2ShufK4<>+48(SB)/8, $0x0302030203020302
DATA t2ShufK4<>+56(SB)/8, $0x0302030203020302
DATA t2ShufK4<>+64(SB)/8, $0x0504050405040504
DATA t2ShufK4<>+72(SB)/8, $0x0504050405040504
DATA t2ShufK4<>+80(SB)/8, $0x0504050405040504
DATA t2ShufK4<>+88(SB)/8, $0x0504050405040504
DATA t2ShufK4<>+96(SB)/8, $0x0706070607060706
DATA t2ShufK4<>+104(SB)/8, $0x0706070607060706
DATA t2ShufK4<>+112(SB)/8, $0x0706070607060706
DATA t2ShufK4<>+120(SB)/8, $0x0706070607060706
DATA t2ShufK4<>+128(SB)/8, $0x0908090809080908
DATA t2ShufK4<>+136(SB)/8, $0x0908090809080908
DATA t2ShufK4<>+144(SB)/8, $0x0908090809080908
DATA t2ShufK4<>+152(SB)/8, $0x0908090809080908
DATA t2ShufK4<>+160(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA t2ShufK4<>+168(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA t2ShufK4<>+176(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA t2ShufK4<>+184(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA t2ShufK4<>+192(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA t2ShufK4<>+200(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA t2ShufK4<>+208(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA t2ShufK4<>+216(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA t2ShufK4<>+224(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA t2ShufK4<>+232(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA t2ShufK4<>+240(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA t2ShufK4<>+248(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL t2ShufK4<>(SB), RODATA|NOPTR, $256

// t2ShufK6 mask t broadcasts word 2t of the low lane over the low lane and
// word 2t+1 of the high lane over the high lane (two Q6_K sub-block
// scales), as shufK6 does.
DATA t2ShufK6<>+0(SB)/8, $0x0100010001000100
DATA t2ShufK6<>+8(SB)/8, $0x0100010001000100
DATA t2ShufK6<>+16(SB)/8, $0x0302030203020302
DATA t2ShufK6<>+24(SB)/8, $0x0302030203020302
DATA t2ShufK6<>+32(SB)/8, $0x0504050405040504
DATA t2ShufK6<>+40(SB)/8, $0x0504050405040504
DATA t2ShufK6<>+48(SB)/8, $0x0706070607060706
DATA t2ShufK6<>+56(SB)/8, $0x0706070607060706
DATA t2ShufK6<>+64(SB)/8, $0x0908090809080908
DATA t2ShufK6<>+72(SB)/8, $0x0908090809080908
DATA t2ShufK6<>+80(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA t2ShufK6<>+88(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA t2ShufK6<>+96(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA t2ShufK6<>+104(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA t2ShufK6<>+112(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA t2ShufK6<>+120(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL t2ShufK6<>(SB), RODATA|NOPTR, $128

// Q8_0 at AVX2 reads the layout of prepareTile8Signed: tokens 0-3, then
// tokens 4-7, each half a run of one 144-byte record per block (the four
// tokens' 32 signed activation quants, then their four float32 scales), so
// that a pass over a row streams one contiguous run. The even and odd
// blocks keep separate accumulators as in dotQ8_0AVX2, so a row takes two
// passes of four tokens (Y0-Y7: token j's even and odd sums in Y(2j),
// Y(2j+1)); Y8 = the block's weight quants, Y9 = their absolute values,
// Y10 = 8 × d_w, Y15 = int16 ones.

// T2Q8TOKEN adds token J of the block record at ROFF(DI) to ACC with the
// sign trick, as X4TOKEN_AVX2 does.
#define T2Q8TOKEN(ROFF, J, ACC) \
	VMOVDQU      (ROFF+32*(J))(DI), Y11;    \
	VPSIGNB      Y8, Y11, Y11;              \
	VPMADDUBSW   Y11, Y9, Y11;              \
	VPMADDWD     Y15, Y11, Y11;             \
	VCVTDQ2PS    Y11, Y11;                  \
	VBROADCASTSS (ROFF+128+4*(J))(DI), Y12; \
	VMULPS       Y12, Y10, Y12;             \
	VFMADD231PS  Y12, Y11, ACC

// T2Q8BLOCK loads the weight block at WOFF(SI) and adds it for the four
// tokens of the record at ROFF(DI).
#define T2Q8BLOCK(WOFF, ROFF, A0, A1, A2, A3) \
	VMOVDQU      WOFF+2(SI), Y8; \
	VPABSB       Y8, Y9;         \
	VPBROADCASTW WOFF(SI), X10;  \
	VCVTPH2PS    X10, Y10;       \
	T2Q8TOKEN(ROFF, 0, A0);      \
	T2Q8TOKEN(ROFF, 1, A1);      \
	T2Q8TOKEN(ROFF, 2, A2);      \
	T2Q8TOKEN(ROFF, 3, A3)

// T2Q8STORE reduces token J's sums EVEN + ODD as dotQ8_0AVX2 does and
// stores the result at (AX), advancing AX by DX.
#define T2Q8STORE(EVEN, ODD, EX) \
	VADDPS ODD, EVEN, EVEN; \
	HSUM8(EVEN, EX, X12);   \
	VMOVSS EX, (AX);        \
	ADDQ   DX, AX

// T2Q8PASS runs the four tokens whose records start at DI over the row at
// R8 and stores their results from (AX).
#define T2Q8PASS(LOOP) \
	MOVQ   R8, SI;                     \
	MOVQ   npairs+32(FP), CX;          \
	VXORPS Y0, Y0, Y0;                 \
	VXORPS Y1, Y1, Y1;                 \
	VXORPS Y2, Y2, Y2;                 \
	VXORPS Y3, Y3, Y3;                 \
	VXORPS Y4, Y4, Y4;                 \
	VXORPS Y5, Y5, Y5;                 \
	VXORPS Y6, Y6, Y6;                 \
	VXORPS Y7, Y7, Y7;                 \
LOOP:                                  \
	T2Q8BLOCK(0, 0, Y0, Y2, Y4, Y6);    \
	T2Q8BLOCK(34, 144, Y1, Y3, Y5, Y7); \
	ADDQ $68, SI;                      \
	ADDQ $288, DI;                     \
	DECQ CX;                           \
	JNE  LOOP;                         \
	T2Q8STORE(Y0, Y1, X0);             \
	T2Q8STORE(Y2, Y3, X2);             \
	T2Q8STORE(Y4, Y5, X4);             \
	T2Q8STORE(Y6, Y7, X6)

// func dotQ8_0x8RowsAVX2(w *byte, wrb, nrows int, prep *byte, npairs int, y *float32, ystride int)
// computes, for nrows >= 1 Q8_0 weight rows wrb bytes apart and eight
// tokens, row r's output for token t into y[r + t·ystride], over npairs >=
// 1 block pairs; prep is the tile's data (see prepareTile8Signed).
TEXT ·dotQ8_0x8RowsAVX2(SB), NOSPLIT, $0-56
	T2ROWSETUP
	MOVQ     npairs+32(FP), R10
	IMULQ    $288, R10
	VPCMPEQW Y15, Y15, Y15
	VPSRLW   $15, Y15, Y15

q8row:
	MOVQ BX, AX
	MOVQ prep+24(FP), DI
	T2Q8PASS(q8lo)
	MOVQ prep+24(FP), DI
	ADDQ R10, DI
	T2Q8PASS(q8hi)
	ADDQ $4, BX
	ADDQ R9, R8
	DECQ R14
	JNE  q8row
	VZEROUPPER
	RET

// The eight-token tiles of IQ4_XS, Q3_K and Q2_K at AVX2, on the same
// prepared data: each output equals the row kernel's (dotIQ4XSAVX2,
// dotQ3KAVX2, dotQ2KAVX2: ggml's AVX2 vec_dot) bit for bit, the same exact
// int32 lanes and the same float operations per lane. The weights of a
// sub-block are unpacked once (signed values for IQ4_XS and Q3_K, whose
// activations go through the sign trick per token; Q2_K's unsigned
// quants meet the activations straight from memory). Y0-Y7 hold the
// tokens' int sums, Y15 the scale words the sub-blocks pick from; the
// float accumulators and the K types' scale words live in the frame.

// T2SMAC adds token T's sub-block S times the signed weights Y8 (|w| in
// Y9), weighted by the scale words Y10, to ACC (Y11, Y12 scratch).
#define T2SMAC(T, S, ACC) \
	VMOVDQU    T2Q(T, S)(DI), Y11; \
	VPSIGNB    Y8, Y11, Y11;       \
	VPMADDUBSW Y11, Y9, Y12;       \
	VPMADDWD   Y10, Y12, Y12;      \
	VPADDD     Y12, ACC, ACC

#define T2SMAC8(S) \
	T2SMAC(0, S, Y0); \
	T2SMAC(1, S, Y1); \
	T2SMAC(2, S, Y2); \
	T2SMAC(3, S, Y3); \
	T2SMAC(4, S, Y4); \
	T2SMAC(5, S, Y5); \
	T2SMAC(6, S, Y6); \
	T2SMAC(7, S, Y7)

// T2UMAC is T2SMAC for the unsigned weights in Y8 (Q2_K).
#define T2UMAC(T, S, ACC) \
	VPMADDUBSW T2Q(T, S)(DI), Y8, Y12; \
	VPMADDWD   Y10, Y12, Y12;          \
	VPADDD     Y12, ACC, ACC

#define T2UMAC8(S) \
	T2UMAC(0, S, Y0); \
	T2UMAC(1, S, Y1); \
	T2UMAC(2, S, Y2); \
	T2UMAC(3, S, Y3); \
	T2UMAC(4, S, Y4); \
	T2UMAC(5, S, Y5); \
	T2UMAC(6, S, Y6); \
	T2UMAC(7, S, Y7)

// T2DFIN folds token T's int sums ACC into its float accumulator:
// fma(d_w·d_a, float(ACC), acc), Y14 = 8 × d_w (Y11, Y12 scratch).
#define T2DFIN(T, ACC) \
	VCVTDQ2PS   ACC, ACC;                    \
	VMULPS      (T2_DA+32*(T))(DI), Y14, Y12; \
	VMOVUPS     (32*(T))(SP), Y11;           \
	VFMADD231PS Y12, ACC, Y11;               \
	VMOVUPS     Y11, (32*(T))(SP)

#define T2DFIN8 \
	T2DFIN(0, Y0); \
	T2DFIN(1, Y1); \
	T2DFIN(2, Y2); \
	T2DFIN(3, Y3); \
	T2DFIN(4, Y4); \
	T2DFIN(5, Y5); \
	T2DFIN(6, Y6); \
	T2DFIN(7, Y7)

// T2XSSUB does IQ4_XS sub-block IB: its nibbles at 8+16·IB(SI) mapped
// through the table in Y13, the scale word IB of Y15.
#define T2XSSUB(IB) \
	VMOVDQU     (8+16*(IB))(SI), X8;            \
	VPSRLW      $4, X8, X9;                     \
	VINSERTI128 $1, X9, Y8, Y8;                 \
	VPAND       t2c0F<>(SB), Y8, Y8;            \
	VPSHUFB     Y8, Y13, Y8;                    \
	VPABSB      Y8, Y9;                         \
	VPSHUFB     t2ShufK4<>+32*(IB)(SB), Y15, Y10; \
	T2SMAC8(IB)

// func dotIQ4XSx8RowsAVX2(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int)
// computes, for nrows >= 1 IQ4_XS weight rows wrb bytes apart and eight
// tokens, row r's output for token t into y[r + t·ystride], over nb >= 1
// super-blocks; prep is the tile's data (see prepareTileK8).
TEXT ·dotIQ4XSx8RowsAVX2(SB), NOSPLIT, $256-56
	T2ROWSETUP
	VMOVDQU ·lbKvIQ4(SB), Y13

xsrow:
	MOVQ R8, SI
	MOVQ prep+24(FP), DI
	MOVQ nb+32(FP), CX
	T2ACCZERO

xssb:
	// The eight scales ls−32 as dotIQ4XSAVX2 unpacks them, in both lanes of
	// Y15.
	LB_XS_SCALES8(4(SI), 2(SI), X0, X1, Y1, X2)
	VINSERTI128  $1, X0, Y0, Y15
	T2ZERO8
	T2XSSUB(0)
	T2XSSUB(1)
	T2XSSUB(2)
	T2XSSUB(3)
	T2XSSUB(4)
	T2XSSUB(5)
	T2XSSUB(6)
	T2XSSUB(7)
	VPBROADCASTW (SI), X14
	VCVTPH2PS    X14, Y14
	T2DFIN8
	ADDQ $136, SI
	ADDQ $T2_SB, DI
	DECQ CX
	JNE  xssb

	T2STORE8
	ADDQ $4, BX
	ADDQ R9, R8
	DECQ R14
	JNE  xsrow
	VZEROUPPER
	RET

// T2Q3SUB does chunk I of half H of a Q3_K super-block: the low bits at
// bits 2I of the qs bytes at 32+32H(SI), minus 4 where bit 4H+I of the
// hmask bytes at (SI) is clear, as signed weights; the scales of
// sub-blocks 8H+2I and 8H+2I+1 from Y15 (the half's eight, both lanes).
#define T2Q3SUB(H, I) \
	VMOVDQU  (32+32*(H))(SI), Y8;            \
	VPSRLW   $(2*(I)), Y8, Y8;               \
	VPAND    t2c03<>(SB), Y8, Y8;            \
	VMOVDQU  ·lbC01(SB), Y13;               \
	VPSLLW   $(4*(H)+(I)), Y13, Y13;         \
	VPAND    (SI), Y13, Y14;                 \
	VPCMPEQB Y13, Y14, Y14;                  \
	VPANDN   ·lbC04(SB), Y14, Y14;          \
	VPSUBB   Y14, Y8, Y8;                    \
	VPABSB   Y8, Y9;                         \
	VPSHUFB  t2ShufK6<>+32*(I)(SB), Y15, Y10; \
	T2SMAC8(4*(H)+(I))

// func dotQ3Kx8RowsAVX2(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int)
// is dotIQ4XSx8RowsAVX2 for Q3_K rows.
TEXT ·dotQ3Kx8RowsAVX2(SB), NOSPLIT, $320-56
	T2ROWSETUP

q3row:
	MOVQ R8, SI
	MOVQ prep+24(FP), DI
	MOVQ nb+32(FP), CX
	T2ACCZERO

q3sb:
	// The sixteen scales sc−32 as dotQ3KAVX2 unpacks them.
	LB_Q3_SCALES16(96(SI), 100(SI), 104(SI), X0, Y0, AX, R10, R11, R12, R13)
	T2LKSCALES
	T2ZERO8
	VMOVDQU 256(SP), Y15
	T2Q3SUB(0, 0)
	T2Q3SUB(0, 1)
	T2Q3SUB(0, 2)
	T2Q3SUB(0, 3)
	VMOVDQU 288(SP), Y15
	T2Q3SUB(1, 0)
	T2Q3SUB(1, 1)
	T2Q3SUB(1, 2)
	T2Q3SUB(1, 3)
	VPBROADCASTW 108(SI), X14
	VCVTPH2PS    X14, Y14
	T2DFIN8
	ADDQ $110, SI
	ADDQ $T2_SB, DI
	DECQ CX
	JNE  q3sb

	T2STORE8
	ADDQ $4, BX
	ADDQ R9, R8
	DECQ R14
	JNE  q3row
	VZEROUPPER
	RET

// T2Q2SUB does chunk I of half H of a Q2_K super-block: the unsigned
// quants at bits 2I of the qs bytes in Y13, the scales from Y15.
#define T2Q2SUB(H, I) \
	VPSRLW  $(2*(I)), Y13, Y8;               \
	VPAND   t2c03<>(SB), Y8, Y8;             \
	VPSHUFB t2ShufK6<>+32*(I)(SB), Y15, Y10; \
	T2UMAC8(4*(H)+(I))

// T2Q2FIN folds token T's min terms, then its scaled sums ACC, into its
// float accumulator as dotQ2KAVX2 does: Y9 = the sixteen mins as words,
// Y13 = 8 × −dmin_w, Y14 = 8 × d_w (Y10-Y12 scratch).
#define T2Q2FIN(T, ACC) \
	VPMADDWD    (T2_BS+32*(T))(DI), Y9, Y11;  \
	VCVTDQ2PS   Y11, Y11;                     \
	VMULPS      (T2_DA+32*(T))(DI), Y13, Y12; \
	VMOVUPS     (32*(T))(SP), Y10;            \
	VFMADD231PS Y12, Y11, Y10;                \
	VCVTDQ2PS   ACC, ACC;                     \
	VMULPS      (T2_DA+32*(T))(DI), Y14, Y12; \
	VFMADD231PS Y12, ACC, Y10;                \
	VMOVUPS     Y10, (32*(T))(SP)

// func dotQ2Kx8RowsAVX2(w *byte, wrb, nrows int, prep *byte, nb int, y *float32, ystride int)
// is dotIQ4XSx8RowsAVX2 for Q2_K rows.
TEXT ·dotQ2Kx8RowsAVX2(SB), NOSPLIT, $352-56
	T2ROWSETUP

q2row:
	MOVQ R8, SI
	MOVQ prep+24(FP), DI
	MOVQ nb+32(FP), CX
	T2ACCZERO

q2sb:
	VMOVDQU   (SI), X0
	VPSRLW    $4, X0, X1
	VPAND     t2c0F<>(SB), X1, X1
	VPMOVZXBW X1, Y1
	VMOVDQU   Y1, 320(SP)
	VPAND     t2c0F<>(SB), X0, X0
	VPMOVZXBW X0, Y0
	T2LKSCALES
	T2ZERO8
	VMOVDQU 256(SP), Y15
	VMOVDQU 16(SI), Y13
	T2Q2SUB(0, 0)
	T2Q2SUB(0, 1)
	T2Q2SUB(0, 2)
	T2Q2SUB(0, 3)
	VMOVDQU 288(SP), Y15
	VMOVDQU 48(SI), Y13
	T2Q2SUB(1, 0)
	T2Q2SUB(1, 1)
	T2Q2SUB(1, 2)
	T2Q2SUB(1, 3)
	VMOVDQU      320(SP), Y9
	VPBROADCASTW 82(SI), X13
	VCVTPH2PS    X13, Y13
	VXORPS       ·lbSign(SB), Y13, Y13
	VPBROADCASTW 80(SI), X14
	VCVTPH2PS    X14, Y14
	T2Q2FIN(0, Y0)
	T2Q2FIN(1, Y1)
	T2Q2FIN(2, Y2)
	T2Q2FIN(3, Y3)
	T2Q2FIN(4, Y4)
	T2Q2FIN(5, Y5)
	T2Q2FIN(6, Y6)
	T2Q2FIN(7, Y7)
	ADDQ $84, SI
	ADDQ $T2_SB, DI
	DECQ CX
	JNE  q2sb

	T2STORE8
	ADDQ $4, BX
	ADDQ R9, R8
	DECQ R14
	JNE  q2row
	VZEROUPPER
	RET
