package engine

import (
	"errors"
	"time"

	"tandem/internal/engine/grammar"
	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/sample"
	"tandem/internal/engine/tensor"
)

// Errors that Submit returns; callers map them to HTTP statuses with errors.Is.
var (
	// ErrQueueFull: the waiting queue is at its limit (HTTP 429).
	ErrQueueFull = errors.New("engine: waiting queue is full")
	// ErrTooLong: prompt plus max tokens cannot fit the context or the KV arena (HTTP 400).
	ErrTooLong = errors.New("engine: request does not fit the context")
	// ErrClosed: the engine is shutting down (HTTP 503).
	ErrClosed = errors.New("engine: closed")
	// ErrBadRequest: the request is malformed (HTTP 400).
	ErrBadRequest = errors.New("engine: bad request")
)

// DefaultSnapshotMemoryBytes bounds the default number of state snapshots
// (Config.StateSnapshots): 1 GiB, about 50 snapshots of a 0.8B qwen35's
// 20 MB state (18 Gated DeltaNet layers of 16 heads × 128² floats).
const DefaultSnapshotMemoryBytes = 1 << 30

// Config sets the engine's resources and limits.
type Config struct {
	PageTokens int // token positions per KV page (default 16)
	Pages      int // pages in the KV arena (default: 4 sequences of MaxModelLen, within KVMemoryBytes; see New); with sliding-window layers, the global (full-attention) group's pool
	// MaxModelLen caps the context (prompt plus generated tokens) below the
	// model's, as vLLM's --max-model-len: the default KV arena is sized
	// from it, and a longer request is refused (ErrTooLong). 0: the model's
	// context; more than the model's is an error.
	MaxModelLen int
	// KVMemoryBytes bounds the default KV arena (Pages 0) of the global
	// (full-attention) group: it holds at most this many bytes of pages,
	// and New fails when that is less than one MaxModelLen sequence (lower
	// MaxModelLen or raise the budget). 0: DefaultKVMemoryBytes, a soft
	// bound that never takes the arena below one full sequence (New logs
	// when it applies).
	KVMemoryBytes int64
	// WindowPages is the page pool of the sliding-window layers (the KV
	// cache's window group), used only by models that have such layers
	// (default: a window and a page for each of MaxRunning sequences and
	// one full step; at least a window, a full step and a page). A sequence holds at most
	// ceil(window/PageTokens)+1 of them between steps.
	WindowPages    int
	KVType         tensor.Type // tensor.F32 (the zero value) or tensor.F16; commands default to F16 as llama.cpp does
	MaxBatchTokens int         // tokens per step, decode and prefill chunks together (default 512)
	MaxRunning     int         // sequences in the running batch (default 64)
	MaxWaiting     int         // queued requests before Submit fails with ErrQueueFull (default 256)
	PrefixCache    bool        // share full prompt pages between requests

	// StateSlots is the number of recurrent-state slots of a model with
	// state (model.Config.State; hybrids such as qwen35): a sequence needs
	// one to be admitted and holds it until it ends or is preempted, so at
	// most this many run at once (default MaxRunning; each slot is
	// Model.StateSize()*4 bytes, allocated on first use). Ignored for
	// models without state.
	StateSlots int
	// StateSnapshots bounds the state snapshots the prefix cache keeps for
	// a model with state, each a slot's size: a prefix is reused only from
	// a snapshot (see the package doc). Default: StateSlots, but no more
	// than fit in DefaultSnapshotMemoryBytes (at least 1).
	StateSnapshots int

	// ITLTarget, when > 0, bounds each step's prefill tokens so that a step
	// that carries decoding sequences is predicted to take at most this
	// long: the inter-token latency a prefill chunk may impose on them.
	// The prediction comes from an online model of step cost (see
	// cost.go); steps with nothing decoding take MaxBatchTokens. 0: off.
	ITLTarget time.Duration
	// MinPrefillTokens is the prefill every step with prompt work left
	// carries even when the ITL target is already spent, so prefill always
	// progresses (default 16, at most MaxBatchTokens).
	MinPrefillTokens int
	// AgingRatio is how fast a sequence's prefill priority improves while
	// it waits: by one token for every AgingRatio prefill tokens the engine
	// feeds other sequences after its submission (default 4). A prompt of
	// R tokens is then overtaken only by work submitted within the next
	// AgingRatio×R prefill tokens. See sched.go.
	AgingRatio int

	// StepHook, when set, is called as each forward step starts, with the
	// step's prompt tokens (prefill of any kind) and decoding sequences;
	// the function it returns is called when the step's forward pass ends.
	// A core lease (internal/engine/cores) uses it to give the step's work
	// a priority. It runs on the engine's goroutine and must be quick.
	StepHook func(prefill, decodes int) (end func())
	// DecodePace, when set, is called before each step: the decoding
	// sequences' next step starts no sooner than the returned duration
	// after the last step that fed them all started (0: at once). Until
	// then steps carry only prompt work (a submission is prefilled at once,
	// in a step of its own), and with none the engine idles; a submission
	// or a resumed sequence ends the wait. A core lease uses it to lend the
	// worker's cores to another process between decode steps while the
	// inter-token latency allows. It runs on the engine's goroutine and
	// must be quick.
	DecodePace func() time.Duration
	// KVMemory, when set, returns the memory the KV cache lives in (at
	// least the bytes asked for, 64-byte aligned), instead of the Go
	// heap: a prefill worker's shared-memory source region, which decode
	// workers on the host copy KV pages out of. It is called once, by New;
	// nil memory and no error mean the heap after all.
	KVMemory func(bytes int) ([]byte, error)

	// Constrained decoding (see maskpool.go). MaskBudget bounds the time
	// of one token mask (default 250ms: an ordinary mask takes at most
	// about one walk of the vocabulary's trie, 10 to 40 ms for a 151k
	// vocabulary on a loaded core, and a mask slower than 250ms makes
	// the sequence's own inter-token latency that long);
	// RequestMaskBudget bounds all of one sequence's masks together
	// (default 10s: thousands of ordinary masks, most of which come from
	// the cache in microseconds, or 40 at the per-mask budget). A sequence
	// past either ends with FinishGrammarBudget; no other sequence waits
	// for its masks.
	MaskBudget, RequestMaskBudget time.Duration
	// MaskWorkers is the number of goroutines computing masks (default
	// half of GOMAXPROCS, at least 1: the forward pass keeps the rest).
	// Grammar cost probes at Submit run at most this many at once too.
	MaskWorkers int
	// GrammarCost is the probe a grammar's first masks must pass at
	// Submit (grammar.CheckCost; zero: grammar.DefaultCostLimit).
	GrammarCost grammar.CostLimit

	hooks *testHooks // the package's tests only
}

