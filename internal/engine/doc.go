// Package engine is the serving worker's continuous-batching scheduler: it
// owns the model runner, the paged KV cache and the prefix cache, and runs
// one step loop that advances every admitted sequence.
//
// # Data flow
//
// Submit queues a tokenized Request and returns a Handle. The step loop
// admits waiting requests while pages allow, builds each step from at most
// MaxBatchTokens tokens (one decode token per running sequence first, then
// prompt chunks: chunked prefill), runs them through model.Runner.Forward
// as one batch, samples, and delivers tokens to the Handles. Prompt chunks
// go shortest remaining first with aging, several prompts per step (see
// sched.go); with Config.ITLTarget a step that carries decodes gets only
// the prefill a measured step-cost model says fits the target (cost.go);
// with Config.DecodePace the decoding sequences get a step a pace apart,
// prompt work running in steps of its own in between and the loop idle
// otherwise (loop.go).
//
// Every sequence is the same object in every phase: tokens (prompt, then
// generated) and computed, the count of tokens whose K/V are in its pages.
// A step feeds tokens[computed:] (at most a chunk); logits are needed when
// the step reaches the last token. Prefill, decode and recompute after
// preemption are therefore one code path.
//
// # Resources
//
// Pages are taken at admission for the prompt and one at a time as a
// sequence grows; when none are free the prefix cache evicts, and if that
// is not enough the most recently admitted running sequence is preempted:
// its pages are released and it goes back to the front of the queue to be
// recomputed (Update.Preempted counts it). Admission keeps one free page in
// reserve per running sequence. Every exit path (end, cancel, error, Close)
// releases the sequence's pages in the same step; tests compare the free
// page count with its initial value after each scenario.
//
// # Constraints
//
// A Request may carry a Grammar (constrained decoding), a LogitBias and a
// MinTokens. Only sequences with one of them take the constrained path
// (constrain.go): the grammar's token mask, minus end and stop tokens
// while fewer than MinTokens are out, goes to sample.SampleConstrained
// with the bias, and the chosen token is fed to the sequence's
// grammar.Matcher; the sequence finishes with FinishStop once the document
// is complete and nothing may follow. Plain sequences in the same batch pay
// nothing. A resumed import replays its first token into the matcher and
// skips one sampler draw, so disaggregated output equals colocated.
//
// Token masks are computed off the step's critical path, by mask workers,
// beside the forward pass (maskpool.go): a sequence whose mask is late
// keeps its step's logits and sits out steps until the mask is ready; none
// other waits. A mask past Config.MaskBudget, or a sequence's masks past
// Config.RequestMaskBudget, end it with FinishGrammarBudget; a grammar
// whose first masks cost more work than Config.GrammarCost is refused at
// Submit (ErrGrammarTooCostly).
//
// # Concurrency
//
// Submit, Handle methods, Stats and Close are safe for concurrent use. The
// step loop is one goroutine, started by New and stopped by Close, and is
// the only user of the runner and caches. A cancelled context or
// Handle.Cancel wakes the loop, which ends the sequence and frees its pages
// within one step.
package engine
