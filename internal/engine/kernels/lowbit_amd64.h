// Macros shared by the assembly of the MXFP4, IQ4_NL, IQ4_XS, Q2_K and Q3_K
// kernels (lowbit_amd64.s, tile_lowbit_amd64.s, matvec_lowbit_amd64.s and
// their parts of tile_avx2_amd64.s and tile_q_amd64.s); the constants they
// read are the ·lb* tables of lowbit_amd64.s.

// LB_XS_SCALES8 leaves the eight 6-bit scales of an IQ4_XS block, minus 32,
// in the int16 words of XD, as ggml's AVX2 kernel forms them: the low four
// bits from the four scales_l bytes at SL (low nibble for even sub-blocks),
// the high two from the scales_h word at SH shifted per sub-block. XT, YT
// (XT's ymm) and XT2 are scratch.
#define LB_XS_SCALES8(SL, SH, XD, XT, YT, XT2) \
	VMOVD        SL, XD;                  \
	VPSRLW       $4, XD, XT;              \
	VPUNPCKLBW   XT, XD, XD;              \
	VPAND        ·lbC0F(SB), XD, XD;      \
	VPMOVZXBW    XD, XD;                  \
	VPBROADCASTW SH, XT;                  \
	VPMOVZXWD    XT, YT;                  \
	VPSRLVD      ·lbXsShift(SB), YT, YT;  \
	VPSLLD       $4, YT, YT;              \
	VPAND        ·lbXs30(SB), YT, YT;     \
	VEXTRACTI128 $1, YT, XT2;             \
	VPACKUSDW    XT2, XT, XT;             \
	VPOR         XT, XD, XD;              \
	VPSUBW       ·lbXs32(SB), XD, XD

// LB_Q3_SCALES16 leaves the sixteen 6-bit scales of a Q3_K block, minus 32,
// in the int16 words of YD (XD its low half), as ggml's AVX2 kernel forms
// them: four dwords of bytes from the 12 scale bytes (dwords at A0, A1, A2),
// low nibbles with bits from the third dword. RA, RB, RD, R1, R2 are
// scratch general registers.
#define LB_Q3_SCALES16(A0, A1, A2, XD, YD, RA, RB, RD, R1, R2) \
	MOVL      A0, RA;            \
	MOVL      A1, RB;            \
	MOVL      A2, RD;            \
	MOVL      RA, R1;            \
	ANDL      $0x0f0f0f0f, R1;   \
	MOVL      RD, R2;            \
	ANDL      $0x03030303, R2;   \
	SHLL      $4, R2;            \
	ORL       R2, R1;            \
	VMOVD     R1, XD;            \
	MOVL      RB, R1;            \
	ANDL      $0x0f0f0f0f, R1;   \
	MOVL      RD, R2;            \
	SHRL      $2, R2;            \
	ANDL      $0x03030303, R2;   \
	SHLL      $4, R2;            \
	ORL       R2, R1;            \
	VPINSRD   $1, R1, XD, XD;    \
	MOVL      RA, R1;            \
	SHRL      $4, R1;            \
	ANDL      $0x0f0f0f0f, R1;   \
	MOVL      RD, R2;            \
	SHRL      $4, R2;            \
	ANDL      $0x03030303, R2;   \
	SHLL      $4, R2;            \
	ORL       R2, R1;            \
	VPINSRD   $2, R1, XD, XD;    \
	MOVL      RB, R1;            \
	SHRL      $4, R1;            \
	ANDL      $0x0f0f0f0f, R1;   \
	SHRL      $6, RD;            \
	ANDL      $0x03030303, RD;   \
	SHLL      $4, RD;            \
	ORL       RD, R1;            \
	VPINSRD   $3, R1, XD, XD;    \
	VPSUBB    ·lbC20(SB), XD, XD; \
	VPMOVSXBW XD, YD

// LB_E8M0 leaves in BX the float32 bits of ggml_e8m0_to_fp32_half of the
// MXFP4 exponent byte at ADDR: (e−1)<<23, or 0x00200000<<e = (e+1)<<21
// for e < 2 (clobbers AX, DX).
#define LB_E8M0(ADDR) \
	MOVBLZX ADDR, AX;     \
	LEAL    -1(AX), BX;   \
	SHLL    $23, BX;      \
	LEAL    1(AX), DX;    \
	SHLL    $21, DX;      \
	CMPL    AX, $2;       \
	CMOVLCS DX, BX
