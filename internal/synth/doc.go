// Package synth writes random-weight models as GGUF files: llama by default,
// and qwen2, qwen3, phi3, gemma2, gemma3, gemma4, the mixtures of experts
// qwen3moe, qwen2moe and gpt-oss, and the hybrids qwen35 and qwen35moe
// (Config.Arch) with the tensors and keys llama.cpp's
// loader for each expects (see Architectures below and moe.go), and the
// embedding encoders nomic-bert and bert (EncoderArchs, WriteEncoder, with a
// synthesized WordPiece vocabulary; Config.Pooling makes any of them an
// embedding model). A MoE file's router (ffn_gate_inp) is F32 whatever the
// file type, as llama-quantize leaves it; its expert tensors are typed as
// the dense feed-forward matrices of the same layer would be (so mxfp4 gives
// MXFP4 experts, llama.cpp's MXFP4_MOE); llama-quantize's extra bumps for
// 8-expert models are not applied.
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
//     general.file_type (0 F32, 1 F16, 2 Q4_0, 3 Q4_1, 7 Q8_0, 8 Q5_0,
//     9 Q5_1, 10 Q2_K, 12 Q3_K_M, 15 Q4_K_M, 25 IQ4_NL, 30 IQ4_XS,
//     38 MXFP4_MOE) and
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
// Weight types (Options.Type, named as ParseFileType says): with F32, F16,
// Q8_0, Q4_0, Q4_1, Q5_0 or Q5_1 every matrix has that type. Q4_K, Q3_K,
// Q2_K, IQ4_XS and IQ4_NL are llama.cpp's Q4_K_M, Q3_K_M, Q2_K, IQ4_XS and
// IQ4_NL mixes, each matrix typed as llama_model_quantize types it (see
// matrixType; e.g. Q4_K_M: output Q6_K, attn_v and ffn_down Q6_K on the
// "use_more_bits" layers, Q4_K elsewhere, token_embd included). MXFP4 puts
// MXFP4 on the feed-forward matrices and Q8_0 elsewhere (llama.cpp's
// MXFP4_MOE would leave a dense model without MXFP4). Options.Pure gives
// every matrix the file's type.
//
// Invariants: the bytes depend only on Options. Weights have mean about 0
// and standard deviation 0.02 and come from math/rand/v2 PCG streams keyed
// by (Seed, tensor index, chunk index), so the output does not depend on the
// number of worker goroutines. Weights of every type but Q4_K and Q6_K are
// uniform floats passed through tensor.Quantize (ggml's quantizers). Q4_K and
// Q6_K weights are drawn directly as blocks (random quants, varied
// sub-block scales; see kblocks.go), because ggml's K-quant scale search
// costs 40-75 ns per weight and would make the 1b preset take minutes; on
// this 2-core machine the 1b preset takes about 5 s in Q4_K, 7-13 s in Q8_0.
// Tensors are streamed through gguf.Writer.AddTensorFunc in chunks of about
// 64K weights, so memory stays at a few chunks per worker whatever the model.
//
// Limits (config.go): Dim and FF must be multiples of the block size of
// every type the file mixes (32 for Q8_0, MXFP4 and a pure IQ4_NL file, 256
// for the K-quant mixes and IQ4_XS; llama.cpp's fallbacks for other widths
// are not written); Dim a multiple of Heads with an even head dimension;
// Heads a multiple of KVHeads; DimMax, LayersMax and ContextMax bound the
// shape; the synthesized vocabulary has VocabMin..VocabMax tokens.
//
// # Architectures
//
// Config.Arch (tandem model synth --arch). Keys go under the arch's prefix and
// tensors are laid out as llama.cpp's loader for it expects: qwen3 adds
// attn_q_norm/attn_k_norm; phi3 has a fused attn_qkv and an ffn_up of 2·FF
// rows (no ffn_gate); gemma2 and gemma3 add post_attention_norm and
// post_ffw_norm (gemma3 the Q/K norms too), and gemma2 never has
// output.weight. qwen2 adds Q/K/V biases (uniform ±0.5). qwen3moe is qwen3
// with every feed-forward block a mixture of experts (Experts, ExpertsUsed,
// ExpertFF; --experts, --experts-used, --expert-ff; defaults 8, 2, FF/2): an
// F32 router ffn_gate_inp and 3-D ffn_{gate,up,down}_exps; qwen2moe is qwen2
// with the same experts plus a shared expert (SharedFF, --shared-ff) gated by
// ffn_gate_inp_shexp; gpt-oss (gptoss.go) is a mixture of experts with
// Q/K/V/O biases, attention sinks, router and expert biases, YaRN scaling
// (factor 32) and a window (default 128) on its even layers, 4 of 8 experts
// used by default, output.weight always present. Beyond llama, norm weights are 1 ± 0.25 noise (so a norm
// applied with the wrong weights shows). Options: Llama3Rope (--llama3-rope:
// rope_freqs with Llama 3.1's factors, computed as llama.cpp's converter
// does), Tied (--tied), SlidingWindow/SlidingWindowPattern,
// AttnSoftcap/FinalSoftcap, RopeOrigContext (phi3 LongRoPE: long and short
// factor tensors, original context, attention factor), KeyLength (--head-dim:
// head dimension other than dim/heads), and AttnGain (--attn-gain: multiplies
// attn_norm, scaling attention scores by its square; random weights otherwise
// give near-uniform attention that ignores positions, so RoPE and window tests
// set it). The default llama file is byte-identical to what it was before
// architectures came.
//
// gemma4 (gemma4.go describes the layout) has sliding-window and full
// layers of different head dimensions and KV head counts, full layers
// rotating a quarter of their heads (rope_freqs), optional shared-KV layers,
// per-layer embeddings and the 26B-A4B's experts beside the dense
// feed-forward; its presets are g4e (E2B-like, scaled tiny) and g4a4b
// (26B-A4B-like, scaled tiny). Its output_norm, Q/K norms and router input
// scale are scaled (x8, x0.35, x256) so that greedy runs of random weights
// are not decided by near ties, soft attention or near-equal experts; its
// post-norms have gain 0.005, its layer_output_scale is 0.95-0.99 and,
// unless Pure, its output matrix is F16 beside quantized layers, so that
// each layer corrects the residual rather than rewriting it and rounding
// differences do not grow to the near-tie bound (gemma4.go's Conditioning
// comment has the measurements).
//
// qwen35 and qwen35moe (qwen35.go) are hybrids: of every FullAttnInterval
// layers (--full-attention-interval; default 4, or the layer count when
// fewer, so tiny's two layers are one of each) the last is a gated full
// attention (attn_q of 2·heads·head_dim rows, per head query then gate;
// Q/K norms; RopeDims rotated, --rope-dims, default a quarter of the
// head, written with rope.dimension_sections) and the others Gated
// DeltaNet layers (attn_qkv, attn_gate, ssm_conv1d, ssm_dt, ssm_a,
// ssm_beta, ssm_alpha, ssm_norm, ssm_out; SSMConv, SSMHeadDim, SSMKHeads,
// SSMVHeads: --ssm-conv, --ssm-head-dim, --ssm-k-heads, --ssm-v-heads,
// defaults 4, the head dimension, the KV heads and the heads); every layer
// has attn_norm and post_attention_norm, the feed-forward's input norm.
// qwen35moe has qwen2moe's experts with a shared expert. NextN (--nextn)
// appends multi-token-prediction blocks after every other tensor.
//
// A write goes through a temporary file, so a failed write leaves no partial
// model; the presets are tiny (256 wide, 2 layers, 4 heads / 2 KV heads, a
// 512-token vocabulary), 110m (stories110M's shape), 1b (TinyLlama 1.1B's) and
// a3b (a qwen3moe with Qwen3-30B-A3B's block, 64 experts of which 8 used and
// 12 layers: 0.75B active parameters of 3.9B, 2.2 GB as q4_k_m; the speed
// fixture for MoE) and q35-2b (a qwen35 of Qwen3.5-2B's shape with a
// 32000-token vocabulary, 1.5B parameters, 0.9 GB as q4_k_m; the speed
// fixture for hybrids).
package synth