// Request is one sequence to generate. Prompt is already tokenized (BOS
// included when wanted).
type Request struct {
	ID             string // caller's id, shown in logs and debug output
	Prompt         []int32
	MaxTokens      int // > 0
	Sample         sample.Params
	StopTokens     []int32 // end generation besides the vocabulary's end-of-generation tokens
	IgnoreEOS      bool    // keep generating past end-of-generation tokens (they are not masked either)
	TopLogprobs    int     // alternatives to report per generated token (0: none; the chosen token's logprob is always reported)
	PromptLogprobs bool    // report logprobs of the prompt tokens (in the first Update)

	// Grammar, when set, constrains the generated tokens: before each draw
	// the logits of the tokens the grammar does not allow next are set to
	// -Inf, end-of-generation tokens are allowed exactly when the document
	// is complete, and the sequence finishes (FinishStop) once the
	// document is complete and nothing may follow. nil: unconstrained.
	// A compiled Grammar is immutable and may be shared by many requests.
	Grammar *grammar.Grammar
	// LogitBias is added to the logits of the given token ids before
	// sampling (OpenAI's logit_bias, already range-checked by the caller;
	// -100 in practice bans a token, +100 forces it unless masked).
	LogitBias map[int32]float32
	// MinTokens masks the end-of-generation and stop tokens until this
	// many tokens have been generated (vLLM's min_tokens).
	MinTokens int

	// KVSink, when set, receives the prompt's K/V as it is computed: the
	// prefill role of disaggregated serving.
	KVSink KVSink
	// Import, when set, makes the engine take the prompt's K/V from outside
	// instead of computing it: the decode role. The sequence holds its
	// pages without being scheduled until Handle.Resume.
	Import *Import
}

