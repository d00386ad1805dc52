// Package sample picks the next token from a row of logits.
//
// Place in the data flow: the engine's forward pass produces one logits row
// (one float32 per vocabulary entry) per sequence and step; the scheduler hands
// that row and the sequence's token history to the sequence's [Sampler], which
// returns the chosen token id and its log-probability. The API layer turns the
// OpenAI-style request fields into [Params] (checked with [Params.Validate])
// and uses [TopLogprobs] for the "top_logprobs" answer field.
//
// The chain follows llama.cpp's common sampler, in this order:
//
//	penalties (repeat, presence, frequency) → top-k → top-p → min-p → temperature → draw
//
// A temperature of zero or below means greedy decoding: the argmax of the
// penalized logits, ties going to the lowest id (as llama.cpp's greedy and
// temperature-zero samplers do). Top-k, top-p and min-p cannot change the
// argmax, so they are skipped then.
//
// Invariants:
//   - Sample never modifies the logits or the history it is given; it works on
//     scratch buffers owned by the Sampler and reused across calls, so a
//     steady-state call allocates nothing.
//   - The reported log-probability is the log-softmax of the raw logits (before
//     penalties and temperature), which is what OpenAI-style logprobs report.
//   - Same Params (including Seed), same sequence of calls → same tokens. Each
//     Sampler owns its PRNG (math/rand/v2 PCG); nothing reads global state.
//     Call k draws from a generator seeded from (Seed, k) alone, so
//     [Sampler.Skip] lets a resumed sequence continue another's stream.
//   - [Sampler.SampleConstrained] adds a logit bias before the penalties and
//     lets only the tokens of an allow bitset (a grammar mask) take part in
//     the chain; the logprob is still the raw one.
//   - Candidate order is total: higher logit first, then lower id. It decides
//     ties everywhere (top-k cut, top-p cut, greedy) and the draw order.
//   - Non-finite logits never cause a panic: NaN counts as -Inf (impossible),
//     +Inf as the largest float32. A history id outside the vocabulary is
//     ignored by the penalties.
//
// Cost for a vocabulary of n tokens: one pass to copy the logits and compute
// the log-sum-exp for the reported log-probability; top-k selects with a
// size-k heap (O(n log k), no full sort); top-p without top-k heapifies the
// candidates in O(n) and pops only as many as the nucleus needs. Only the
// final draw without any cut-off touches all n tokens again.
//
// Params: Temperature, TopK, TopP, MinP, RepeatPenalty, RepeatLastN (0:
// DefaultRepeatLastN, -1: the whole history), PresencePenalty,
// FrequencyPenalty, Seed; the zero value is greedy with no penalties.
// Validate accepts any finite temperature, any top_k (<= 0 off), top_p in
// [0, 1] (0 or 1 off), min_p in [0, 1], a finite repeat_penalty >= 0,
// repeat_last_n >= -1, and presence and frequency penalties within
// ±MaxPresenceFrequency. SampleConstrained with no allowed token returns
// (-1, -Inf). The log-probability's sum of exponentials uses the kernels'
// vectorized ExpShiftF32 (within 2 ulp of exp, summed in float64), shared
// bit for bit by LogSoftmax.
//
// Limits: a Sampler is not safe for concurrent use (one per sequence).
// Logits rows longer than math.MaxInt32 are not supported (token ids are int32).
package sample
