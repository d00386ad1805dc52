// Package model loads Llama-family transformer weights from a GGUF file and
// runs the batched forward pass over a paged KV cache.
//
// It sits between the tokenizer and the sampler in the data flow: token ids
// go in, K/V rows are written into the sequence's KV pages, and logits come
// out. Prefill (many tokens of one prompt) and decode (one token each of many
// sequences) are the same call: Runner.Forward takes a batch of sequences,
// each with its new tokens, its start position and its page table, and runs
// every token through the weights as one matrix, so a weight row is read once
// per step however many tokens the step holds.
//
// Supported architectures (Architectures): "llama" (RoPE on adjacent pairs,
// optional rope_freqs as Llama 3.x files carry, grouped-query attention,
// SwiGLU, tied or separate output), "qwen2" (biases on Q, K and V and
// half-split RoPE), "qwen3" (per-head Q/K norms), "phi3" (fused QKV and
// gate/up, LongRoPE factors), "gemma2" (GELU, embedding scale, post norms,
// soft-capping, alternating sliding-window layers) and "gemma3" (Q/K norms,
// 5:1 local/global layers with their own RoPE bases), and the mixtures of
// experts "qwen3moe" (qwen3 attention; every feed-forward block a router
// over ExpertsUsed of Experts SwiGLU experts, softmax gating renormalized
// over the chosen) and "qwen2moe" (qwen2 attention; softmax gating without
// renormalization, plus a sigmoid-gated shared expert); see moe.go. Each is read as
// llama.cpp's loader for it reads it; see README.md for the details.
// Embedding models: the BERT-family encoders (EncoderArchitectures:
// "nomic-bert", fused QKV with NEOX RoPE and SwiGLU; "bert", absolute
// position and token-type embeddings, Q/K/V biases and GELU) load with
// LoadEncoder and run bidirectional attention over each input with no KV
// cache (EncoderRunner.Embed), pooled as {arch}.pooling_type says
// (PoolRows: mean, cls, last). A decoder file with a pooling type (a qwen3
// as Qwen3-Embedding) runs its usual causal pass; ForwardHidden returns
// the hidden states after the output norm instead of logits.
// Weights stay in their file types (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4) and are read in
// place from the mapped file.
//
// The arithmetic follows llama.cpp's CPU backend where it changes results:
// activations are quantized to each weight's dot type before a matmul, and
// with an F16 KV cache the query and the attention weights are rounded to
// half precision before they meet the cached keys and values. Tests compare
// logits and greedy outputs with llama.cpp's on real models.
package model