// KVSink receives a sequence's prompt K/V while it is being computed.
type KVSink interface {
	// LayerComputed is called from the step loop, during a step that
	// advances the prompt, as soon as layer layer's K/V rows of the step
	// are in the cache: pages (the sequence's table of the layer's group,
	// kvcache.Tables.Layer) now hold that layer's K/V for positions
	// [0, computed), except the window-group slots before the window,
	// which are -1 (released; kvcache.Config.FirstNeeded). final is true in the step that completes the prompt;
	// the first token follows in the Handle. layer is the KV layer, the
	// cache's (0..kvcache.Config.Layers-1): a hybrid model's recurrent
	// layers keep no pages and get no call (model.Runner.SetLayerHook).
	// Calls come for KV layers 0, 1, ... in order, once per step. The sink must copy what it needs before
	// returning and must not block on the network: later layers of the
	// step wait for it, and the pages may be reused once the sequence ends,
	// unless the sink takes references on them (kv.Pool(g).Ref, here on
	// the loop) and gives each back with Engine.ReleasePage later.
	LayerComputed(kv *kvcache.Cache, pages []int32, layer, computed int, final bool)
}

// Import is how a decode worker fills a sequence's prompt K/V itself.
type Import struct {
	// Allocated is called from the step loop once the prompt's pages are
	// reserved (admission): global-group pages for the whole prompt and
	// window-group pages for the pages of its last window only
	// (kvcache.Config.FirstNeeded(GroupWindow, len(prompt)) on; the slots
	// before hold -1). The caller writes the K/V bytes of those pages
	// (kv.KPage / kv.VPage of each layer's group's table), from any
	// goroutine, then calls Handle.Resume. The engine does not touch the
	// pages until then. The caller must make sure its writes have stopped
	// before it cancels the sequence.
	Allocated func(kv *kvcache.Cache, pages kvcache.Tables)
}

// Token is one generated token.
type Token struct {
	ID      int32
	Logprob float32
	Top     []sample.TokenLogprob // TopLogprobs alternatives, best first
}

// FinishReason says why a sequence ended.
type FinishReason string

// Finish reasons, as OpenAI names them where it has a name.
const (
	FinishStop      FinishReason = "stop"      // end-of-generation or a stop token
	FinishLength    FinishReason = "length"    // MaxTokens or the context
	FinishCancelled FinishReason = "cancelled" // the caller's context ended
	FinishError     FinishReason = "error"     // the engine failed the sequence (Err says why)
	// FinishGrammarBudget: the grammar's token masks ran past
	// Config.MaskBudget or Config.RequestMaskBudget (Err wraps
	// ErrGrammarTooCostly).
	FinishGrammarBudget FinishReason = "grammar_budget"
)

// Update is what a Handle yields: new tokens and, at the end, why it ended.
type Update struct {
	Tokens         []Token
	PromptLogprobs []float32 // with Request.PromptLogprobs, in the first update: logprob of prompt[i] given prompt[:i] (first entry 0)
	Done           bool
	Finish         FinishReason
	Err            error
	// Set in every update: the prompt's length and how many of its tokens
	// came from the prefix cache.
	PromptTokens int
	CachedTokens int
	// Preempted counts the times the sequence lost its pages and was
	// recomputed (KV cache pressure).
	Preempted int
	// QueueTime, in the update that carries the first generated token, is
	// how long the sequence waited from Submit to its first admission (its
	// pages allocated); 0 in other updates.
	QueueTime time.Duration
}

