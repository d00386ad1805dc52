// Package kernels holds the engine's compute kernels: dot products of a
// weight row with an activation row for every weight type a GGUF model
// uses, activation quantization, f32/f16 vector helpers for attention, and
// a worker pool with a threaded matrix multiply.
//
// # Data flow
//
// The model code calls Pool.MatMul for every linear layer y = W·x (and
// Pool.MatVecs for the one-token products that share an input). As
// llama.cpp does on CPU, the activation rows x (f32) are first converted to
// the weight type's "vec dot type" (VecDotType: F32→F32, F16→F16,
// BF16→BF16, Q8_0/Q4_0/Q5_0/IQ4_NL/MXFP4→Q8_0, Q4_1/Q5_1→Q8_1,
// Q2_K/Q3_K/Q4_K/Q5_K/Q6_K/IQ4_XS→Q8_K)
// with QuantizeActivation, then each output is VecDot of a weight row (read
// in place from the model file's bytes) with a quantized activation row: an
// integer dot per block, scaled by the two block scales, summed in float32.
// Attention uses DotF32/DotF16 (q·k) and AxpyF32/AxpyF16 (weights·v) on the
// KV cache, and ConvertF32ToF16 to store F16 cache rows; tiled attention
// uses the block forms AttnScoresF16/F32 (many queries against many keys)
// and AttnAccumF16/F32 (their weighted values), bit for bit the row forms,
// with AVX-512 and AVX2 assembly (AttnTiled).
//
// # API, levels and kernels
//
// NewPool(threads) (<= 0: runtime.NumCPU()), Pool.MatMul(wt, w, nOut, nIn, x,
// nTok, y), Pool.MatVecs(nIn, x, ops...) (up to MaxMatVecs one-token products
// MatVec{Type, W, Out, Y} of one input in one round: a decode step's Q/K/V or
// gate/up; MatMul with one token takes the same path), Pool.Parallel(n, fn),
// Pool.Stats (rounds, rounds run on the caller alone, helper wake-ups),
// Pool.SetCoreLease, Pool.Close. Attention: DotF16Rows (one query against a
// page's key rows) and AxpyF16Rows (a weighted sum of a page's value rows),
// one call per page, bit for bit equal to DotF16/AxpyF16 row by row (AVX-512
// assembly keeps the output row in registers); ExpF32 and ExpShiftF32
// (softmax's exp, a degree-6 polynomial in unfused float32 operations, so the
// AVX2 form gives the Go reference's bits) and SwiGLU (silu(g)·u with that
// exp, gates below -88 taken as 0; AVX2, bit for bit the Go reference). Tiled
// attention (attn.go, attn_amd64.s): AttnScoresF16/AttnScoresF32 (a block of
// queries against a block of keys; at AVX-512 F16 a 4-query x 4-key register
// tile, each loaded key row serving four queries, every score reduced by
// DotF16Rows's tree) and AttnAccumF16/AttnAccumF32 (a block of queries'
// weighted value sums, four queries x 64 lanes in registers at AVX-512, x 16
// at AVX2), each equal to the row kernels bit for bit at every level (the row
// kernels where a level has no block assembly); AttnTiled reports whether the
// current level has some. SoftmaxF32 (ggml's softmax: max, ExpF32, float64
// sum, scale; AVX-512 assembly, the sum's order the level's). Row kernels:
// VecDot, QuantizeActivation, ActivationRowBytes, Supported, and the float
// helpers. Levels: Generic everywhere; on amd64 the CPU is detected once and
// hand-written Go assembly is used at AVX2 (AVX2+FMA+F16C) and AVX512 (AVX-512
// F/BW/VL/DQ plus VNNI); a kernel without assembly at a level uses the next
// lower one. SetLevel, CurrentLevel, MaxLevel, CheckLevel for tests and
// benchmarks. For batches, four-token kernels share weight unpacking (Q8_0,
// Q4_0, Q5_0, Q4_K, Q5_K, Q6_K, and F16 at AVX-512); at AVX2 and below Q4_1,
// Q5_1, BF16 and F32 batches run one token at a time. At AVX-512, Q8_0, Q4_0,
// Q5_0, Q4_1, Q5_1, Q4_K, Q5_K and Q6_K batches, F16 batches of rows up to
// 1024 wide and BF16 ones up to 2048, go eight tokens at a time through an
// eight-token kernel over a whole group of rows per call, then four at a time
// where the type has a four-token kernel, then one at a time (F32 batches run
// one token at a time). At AVX2, Q8_0, Q4_K, Q5_K and Q6_K batches go eight
// tokens at a time through AVX2 eight-token kernels (tile_avx2_amd64.s), then
// four at a time. The F16 and BF16 ones (tile_f_amd64.s) read the eight
// tokens' activations widened to float32 once per tile, so one weight
// conversion serves eight fused multiply-adds with memory operands; they make
// four passes over a row, one per accumulator of the row kernel (whose
// accumulators are independent), keeping eight tokens' accumulators in
// registers. They read 32 bytes of tile data per element for every row, so on
// wider rows (the data out of L1 for F16, out of L2 for BF16) the old paths
// win and prep8Bytes declines them. The Q8_0 one reads block pairs and their
// lane scales laid out for it, so it needs no shuffles; Q4_0 and Q5_0
// (tile_q_amd64.s, even block counts, as the Q8_0 one) read the same Q8_0
// records against a block pair of weights unpacked once per row (Q5_0's fifth
// bits through a byte mask), Q5_0 moving each token pair's even- and odd-block
// halves together (VSHUFF64X2) because its row kernel adds every block into
// one accumulator in order; Q4_1 and Q5_1 read Q8_1 rows laid out in token
// pairs (prepareTileQ8_1x8: one 64-byte load holds a block of two tokens
// against a register holding the weight block twice, unsigned nibbles straight
// into VPDPBUSD), with the eight tokens' min terms (m_w·s_a) in one eight-lane
// fused multiply-add per block; the K-quant ones (tile_k_amd64.s) read the
// Q8_K rows in token pairs (one 64-byte load holds a 32-quant sub-block of two
// tokens, against a register holding the weights' sub-block twice; Q4_K and
// Q5_K pack the two sub-blocks' VPDPBUSD sums of a chunk into the words of one
// dword, biased so no borrow crosses them, for one VPDPWSSD with both scales;
// Q6_K uses VPMADDUBSW and VPDPWSSD), so each unpacked weight block serves
// eight tokens, two tokens share every integer and float register, and the
// scales and mins are unpacked once per row and super-block. The AVX2 tiles
// (tile_avx2_amd64.s) mirror the AVX2 row kernels' operations: the K-quant
// ones read the same Q8_K tile data (each token's sub-block, 8 × d_a and bsums
// are one 32-byte load), keep the eight tokens' int32 super-block sums in
// eight of the 16 ymm registers (VPMADDUBSW + VPMADDWD with the sub-block
// scale, against one unpacked weight register) and their float sums in the
// stack frame, touched once per super-block; the Q8_0 one has its own layout
// (prepareTile8Signed, which MatMul picks by the level: the sign trick needs
// signed quants, and a record per block of four tokens' quants and float32
// scales, tokens 0-3 then 4-7, is about half the AVX-512 records' bytes) and,
// because the row kernel's even and odd blocks have their own accumulators,
// takes a row in two passes of four tokens, each a contiguous run of the tile
// data. No AVX-VNNI (VEX VPDPBUSD) form: the AVX2 level does not require it,
// and the Zen 4 development machine lacks it. MatMul quantizes and lays out
// each tile in one round (a tile per chunk, while its rows are in cache) and,
// for four tokens or more, hands the rows out in chunks of one cache group
// rounded up to 16 rows (whole cache lines of each token's outputs), so the
// threads finish within a chunk of each other and never write one line. One
// token (decode) at AVX-512 goes through a many-row Q8_0 matrix-vector kernel:
// a whole chunk of rows per call, block pairs in 512-bit registers, the
// weights offset by 128 to unsigned bytes against the activation prepared once
// per call (quants, -128·Σa per lane, f32 scales), bit for bit VecDot. Q4_K,
// Q5_K and Q6_K go through many-row kernels too (matvec_k_amd64.s): two weight
// rows share every register, one per half, against the Q8_K activation row as
// QuantizeActivation makes it (quantized once per call; each 32-byte piece,
// the bsums and d_a are broadcast to both halves as they are loaded), so each
// activation load meets two rows, with the tiles' packed-dword
// VPDPBUSD/VPDPWSSD trick for Q4_K and Q5_K and VPMADDUBSW/VPDPWSSD for Q6_K.
// A chunk's first half of rows is paired with its second half, two sequential
// weight streams: pairing neighbouring rows ran at a third of the memory rate
// (the prefetchers lost track); two super-blocks of one row per register (one
// stream) measured slower for Q4_K; a prepared activation with every piece
// stored twice fell out of L1 on 5632-wide rows. Each output is bit for bit
// the AVX2 row kernel's, which VecDot runs at this level (same int32 lanes,
// same float operations per lane in order, same reduction). Other types and
// levels dot row by row.
//
// # MXFP4, IQ4_NL, IQ4_XS, Q2_K, Q3_K
//
// (lowbit.go, lowbit_amd64.s, tile_lowbit_amd64.s, matvec_lowbit_amd64.s, and
// the IQ4_NL/MXFP4 tiles in tile_q_amd64.s). Their kernels repeat ggml's own
// float operations, so each level equals a ggml build bit for bit: the Go ones
// (level Generic) ggml's generic C vec_dot, the AVX2 ones (which the AVX512
// level runs too) ggml's AVX2 vec_dot lane for lane (VPSHUFB table lookups for
// the IQ4 and FP4 nibbles with the sign trick; VPMADDUBSW of the unsigned low
// bits weighted by the sub-block scales in VPMADDWD for the K types; one fused
// multiply-add per block pair or super-block into eight float lanes, the same
// reduction; the odd last block of an MXFP4/IQ4_NL row as ggml's contracted
// scalar sumf += d·sumi). At AVX512, eight-token tiles: IQ4_XS, Q3_K and Q2_K
// on the K-quant tile data (two tokens per register against the weight sub-
// block unpacked once and held twice; signed weights with VPABSB and
// activations negated under a VPMOVB2M mask, then VPMADDUBSW and VPDPWSSD with
// the scale), IQ4_NL and MXFP4 on the Q8_0 block-pair data (the Q4_0 tile with
// a table lookup; even block counts); and many-row matrix-vector kernels for
// IQ4_XS, Q3_K and Q2_K (two rows per register, as the Q4_K one). At AVX2,
// eight-token tiles for IQ4_XS, Q3_K and Q2_K on the same tile data
// (tile_avx2_amd64.s: the tokens' int sums in eight ymm registers, float sums
// in the frame, as the Q4_K one). Measured one thread, cpu-ns/op on the busy
// 2-core machine: a 512-token 2048x2048 MatMul (BenchmarkQTiles) takes
// 3.5-4.5x less CPU with the tiles (IQ4_XS 88-91 -> 24 ms, Q3_K 103-109 ->
// 27-28, Q2_K 60-64 -> 17.5, IQ4_NL 121-147 -> 26-31, MXFP4 105-131 -> 33-37),
// at AVX2 (BenchmarkAVX2MatMul) 1.7-2.6x less; decode's products
// (BenchmarkMatVec) 1.6-2.2x less from L2 and 1.2-1.6x from memory.
//
// # Packed Q8_0 panels
//
// (q8pack.go, q8panels.go; q8pack_amd64.s generated by q8pack_gen.go). At
// AVX-512 a Q8_0 matrix packed by PackQ8_0 (16 rows a panel, row r in dword
// lane r of each 64-byte vector, weights XOR 0x80, f16 row scales: as many
// bytes as the rows; PanelRows slices a span's part at a panel boundary) runs
// through q8PanelVNNI, lane = output: per block eight VPDPBUSD.BCST of the
// panel's vectors against a token's four activation bytes broadcast give each
// of 16 rows its exact int32 block dot, then one float32 product and one
// float32 sum per block for 16 rows ("arithmetic A", q8PanelRef: Σ_b
// float32(isum)·float32(dw·da) in block order, unfused), up to eight tokens
// per call (prepareQ8PanelAct: one record per block of the tile's tokens).
// MatMulQ8Panels (any token count: tiles of eight, the last shorter; panels
// over the workers, each against every tile while in cache) and MatVecs with
// MatVec.Panels (one token) agree bit for bit on every (row, token), whatever
// the batch and the threads, but not with VecDot or MatMul of the unpacked
// rows (another rounding of the same sum): a model packs every Q8_0 matrix it
// multiplies or none (model.Load packs them where PanelsUsable). Below AVX-512
// the panels are ignored. Cost: a second copy of the Q8_0 weights in memory
// (the file's pages are no longer read after packing, so the kernel may
// reclaim them). Measured one thread, 512 tokens (go test -run XXX -bench
// 'Q8Panel$' ./internal/engine/kernels/, the helper's medians of 3, cpu-ms):
// 2048x2048 41.5 -> 13.6 prepacked (3.06x), 5632x2048 99.0 -> 35.3 (2.80x),
// 768x768 5.7 -> 2.2; 16 tokens 2.5-3.1x; one token from memory
// (BenchmarkQ8PanelMatVec) 0.91-1.08x of the row-pair Q8_0 matrix-vector
// kernel (both bandwidth-bound).
//
// # Pool
//
//   - Pool methods are safe for concurrent use but Parallel, MatMul and
//     MatVecs on one Pool are serialized; a function passed to Parallel must
//     not call back into the same Pool. No goroutine is started per call; a
//     panic in fn is re-raised in the caller. Close is idempotent.
//   - A round is published in one atomic word (round, chunk count, next
//     chunk); workers claim chunks by compare-and-swap, so a worker reads a
//     round's function only after claiming one of its chunks, and the caller
//     waits only for claimed chunks, never for a helper that has not woken
//     yet. Idle helpers poll for the next round for 50 µs, then park on a
//     channel: the rounds of a decode step follow each other without goroutine
//     wake-ups, and an idle pool uses no CPU. The waiting caller also polls 50
//     µs before it sleeps.
//   - With a CoreLease (Pool.SetCoreLease; internal/engine/cores shares a
//     host's cores between worker processes) a round runs only on cores the
//     lease gives: the caller takes one at round start (Acquire, which may
//     wait), only helpers below Grant()-1 join, each with a core from
//     TryAcquire, and a helper stops claiming chunks when Revoked. A helper
//     that does not join never blocks a round. Without a lease nothing
//     changes.
//
// # Invariants and limits
//
//   - Row lengths are multiples of the weight type's block size (32 or 256);
//     shape errors are programmer errors and panic (the model loader checks
//     shapes against the file).
//   - Weight bytes may be anything (they come from a file): every kernel
//     gives the exact integer block sums for every byte pattern, -128 quants
//     and negative Q6_K scales included. Activation quants must be in
//     [-127, 127], which QuantizeActivation guarantees; the assembly's sign
//     trick (|w| times a·sign(w)) relies on it.
//   - Float sums are taken in float32 in a level-dependent order, so levels
//     agree to about 1e-5 of the sum of |terms|, not bit for bit. Within one
//     level results are deterministic, and MatMul's outputs for a token do
//     not depend on the thread count nor on the other tokens of the batch:
//     the four-token kernels repeat the one-token kernel's float operations
//     exactly (integer lane sums are exact whatever the instructions).
//   - Tensor bytes are read in place as little-endian numbers; big-endian
//     builds are refused at compile time.
//   - MaxThreads = 256 workers per Pool; larger requests are clamped. The Q8_0
//     and Q8_K activation quantizers have AVX2 assembly (used at AVX-512 too),
//     bit for bit equal to the Go references; Q8_1 and BF16 are Go at every
//     level. The BF16 kernels widen to float32 (no VDPBF16PS, even where the
//     CPU has AVX-512 BF16: its pair sums round differently from the row
//     kernels' fused multiply-adds).
package kernels
