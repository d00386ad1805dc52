// Package tensor holds ggml's tensor element types: the type table (block
// sizes and byte sizes, as GGUF files and llama.cpp define them), half and
// bfloat16 conversion, and the row codecs Dequantize and Quantize.
//
// # Place in the data flow
//
// A GGUF file names a Type per tensor; the loader asks this package how many
// bytes a row takes (Type.RowBytes). Dequantize turns a row of any supported
// type into float32 (embedding lookups, reference paths, tests); the compute
// kernels read the same blocks directly, using the layouts and helpers here
// (ScaleMinK4). Quantize produces weights of a given type from float32, as
// llama.cpp's quantize tool would, e.g. to synthesize test models.
//
// # Types
//
// Dequantize: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K,
// Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4 (gpt-oss's experts: an E8M0
// shared exponent per 32 FP4 values), and the activation types Q8_1 and
// Q8_K. Quantize: the same set. The other IQ types and the integer types
// are not supported; both functions say so with an error (CanDequantize,
// CanQuantize tell in advance). KValuesIQ4NL, KValuesMXFP4, E8M0Half,
// ScaleIQ4_XS and ScalesQ3_K expose the tables and scale layouts the
// kernels read.
//
// # Invariants
//
//   - Dequantize is bit-exact with ggml's dequantize_row_* functions: it
//     performs the same float32 operations in the same order (e.g. Q4_K
//     forms d·sc and dmin·m first, then d1·q − m1). Every product that feeds
//     an addition is written float32(a*b), which the Go spec guarantees is
//     rounded on its own, so no compiler may fuse it into an FMA.
//   - Quantize follows what ggml_quantize_chunk runs without an importance
//     matrix (quantize_row_*_ref, and quantize_iq4_nl/quantize_iq4_xs with
//     their 15-candidate scale search) in the same operation order,
//     including the K-quant scale searches (make_qkx2_quants for
//     Q2_K/Q4_K/Q5_K, make_q3_quants for Q3_K, make_qx_quants for Q6_K),
//     nearest_int's round-half-to-even, and for MXFP4 glibc's rounding of
//     log2f near powers of two. On ggml's test vectors every type comes out
//     byte-identical.
//   - Both take whole rows: the element count must be a multiple of the
//     block size and the byte slice exactly RowBytes long; otherwise they
//     return an error and Dequantize writes nothing. Neither allocates.
//
// # Limits
//
// Quantize rejects NaN and infinite inputs for the quantized types, and
// blocks whose f16 scale or minimum would overflow (ggml would store an
// infinite scale; for Q8_K, whose scale is f32, blocks reaching within a
// hair of the float32 limit); the error names the element or block. Dequantize accepts
// any bytes: a NaN or infinite scale in the data decodes to NaN or infinite
// values, as in ggml. Q8_1's cached sum saturates to ±Inf as in ggml.
//
// Speed on one idle core of the 2-core dev VM, 4096-element rows (go test
// -bench .): Quantize Q8_0 about 3 ns per element (1.1e9 weights in a few
// seconds), Q4_K about 75 ns per element (1.1e9 weights in under two
// minutes); Dequantize 0.5 to 2 ns per element. Both are single-threaded;
// callers parallelize over rows.
package tensor