// Stats is a snapshot of the engine's queues and counters for metrics.
type Stats struct {
	Waiting, Running int
	// PagesUsed and PagesTot count the pages of every KV layer group;
	// WindowPagesUsed and WindowPagesTot those of the sliding-window
	// group alone (0 for models without one).
	PagesUsed, PagesTot             int
	WindowPagesUsed, WindowPagesTot int
	// KVBytesUsed and KVBytesTot are the K/V bytes of those pages: a
	// page of a group holds PageBytes × 2 for each of the group's layers,
	// so pages of the two groups weigh differently (KVUsage).
	KVBytesUsed, KVBytesTot int64
	// PagesEvictable and KVBytesEvictable are the pages among PagesUsed
	// (and their bytes) that only the prefix cache holds: an admission may
	// evict them at once, so KVUsage counts them as free, as vLLM counts
	// its evictable cached blocks. They are refreshed when the engine goes
	// idle and at most every evictableEvery while it steps (a cache walk).
	PagesEvictable   int
	KVBytesEvictable int64
	PrefixHitTokens  uint64 // cumulative prompt tokens served from the prefix cache
	PromptTokens     uint64 // cumulative prompt tokens computed or reused
	GeneratedTokens  uint64
	Preemptions      uint64
	Steps            uint64
	OldestWaiting    time.Duration
	// PrefillQueueTokens is the prefill work this engine still holds: the
	// uncomputed prompt tokens of every admitted and waiting sequence
	// (recompute after preemption included; prefix-cache hits of waiting
	// sequences are not known yet and count in full). Sequences whose K/V
	// is imported (Request.Import) count nothing until they are preempted.
	// Running sequences are counted as of the last step; waiting ones
	// change at once on Submit.
	PrefillQueueTokens int
	// Recurrent state (models with state; 0 for the others):
	// StateSlotsUsed of StateSlotsTot slots are held by admitted sequences,
	// each StateSlotBytes; StateSnapshots is the snapshots the prefix cache
	// holds. StateSnapshotHits counts admissions that resumed from a
	// snapshot (cumulative); StateSnapshotMisses those whose prompt had
	// cached pages but no snapshot at or before them, which recompute the
	// prefix from position 0 (a hybrid cannot resume from pages alone).
	StateSlotsUsed, StateSlotsTot          int
	StateSlotBytes                         int64
	StateSnapshots                         int
	StateSnapshotHits, StateSnapshotMisses uint64
	// PacedWait is the time the loop waited between decode steps under
	// Config.DecodePace, cumulative.
	PacedWait time.Duration
	// Constrained decoding, cumulative: requests refused at Submit for
	// the cost of their grammar's masks, sequences ended for their mask
	// budget (FinishGrammarBudget), and samples that waited for a late
	// mask (the sequence sat out steps; no other sequence waited).
	GrammarRefused, GrammarBudgetEnds, MaskWaits uint64
}

// KVUsage is the fraction of the KV cache in use, by bytes (pages of the
// global and the window group hold different numbers of layers); with no
// byte counts (a hand-made Stats), by pages. Pages only the prefix cache
// holds (evictable) count as free, so an idle engine with a warm prefix
// cache reads 0, as vLLM's kv_cache_usage_perc does.
func (s Stats) KVUsage() float64 {
	switch {
	case s.KVBytesTot > 0:
		return float64(max(0, s.KVBytesUsed-s.KVBytesEvictable)) / float64(s.KVBytesTot)
	case s.PagesTot > 0:
		return float64(max(0, s.PagesUsed-s.PagesEvictable)) / float64(s.PagesTot)
	}
	return 0
}
