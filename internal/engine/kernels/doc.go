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
// # Levels
//
// Every kernel has a portable Go version (level Generic). On amd64 the
// package detects the CPU once (golang.org/x/sys/cpu) and uses hand-written
// Go assembly: level AVX2 (AVX2+FMA+F16C) and level AVX512 (AVX-512
// F/BW/VL/DQ plus AVX512-VNNI). Kernels without assembly at a level use the
// next lower level's. SetLevel forces a level for tests and benchmarks.
//
// Assembly: every weight type's dot (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1 with
// VPDPBUSD at AVX512; Q4_K, Q5_K, Q6_K at AVX2 width on both levels; BF16),
// f32 and f16 dot and axpy (AVX2 and AVX-512) and f16 conversion (F16C).
// For batches, MatMul uses four-token kernels that share the weight
// unpacking between four tokens: Q8_0, Q4_0, Q5_0 (AVX2 sign trick; VNNI
// with activations+128 against the signed weights), Q4_K, Q5_K, Q6_K
// (AVX2 width) and F16 (AVX-512). At AVX512, eight-token kernels over a
// group of rows go first: Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, Q4_K, Q5_K, Q6_K,
// F16 (rows up to 1024 wide) and BF16 (up to 2048), bit for bit the row
// kernels. Otherwise Q4_1, Q5_1, BF16 and F32 batches run one token at a
// time. The activation quantizers
// are Go at every level (a few percent of a matrix-vector product).
//
// MXFP4, IQ4_NL, IQ4_XS, Q2_K and Q3_K (lowbit.go, lowbit_amd64.s) repeat
// ggml's own float operations: the Go kernels those of ggml's generic C
// vec_dot, the AVX2 ones (run at AVX512 too) those of its AVX2 vec_dot,
// lane for lane, so each level returns what a ggml build returns, bit for
// bit. At AVX512 they have eight-token tiles (IQ4_XS, Q3_K, Q2_K on the
// K-quant tile data; IQ4_NL and MXFP4 on the Q8_0 block-pair data, even
// block counts) and IQ4_XS, Q3_K and Q2_K many-row matrix-vector kernels
// for decode; at AVX2 eight-token tiles for IQ4_XS, Q3_K and Q2_K; all bit
// for bit the row kernels.
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
//
// # Tests
//
// Every kernel is checked at every level the CPU has against float64
// references built on test-local dequantizers, which are themselves checked
// bit for bit against ggml's dequantized vectors in the shared
// quant-testvectors.gguf. The tests cover random blocks (all byte values),
// ggml-quantized weights, exact integer results with unit scales, -128
// weights, every row length class, the Q8_0 quantizer against ggml's bytes,
// and MatMul against a naive dequantize-then-multiply with bounds derived
// from the activation quantization error, bit-identical across thread
// counts and between batched and solo tokens. MXFP4, IQ4_NL, IQ4_XS, Q2_K
// and Q3_K are checked the same way against package tensor's committed
// ggml-quant-vectors.gguf, and their dot products against the ones ggml's
// generic, AVX2 and AVX-512 builds returned for the same rows, bit for bit
// at the matching level (no shared data needed).
package kernels
