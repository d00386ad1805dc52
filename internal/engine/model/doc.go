// Package model loads Llama-family transformer weights from a GGUF file and
// runs the batched forward pass over a paged KV cache (and, for hybrid
// models, a recurrent state per sequence).
//
// It sits between the tokenizer and the sampler in the data flow: token ids
// go in, K/V rows are written into the sequence's KV pages, and logits come
// out. Prefill (many tokens of one prompt) and decode (one token each of many
// sequences) are the same call: Runner.Forward takes a batch of sequences,
// each with its new tokens, its start position and its page table, and runs
// every token through the weights as one matrix, so a weight row is read once
// per step however many tokens the step holds.
//
// # Architectures
//
// Architectures lists them; each is read the way llama.cpp's loader for it
// reads it (llama.cpp 80fb11a, the version node-llama-cpp 3.21.1 bundles):
//
//   - llama: RoPE on adjacent pairs, grouped-query attention, SwiGLU, tied or
//     separate output, optional biases; Llama 3.x's "llama3" RoPE scaling
//     through the rope_freqs tensor (its converter writes no scaling type).
//     Like llama.cpp, it ignores llama.attention.sliding_window (Mistral-style
//     files run with full attention).
//   - qwen2: half-split ("neox") RoPE, required Q/K/V biases. qwen3: neox
//     RoPE, per-head RMS norms of Q and K before RoPE, no biases,
//     output.weight optional (tied to token_embd).
//   - phi3: fused attn_qkv and ffn_up (gate then up halves), Q scaled by
//     1/√head_dim before attention, LongRoPE: rope_factors_long when the
//     context exceeds rope.scaling.original_context_length, else
//     rope_factors_short, and cos/sin multiplied by rope.scaling.attn_factor.
//     Its sliding window is ignored, as llama.cpp does.
//   - gemma2: embeddings × √dim, GELU-tanh gate (through ggml's half-precision
//     table), post-attention and post-FFN RMS norms, Q scaled by 1/√head_dim
//     (1/√(dim/heads) for the 46-layer 27B, as llama.cpp picks it), attention
//     and final logit soft-capping (defaults 50 and 30), output always
//     token_embd, sliding-window attention (default 4096) on the even layers
//     (pattern 2). gemma3: the same without soft-caps (final cap optional),
//     with Q/K norms, and, when sliding_window is set, 5 local layers of each
//     6 (sliding_window_pattern) with RoPE base rope.freq_base_swa (default
//     10000) and scale 1, the global ones with rope.freq_base and the file's
//     scaling.
//   - qwen3moe: qwen3's attention; every feed-forward block a mixture of
//     experts (moe.go): an F32 router ffn_gate_inp, softmax over expert_count
//     experts, the expert_used_count most probable run their SwiGLU
//     (ffn_{gate,up,down}_exps, 3-D tensors, width expert_feed_forward_length,
//     else FF/used), weights renormalized over the chosen (sum clamped at
//     2^-14). qwen2moe: qwen2's attention, the same experts without
//     renormalization, plus a shared expert (ffn_*_shexp, width
//     expert_shared_feed_forward_length) weighted by
//     sigmoid(ffn_gate_inp_shexp·x). Sigmoid gating is there for the
//     families to come. Decode reads
//     only the chosen experts' rows: one pool round for the router, one for
//     every chosen expert's gate and up, one for their down products
//     (kernels.MatVec.X: each its own input), the threads splitting the rows
//     of all of them. A multi-token step groups its tokens by expert, so each
//     chosen expert's weights stream once per step, and runs each expert's
//     products as a batch (MatMul, split by row). A token's expert outputs are
//     added in ascending expert order in both paths, so its logits do not
//     depend on the step it runs in (TestMoEPrefillEqualsDecode). Expert
//     matrices are not packed into panels.
//   - gemma4 (gemma4.go, which describes it whole): sliding-window and full
//     layers each with their own head dimension (key_length_swa /
//     key_length), KV head count (head_count_kv as a per-layer array), RoPE
//     base and rotated dimensions; the full layers rotate through rope_freqs
//     (huge factors leave a head's unrotated part alone: partial rotation);
//     Q/K norms with weights, V's without; attention scale 1; the last
//     shared_kv_layers layers read the K/V of the last earlier layer of
//     their kind; per-layer embeddings (embedding_length_per_layer_input);
//     the 26B-A4B's dense feed-forward beside GeGLU experts routed by the
//     normalized residual; final soft-cap (default 30); layer_output_scale.
//     Its KV cache has only the K/V-keeping layers, each row as wide as the
//     widest layer's (Model.CacheConfig), so the disaggregated path ships it
//     unchanged. Its forward step is its own (Runner.gemma4Layer); attention
//     is the shared code with a per-layer shape.
//   - qwen35, qwen35moe (Qwen3.5/3.6; gdn.go): hybrids of Gated DeltaNet
//     layers and gated full-attention layers; of every
//     {arch}.full_attention_interval layers (default 4) the last is full
//     attention (Config.Recurrent marks the others). A DeltaNet layer keeps
//     no KV: attn_qkv gives Q, K, V channels ((2·ssm.group_count +
//     ssm.time_step_rank)·ssm.state_size), a causal depthwise convolution
//     of ssm.conv_kernel taps and silu run over them, Q and K are
//     l2-normalized per head, and the delta rule updates a state_size²
//     matrix per value head (value head h reads key head h mod group_count,
//     as llama.cpp's fused op): S ← e^g·S, S += k⊗(v − Sᵀk)·β, o = Sᵀq/√d,
//     with β = sigmoid(ssm_beta·x) and g = softplus(ssm_alpha·x +
//     ssm_dt)·ssm_a; the output is rmsnorm(o)·ssm_norm·silu(attn_gate·x)
//     through ssm_out. The full-attention layers' attn_q holds per head the
//     query and a gate, the attention output is multiplied by
//     sigmoid(gate); Q/K norms; neox rotation of rope.dimension_count
//     dimensions (partial); rope.dimension_sections is read as llama.cpp's
//     interleaved multi-axis RoPE with every text axis at the token's
//     position but the fourth, at 0 (the pairs it owns do not rotate).
//     post_attention_norm is the feed-forward's input norm. qwen35moe's
//     feed-forward is qwen3moe's experts (softmax, renormalized) plus
//     qwen2moe's sigmoid-gated shared expert. The last
//     {arch}.nextn_predict_layers blocks (multi-token prediction, which
//     Qwen3.5's converter exports by default) are loaded past and not run,
//     as llama.cpp's main pass does (Config.NextN). Refused: a per-layer
//     attention.recurrent_layers array, value heads of another length than
//     the key heads'.
//   - gpt-oss (gptoss.go): Q/K/V projections with biases, NEOX RoPE with
//     YaRN scaling, attention with a learned sink logit per query head
//     (attn_sinks: it joins the softmax's denominator, as ggml's soft_max
//     with sinks computes it) and scores scaled by 1/√head_dim, the output
//     projection plus attn_output.bias, then post_attention_norm (its
//     pre-FFN norm) and a mixture of experts: router ffn_gate_inp plus its
//     bias, the expert_used_count experts of highest logit, their weights a
//     softmax over their logits alone; each expert's gate and up plus its
//     bias rows (ffn_{gate,up}_exps.bias), the clamped activation
//     x·sigmoid(1.702x)·(y+1) with x = min(gate, 7), y = clamp(up, ±7)
//     (ActSwiGLUOAI), down plus its bias row. The even layers (period
//     sliding_window_pattern, default 2) attend within the required
//     attention.sliding_window, with RoPE base rope.freq_base_swa (default
//     freq_base) and the file's scaling; expert_feed_forward_length and
//     output.weight are required (never tied). A decode step reads the
//     chosen experts' rows only, as for qwen3moe.
//
// RoPE scaling types: none, linear (the default when a factor has no type),
// longrope, yarn. YaRN is computed as ggml's rope_yarn with llama.cpp's
// context defaults (ext_factor 1, beta_fast 32, beta_slow 1, correction
// dimensions from rope.scaling.original_context_length): pair i's angle
// mixes the interpolated and extrapolated ones by a ramp between the
// correction dimensions, and cos/sin carry the magnitude
// yarn_attn_factor·(1+0.1·ln(1/scale)), where yarn_attn_factor cancels
// llama.cpp's own 1+0.1·ln(factor) and keeps rope.scaling.attn_factor.
//
// Embedding models: the BERT-family encoders (EncoderArchitectures: "nomic-
// bert", fused QKV with NEOX RoPE and SwiGLU; "bert", absolute position and
// token-type embeddings, Q/K/V biases and GELU) load with LoadEncoder (or
// LoadEncoderInMemory, the file read into memory as LoadInMemory's) and run
// bidirectional attention over each input with no KV cache
// (EncoderRunner.Embed), pooled as {arch}.pooling_type says (PoolRows: mean,
// cls, last). A decoder file with a pooling type (a qwen3 as Qwen3-Embedding)
// runs its usual causal pass; ForwardHidden returns the hidden states after
// the output norm instead of logits.
//
// # API
//
// Load(path) / LoadInMemory(path) (the file read into memory with huge
// pages advised, not mapped: the same results, faster decode where TLB
// misses are dear, a private copy) / FromFile(*gguf.File) give an
// immutable *Model (Config,
// Tokenizer, weights); where the CPU runs the AVX-512 panel kernel
// (kernels.PanelsUsable), FromFile also packs every Q8_0 matrix the forward
// pass multiplies (Linear.Panels; Q|K|V and gate|up spans share their panels;
// the embedding table keeps its rows for lookups), so each product of them,
// prefill or decode, one token or many, rounds alike (kernels' "arithmetic
// A"), at the price of a second copy of those weights in memory.
// ConfigFromMetadata reads the {arch}.* keys. NewRunner(m, *kernels.Pool) and
// Runner.Forward(kv, []Seq): each Seq has new Tokens, its start Pos, its Pages
// table and AllLogits. Out: per sequence, Vocab logits of the last token, or
// len(Tokens)*Vocab with AllLogits; the slices alias the runner's scratch
// until the next call. Model.CacheConfig gives the matching kvcache.Config.
//
// Recurrent state (hybrid models): Model.StateSize() float32s per sequence,
// laid out as Model.StateLayout() names it (a "gdn1:..." string that lists
// the recurrent layers, the convolution and head sizes and the element
// order; two processes exchange a state only when their layouts are equal
// strings). The caller owns the slot: Seq.State, zeroed for a sequence at
// Pos 0, holds on entry the state after Pos positions and on return the
// state after Pos+len(Tokens); Forward rejects a slot of another size. The
// KV cache holds only the full-attention layers, the KV layers
// (Config.KVLayers; CacheConfig's Layers), numbered 0..KVLayers-1 in model
// order: the cache's layer l, the layer hook's l and KVSink.LayerComputed's
// layer are KV-layer indices. A recurrent layer's state is its
// convolution state ((conv_kernel-1) rows of its channels, oldest first)
// then its matrices (per value head, row j holding S[·][j]), the recurrent
// layers in order.
//
// # Invariants
//
//   - Prefill and decode are the same call: every token of the step runs
//     through the weights as one matrix, so a weight row is read once per step
//     however many tokens it holds. A one-token step runs Q/K/V and gate/up
//     each as one pool round (kernels.Pool.MatVecs) and its norms and SwiGLU
//     on the caller: five threaded rounds per layer (Q/K/V, attention, O,
//     gate/up, down) and one for the output, and no allocation besides the
//     result slice and attention's job closure
//     (TestDecodeStepRoundsAndAllocs). A multi-token step (prefill) does no
//     pass over all its tokens on the calling goroutine: embeddings and RoPE
//     tables, each block's residual add (folded into the next RMS norm's
//     round, or into output for the rows that need logits after the last
//     layer), biases, Q/K norms, RoPE and the K/V cache writes (one round,
//     prepRange) and the gated activation all run token by token inside pool
//     rounds. Where the file stores Q, K, V (and gate, up) back to back with
//     one type (llama.cpp's converter usually writes Q, K, V in that order;
//     synth writes both groups so), spanOf views them as one matrix read in
//     place, so the step runs one product each: 13 rounds per layer (norm,
//     Q|K|V staging and rows, RoPE/cache, attention, O ×2, norm, gate|up ×2,
//     activation, down ×2) where it ran 18, and the shared input is quantized
//     once (TestSpansBitIdentical: the same bits as separate products).
//   - Weights stay in their file types (F32, F16, BF16, Q8_0, Q4_0, Q4_1,
//     Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4), read
//     in place from the mapped file. Load checks every needed tensor's
//     presence, shape and type.
//   - The arithmetic follows llama.cpp's CPU backend where it changes results:
//     activations are quantized to each weight's dot type before a matmul;
//     with an F16 KV cache the query and attention weights are rounded to half
//     precision before they meet the cached keys and values.
//   - Attention (attention.go) has two forms that give the same bits: by tiles
//     where the kernels have block assembly (AVX-512; AVX2 for the value
//     sums), for every sequence whose tiles hold four query rows (prefill
//     chunks; decode with grouped-query attention): for one KV head, its query
//     heads at up to 16/group positions meet each page's keys and values at
//     once, every loaded row serving the whole tile; and query by query
//     otherwise. The tile jobs go to the pool head by head, each head's tiles
//     in pairs of a late (long, under the causal mask) and an early (short)
//     one, so every chunk the pool hands out costs about the same (pairOrder;
//     the per-query form pairs each head's tokens so). A token's output is the
//     same in a prefill chunk, a decode step or a recompute after preemption
//     (TestAttentionTiledMatchesRows, TestAttentionPathsBitIdentical).
//     attnPages is the one place that says which page table a layer reads.
//   - Load refuses a file holding a tensor its architecture does not use
//     (TestUnusedTensorRefused), as llama.cpp does, rather than run it without
//     that weight. Optional tensors llama.cpp reads are read: Q/K/V and fused-
//     QKV biases, output.weight, rope_freqs / Phi-3's factors.
//   - Forward rejects a cache of the wrong shape, negative positions, page
//     tables too short or with unallocated pages, and token ids out of range,
//     with an error naming the sequence.
//   - Sliding-window layers (Config.Window(l)): a token at position p attends
//     to p-window+1..p. Masking is in attention, the one place every step
//     (prefill chunk, decode, prefix-cache hit) reaches, so it holds on all of
//     them. When every layer is windowed (Config.AllWindowed),
//     Model.FirstNeededPos(pos) is the earliest position a step starting at
//     pos reads; a caller may release the pages wholly before it, and Forward
//     accepts any value (-1) in those page-table slots
//     (TestAllWindowedReleasesPages, with the released pages poisoned). The
//     engine does not release them yet: the page tables, prefix cache and PD
//     transfer keep whole sequences.
//   - A DeltaNet layer runs its projections for all the step's tokens as
//     matrix products, then the convolution in one pool round split by
//     channel and the delta rule split by (sequence, value head), each
//     worker running its sequence's tokens in order, four vector passes per
//     state row and token (kernels.AxpyF32, DotF32). A token's arithmetic
//     does not depend on the step it runs in, so a prompt run whole, in
//     chunks of any sizes or token by token gives the same logits and the
//     same state, bit for bit (TestHybridChunksEqualWhole), and sequences
//     sharing a step get what they get alone (TestHybridBatchEqualsAlone).
//   - A Model is safe for concurrent use by many Runners and keeps the file
//     mapped until Close; a Runner is not safe for concurrent use.
//
// # Limits
//
// Against hostile files (config.go): dimMax = 1 << 16 (feed-forward up to 8×
// that), layersMax = 1024, headsMax = 1024, vocabMax = 1 << 21, contextMax = 1
// << 22. The head dimension must be even; heads a multiple of KV heads; key
// and value lengths equal. Other architectures are refused with one error,
// UnsupportedArchError ("model architecture X is not supported (supported:
// ...)"), which every command (generate, serve, bench engine, model info)
// shows as it is.
package model
