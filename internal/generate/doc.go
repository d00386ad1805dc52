// Package generate runs one prompt to completion on a model: tokenize,
// prefill in chunks through the paged KV cache, then decode token by token
// with a sampler, streaming text as it becomes valid UTF-8.
//
// It is the single-sequence path behind `tandem generate`, and the
// reference the serving scheduler's batched output is compared against. It owns no goroutines; cancellation is through ctx,
// checked between steps.
package generate
