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
// # Disaggregated serving
//
// The prefill role sets Request.KVSink: it receives each layer's prompt K/V as
// it is computed (KVSink.LayerComputed gets the table of the layer's group)
// and may take references on the pages, on the loop, giving each back from any
// goroutine with ReleasePage, which the loop applies before its next step. The
// decode role sets Request.Import: Import.Allocated gets the sequence's
// kvcache.Tables (one page table per layer group), the owner writes the
// prompt's K/V into those pages itself and then calls Handle.Resume with the
// first token. An importing sequence is never scheduled or preempted before
// Resume. Config.KVMemory puts the KV cache in memory the caller provides
// (kvcache.NewIn): a prefill worker's shared-memory source region, which
// decode workers on the host copy pages out of. Stats().PrefillQueueTokens is
// the uncomputed prompt tokens of every admitted and waiting sequence (imports
// count nothing); prefill workers report it so the router can pick the least-
// loaded one.
//
// # Recurrent state
//
// A hybrid model (model.Config.State; qwen35's Gated DeltaNet layers) keeps,
// besides the pages of its full-attention layers, a fixed-size state per
// sequence that every token rewrites. The engine keeps Config.StateSlots slots
// of Model.StateSize() float32s beside the page tables (state.go): a sequence
// takes one at admission (none free: it waits in the queue, as for pages),
// zeroed or filled from a prefix-cache snapshot, passes it to every forward
// step (model.Seq.State) and gives it back on every end (finish, cancel,
// error, Close) and on preemption. Preemption is by recompute: the slot is
// freed with the pages and the sequence restarts from its tokens, as a
// stateless one does (keeping the state would need the slot held while the
// sequence waits, and pages to match it). A slot belongs to one sequence;
// snapshots and exported states are copies, made on the loop between steps,
// so nothing reads a slot that a step is writing. Stats counts
// StateSlotsUsed/StateSlotsTot and StateSlotBytes.
//
// The prefix cache cannot resume a hybrid from pages alone: the state after a
// prefix is not in them. It keeps state snapshots at page boundaries the engine
// chooses (snapshot.go: the end of a prompt's last full page, and the point
// where a prompt leaves the prefix it shares with cached ones), at most
// Config.StateSnapshots, each dropped with its page. A prompt resumes from the
// deepest snapshot within its cached prefix, with the pages up to it
// (Stats.StateSnapshotHits); a prompt whose cached prefix holds no snapshot is
// recomputed from position 0 (Stats.StateSnapshotMisses) and leaves a snapshot
// at the branch point for the prompts after it. A step can only snapshot the
// state at its end, so prefill chunks end at those boundaries: with the prefix
// cache on, a hybrid's prompt takes at most two steps more than its chunks
// would (the last, under a page, runs beside the other sequences' work).
//
// Across the PD boundary the prefill role's KVSink, when it is also a
// StateSink, gets the state after the whole prompt once, in the step that
// completes it, after the last LayerComputed(final=true); the decode role
// copies it into the sequence's slot with Handle.ResumeState, on the loop
// before the sequence is scheduled. On a model with state plain Resume fails
// with ErrStateRequired, a state of the wrong size with ErrBadRequest, and
// Submit refuses a KVSink that is not a StateSink (ErrBadRequest).
//
// # Scheduling
//
// Prefill is shortest-remaining-first with aging (sched.go): running sequences
// with prompt left and waiting ones (admitted on the way) share each step's
// prefill budget in order of remaining prompt tokens minus (prefill tokens the
// engine fed to other sequences since submission)/AgingRatio; preempted
// sequences are readmitted first. A short prompt behind a long one finishes
// first, and a long one of R tokens is never starved: nothing submitted after
// the engine fed AgingRatio×R more tokens ranks before it. Admission stops at
// the first sequence whose pages do not fit.
//
// With ITLTarget, a step that carries decoding sequences gets only the prefill
// tokens an online step-cost model (cost.go: non-negative least squares of
// step time on a constant, tokens, sequences and attention query-key pairs,
// exponentially forgotten) predicts fit in the target, but at least
// MinPrefillTokens, so prefill always progresses. Steps with nothing decoding
// take the full budget; while the model has seen fewer than 4 steps, a step
// with decodes gets only the floor.
//
// With DecodePace, the decoding sequences get a step no sooner than the pace
// after the last step that fed them all started. Prompt work that comes
// meanwhile (a submission, a prompt's next chunk) runs at once in steps of its
// own, without the decoding sequences, which neither get an early token from
// it nor wait longer for theirs; with no prompt work the loop waits idle, and
// a submission, resume, cancellation or Close ends the wait. Stats.PacedWait
// sums the waits. A decode worker on a core lease uses it (--core-lease-pace)
// to lend its core between decode steps while the prefill worker wants it.
//
// # KV layer groups
//
// On a model with sliding-window layers the cache keeps those layers in a
// window group with its own pool (package kvcache; Config.WindowPages). A
// sequence holds one page table per group; its window-group pages that lie
// wholly before the window of its next step are released as it advances
// (pages.go, slide), so between steps it holds at most ceil(W/PageTokens)+1 of
// them (plus one prefill chunk's while prefilling), while global pages grow
// with the context. Admission takes global pages for the whole prompt and
// window pages from the window of the first step to what that step can feed
// (for an import: the prompt's last window only); reserve, eviction and
// preemption apply per pool. A model whose every layer is windowed has only
// the window group (its context is not bounded by Pages). One cache with two
// pools rather than a cache per group keeps Forward's single cache argument
// and the per-layer page views. Stats counts both groups in
// PagesUsed/PagesTot, the window group alone in
// WindowPagesUsed/WindowPagesTot, and weighs them by bytes in
// KVBytesUsed/KVBytesTot and KVUsage.
//
// The prefix cache has a tree per group; a hit is the longest prefix every
// group's tree holds. The window tree gets a sequence's prompt pages as they
// slide out of its window (and the held ones with the global pages), so a hit
// has the window-group pages of its last window; the earlier ones in the hit
// are released at once.
//
// For example, Gemma 3 4B (34 layers, 5 global, 4 KV heads × 256 dims, window
// 1024, F16) keeps 139,264 B per token without groups; with them only the 5
// global layers grow, 20,480 B per token, plus a fixed 123.5 MB per sequence:
// at 32k tokens 4.56 GB becomes 0.79 GB per sequence.
//
// # Resources
//
// Pages are taken at admission for the prompt and one at a time as a
// sequence grows; when none are free the prefix cache evicts, and if that
// is not enough the most recently admitted running sequence is preempted:
// its pages (and state slot) are released and it goes back to the front of
// the queue to be recomputed (Update.Preempted counts it). Admission keeps
// one free page in reserve per running sequence. Every exit path (end,
// cancel, error, Close)
// releases the sequence's pages and state slot in the same step; tests
// compare the free page count with its initial value, and the state slots
// held with 0, after each scenario.
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
// In detail: the grammar.Vocab is built once per engine, on the first
// constrained request, from the tokenizer's pieces and its end-of-generation
// tokens. End-of-generation tokens are allowed exactly when the document is
// complete; once it is complete and nothing may follow, the sequence finishes
// with FinishStop (also with IgnoreEOS: the grammar decides the end). When
// MinTokens would leave nothing allowed, the grammar's end wins. The matcher
// lives in the sequence, so preemption and recompute keep it. A first token
// from the prefill side that the grammar rejects fails the sequence with
// ErrConstraint (wrapped), as does a mask that allows no token at all.
// Logprobs stay the model's raw ones (before bias, penalties and mask).
//
// A late mask: the loop keeps the step's logits (one vocabulary-sized buffer
// per sequence that ever waits) and the sequence samples from them as soon as
// the mask is there (Stats.MaskWaits), so seeded and greedy outputs are what
// they are with masks on time. A mask past its budget ends the sequence with
// an error wrapping ErrGrammarTooCostly (Stats.GrammarBudgetEnds); the worker
// stops within a few hundred units of work (grammar.Matcher.MaskWithin), and
// 50 ms past the budget the loop ends the sequence anyway and interrupts the
// worker. The defaults: an ordinary mask takes at most about one walk of the
// vocabulary trie (10 to 40 ms for a 151k vocabulary on a loaded core), so 250
// ms per mask is 6 times the worst of them; 10 s per sequence is thousands of
// ordinary masks or 40 at the per-mask budget.
//
// The admission probe (grammar.CheckCost) computes the masks of a sample
// generation of 8 tokens, each within 4 walks of the vocabulary trie and 16 in
// all, counting work rather than time so the answer does not depend on the
// load; a grammar over that is refused with ErrBadRequest and
// ErrGrammarTooCostly (Stats.GrammarRefused). The probe runs on the caller's
// goroutine, at most MaskWorkers at once, and its result is cached with the
// grammar, so only a grammar's first request pays.
//
// # Concurrency
//
// Submit, Handle methods, Stats and Close are safe for concurrent use. The
// step loop is one goroutine, started by New and stopped by Close, and is
// the only user of the runner and caches. A cancelled context or
// Handle.Cancel wakes the loop, which ends the sequence and frees its pages
// within one step.
//
// # Limits and errors
//
// Config.MaxModelLen caps the context below the model's (vLLM's
// --max-model-len; 0: the model's); the default arena is sized by
// Config.KVMemoryBytes (0: DefaultKVMemoryBytes, 4 GiB, never below one full
// sequence) and holds 4 sequences of MaxModelLen unless Config.Pages says
// otherwise.
//
// New refuses out-of-range configuration, so a mistyped flag fails at start-
// up: MaxBatchTokens up to 1<<16, MaxRunning up to 4096, MaxWaiting up to
// 1<<20, TopLogprobs up to 20, a KV cache of at least 2 pages. Submit errors
// wrap ErrQueueFull (an HTTP server answers 429), ErrTooLong and ErrBadRequest
// (400; with ErrGrammarTooCostly for a grammar refused for the cost of its
// masks), ErrClosed (503).
package engine
