// Package synth writes random-weight Llama models as GGUF files.
//
// Place in the data flow: `tandem model synth` calls Write to make fixtures
// of real model shapes (tiny, stories110M, TinyLlama 1.1B) without
// downloading weights; the engine, its benchmarks and llama.cpp (through
// node-llama-cpp) then load the same file, so Tandem's speed and outputs can
// be compared with llama.cpp's on identical inputs. The output is
// gibberish but deterministic.
//
// What a file holds:
//   - GGUF v3, general.architecture "llama", every llama.* hyperparameter key
//     llama.cpp reads (context, embedding, blocks, feed-forward, heads, KV
//     heads, RMS epsilon, rope dimension count and base), general.name,
//     general.file_type (0 F32, 1 F16, 7 Q8_0, 15 Q4_K_M) and
//     general.quantization_version 2.
//   - A tokenizer: either every tokenizer.* key copied from another GGUF
//     (Options.VocabFrom; its token count is the vocabulary size), or a
//     synthesized SentencePiece vocabulary (tokenizer.ggml.model "llama"):
//     <unk>=0, <s>=1, </s>=2, the 256 byte tokens <0x00>..<0xFF>, then "▁",
//     single characters, common English words with the prefixes merges pass
//     through, suffixes and letter n-grams, with descending scores. BOS 1,
//     EOS 2, add_bos true.
//   - Tensors named and shaped as llama.cpp's llama architecture expects
//     (ne0 first): token_embd [dim, vocab], per block attn_norm, attn_q
//     [dim, dim], attn_k and attn_v [dim, kv_heads·head_dim], attn_output
//     [dim, dim], ffn_norm, ffn_gate and ffn_up [dim, ff], ffn_down [ff, dim],
//     then output_norm and output [dim, vocab]. Norms are F32 ones.
//
// Weight types: with F32, F16 or Q8_0 every matrix has that type. Q4_K
// mimics llama.cpp's Q4_K_M mix: output is Q6_K, attn_v and ffn_down are Q6_K
// on the "use_more_bits" layers (first eighth, last eighth, every third
// layer in between) and Q4_K elsewhere, like every other matrix, token_embd
// included.
//
// Invariants: the bytes depend only on Options. Weights are uniform with
// standard deviation 0.02, drawn from math/rand/v2 PCG streams keyed by
// (Seed, tensor index, chunk index), so the output does not depend on the
// number of worker goroutines; they pass through tensor.Quantize, so blocks
// are what ggml's reference quantizer would make of those floats. Tensors
// are streamed through gguf.Writer.AddTensorFunc in chunks of about 64K
// weights, so memory stays at a few chunks per worker whatever the model.
//
// Limits: Dim and FF must be multiples of the weight type's block size (32
// for Q8_0, 256 for Q4_K); Dim a multiple of Heads with an even head
// dimension; Heads a multiple of KVHeads; the synthesized vocabulary has
// VocabMin..VocabMax tokens. See the *Max constants for the other bounds.
//
// Tested by: the tiny preset in every type read back with gguf.Open (keys,
// tensor names, shapes, types, norms of one, weight statistics after
// dequantization), byte-identical output for the same seed and for 1 or 4
// workers, a different file for another seed, tokenizer keys copied from
// stories260K.gguf, vocabulary structure, and Config validation errors.
// That llama.cpp loads the files was checked by hand (see the commit log),
// not in tests.
package synth
