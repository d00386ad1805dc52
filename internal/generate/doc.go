// Package generate runs one prompt to completion on a model: tokenize,
// prefill in chunks through the paged KV cache, then decode token by token
// with a sampler, streaming text as it becomes valid UTF-8.
//
// It is the single-sequence path behind `tandem generate`, and the
// reference the serving scheduler's batched output is compared against. It owns no goroutines; cancellation is through ctx,
// checked between steps.
//
// # Inputs and outputs
//
// Run(ctx, *model.Runner, *kvcache.Cache, prompt string, Options); RunIDs
// takes already tokenized ids. Options: MaxTokens (<= 0: until EOS or the
// context is full), Sample, StopTokens (extra ids that end generation),
// ChunkSize (prompt tokens per prefill step, default 512), AddSpecial (BOS/EOS
// as the vocabulary says), OnText (called with each newly completed piece of
// text). Out: *Result with PromptIDs, IDs (the stop token included when one
// ended it), Text, FinishReason ("stop" or "length").
//
// # Invariants
//
//   - The pages for prompt + the most new tokens are allocated up front and
//     released before returning, whatever the outcome.
//   - End-of-generation tokens (IsEOG) and StopTokens end with "stop"; their
//     text is not emitted.
//   - ctx is checked between steps; a cancelled run returns an error wrapping
//     ctx.Err().
//   - With the same options and seed, the output is the same (sampling is
//     seeded through sample.Params).
//
// # Limits
//
// The usable context is the smaller of the model's context and the cache's
// pages × page tokens; a prompt that does not fit it, an empty prompt, or
// invalid sampling parameters are errors.
package generate
