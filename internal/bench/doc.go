// Package bench measures Tandem's engine: prefill and decode speed of a
// batch of sequences on a model, plain or constrained by a grammar, the
// figures `tandem bench engine` prints; and the machine's streaming read
// bandwidth, which bounds decode (`tandem bench memory`).
//
// # Inputs and outputs
//
// Engine(ctx, *model.Runner, threads, EngineOptions). In: PromptTokens
// (prefilled in one step, as llama.cpp's bench does), GenTokens (decoded
// greedily), KVType, PageTokens, Seed (picks the random prompt ids, skipping
// the usual special ids 0..2, and the draws), Batch (sequences prefilled in
// one step and decoded together, one token each per step; at most MaxBatch =
// 256), Temperature (0: greedy), Grammar (nil: plain; a sequence whose
// document completes starts another, its matcher reset, so a constrained run
// does the same forward work as a plain one). Out: *EngineResult (JSON tags):
// model name, threads, batch, constrained, per-sequence token counts,
// prefill_s, decode_s, prefill_tok_s and decode_tok_s (all sequences' tokens;
// zero when GenTokens is 0), sample_s (time choosing tokens, inside decode_s),
// constraint_s (of it, masks and accepts), vocab_s (the one-time vocabulary
// index, outside decode_s), documents completed, active_weight_bytes (the
// weight bytes one decode step reads, model.ActiveWeights) and
// decode_weight_gb_s (those bytes times decode steps per second).
//
// Memory(ctx, MemoryOptions). In: Bytes (0: 2 GiB; 64 MiB to 64 GiB),
// Threads (0: 1; at most 256), Passes (0: 5; at most 100). Each thread
// sums its contiguous share of one buffer as uint64 words (anonymous memory
// with transparent huge pages advised, as gguf.OpenInMemory holds model
// weights; heap memory where there is no mmap); the buffer
// is written and read once untimed, then each pass is timed by the wall
// clock. Out: *MemoryResult: the bytes read per pass, per-pass rates and
// their median and best in 10^9 bytes/s, and the method in words. ctx is
// checked between passes; options out of range are errors before anything
// is allocated.
//
// # Invariants
//
// The same Seed gives the same prompt. The KV cache is sized for exactly
// prompt + generated tokens. ctx is checked before every decode step.
//
// # Limits
//
// PromptTokens must be positive and GenTokens non-negative; their sum must fit
// the model's context, else an error naming both counts. PageTokens defaults
// to 16. Wall-clock timings (time.Now), so figures vary with the machine and
// the thread count.
//
// # Measured
//
// (2026-12-01, synthesized 110m q8_0, 32k vocabulary, 2 threads on a 2-core
// machine shared with other jobs, so wall-clock figures vary by up to 2x
// between identical runs): tandem bench engine --model /tmp/so-110m.gguf
// --prompt-tokens 16 --gen-tokens 128 --batch B --temperature T --seed 5
// [--json-schema schema.json], a bounded object schema (strings up to 12, an
// integer range, an enum, an array of up to 4 strings, a boolean), two
// interleaved rounds. Decode tok/s best of two, plain / constrained: batch 1
// greedy 88.4 / 93.8, batch 1 T=1 95.3 / 78.0, batch 8 greedy 161.7 / 184.6,
// batch 8 T=1 143.5 / 146.5 (ratios 0.82 to 1.14: noise). The grammar's own
// time (constraint_s) is 0.2 % to 1.0 % of decode_s in every run (8 to 52 ms
// of 1.4 to 9.7 s), and sample_s is lower constrained than plain (the draw
// sees only the allowed tokens), so the constraint costs about 1 % of decode
// speed.
package bench
