package debugdoc

import (
	"time"

	"tandem/internal/pd/room"
)

// The two terminal states. Workers name their rooms' states after
// room.State ("bootstrapping", "waiting_for_input", "transferring",
// "succeeded", "failed"); the router's request records use "dispatched",
// "streaming", "succeeded" and "failed".
const (
	StateSucceeded = "succeeded"
	StateFailed    = "failed"
)

// watchdogGrace is how far past its deadline a room may be before Overdue
// reports it: the worker's watchdog waits as long before it fails a room
// its timer missed, so a poll that lands between a deadline passing and
// the timer firing does not flag a healthy room.
const watchdogGrace = time.Duration(room.WatchdogGrace)

// Rooms is one process's room table: the document GET /debug/rooms
// answers, and one entry of a Cluster.
type Rooms struct {
	// Worker names the process: the router's name, or (in a Cluster) the
	// worker's URL, which the router adds. A worker's own document has none.
	Worker string `json:"worker,omitempty"`
	// Role is "prefill", "decode" or "router".
	Role string `json:"role"`
	// TransferAddr is a worker's transfer address ("" on the router).
	TransferAddr string `json:"transfer_addr"`
	// Live is how many rooms have not ended.
	Live int `json:"live"`
	// Error is set, and Rooms empty, when the router could not read this
	// worker's table.
	Error string `json:"error,omitempty"`
	// Rooms lists the live rooms, then recently finished ones.
	Rooms []Room `json:"rooms"`
	// Workers is the router's view of its workers (health and circuit
	// breaker); only the router's entry has it.
	Workers []Worker `json:"workers,omitempty"`
	// Membership is where the router's workers come from and how that
	// source is doing; only the router's entry has it.
	Membership *Membership `json:"membership,omitempty"`
}

// Membership is a router's membership source as /debug/rooms shows it
// (package discovery's Status, in brief).
type Membership struct {
	// Source is static, k8s, dns or file; Spec says which pods, name or
	// file.
	Source string `json:"source"`
	Spec   string `json:"spec,omitempty"`
	// Synced: the first membership was delivered.
	Synced bool `json:"synced"`
	// Changes counts membership changes the source delivered; LastChange
	// is when the last was (RFC 3339).
	Changes    int    `json:"changes"`
	LastChange string `json:"last_change,omitempty"`
	// Errors counts the source's errors; LastError is the latest and
	// Failing whether it still stands (the last good membership is kept
	// meanwhile).
	Errors    int    `json:"errors"`
	LastError string `json:"last_error,omitempty"`
	Failing   bool   `json:"failing,omitempty"`
	// Ignored are what the source saw that is not a worker, and why.
	Ignored []string `json:"ignored,omitempty"`
}

// Room is one room as a process sees it. On the router a room is one
// attempt of one sample of a client request, sent to one prefill and
// decode pair (or, for a local leg, to a decode worker alone: Prefill is
// empty): Prefill and Decode name the pair, Peer is empty, Bytes counts
// decode's answer as received, Decision says why the attempt took its path
// and Phases how long each part of its time to first token took.
type Room struct {
	ID        string `json:"id"`
	RequestID string `json:"request_id"`
	// TraceID is the W3C trace id of the request the room serves (32 hex
	// digits), when it has one: the client's traceparent, or the router's
	// own trace when tracing is on.
	TraceID string `json:"trace_id,omitempty"`
	State   string `json:"state"`
	Phase   string `json:"phase"`
	Reason  string `json:"reason,omitempty"`
	Peer    string `json:"peer"`
	Prefill string `json:"prefill,omitempty"`
	Decode  string `json:"decode,omitempty"`
	// AgeMS is milliseconds since the room was created.
	AgeMS float64 `json:"age_ms"`
	// DeadlineInMS is milliseconds until the room's current deadline
	// (negative: past due); absent for terminal rooms and rooms without one.
	DeadlineInMS *float64     `json:"deadline_in_ms,omitempty"`
	Bytes        int64        `json:"bytes"`
	History      []Transition `json:"history"`
	// Decision is the router's choice of path for the attempt.
	Decision *Decision `json:"decision,omitempty"`
	// Phases are the attempt's time-to-first-token phases, once known.
	Phases *Phases `json:"phases,omitempty"`
}

// Decision is the router's selective-disaggregation choice for one
// attempt: Path "local" (one leg, the decode worker prefills the prompt
// itself) or "disaggregated" (a prefill and a decode leg), and Reason
// ("short_prompt", "long_prompt", "prefill_busy", "no_prefill_worker",
// "count_failed", "threshold_off"), the labels of
// tandem_router_pd_decisions_total.
type Decision struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
	// PromptTokens is the prompt's size as counted (-1: not counted).
	PromptTokens int `json:"prompt_tokens"`
	// CountedBy says how: "token_ids" (exact), "byte_bound" (the prompt's
	// bytes, an upper bound) or "tokenize" (a worker's /tokenize, exact).
	CountedBy string `json:"counted_by,omitempty"`
	// Threshold is the router's --pd-threshold (0: always disaggregate).
	Threshold int `json:"threshold"`
	// PrefillQueueTokens and LocalQueueTokens, for a long prompt that was
	// weighed for a decode worker's local prefill (--pd-spill), are the
	// queued prefill tokens the router saw on the least-queued prefill
	// worker and decode worker, without the prompt.
	PrefillQueueTokens *int `json:"prefill_queue_tokens,omitempty"`
	LocalQueueTokens   *int `json:"local_queue_tokens,omitempty"`
}

// Phases is a request's time to first token split into its parts, in
// milliseconds. TTFT is the router's own measure (the request's arrival to
// its first token written to the client); the others come from the
// workers' timings (each on its own clock, as durations) and are absent
// when a worker did not report them: queue wait on the prefill worker,
// prefill compute, KV transfer (the prompt computed to its KV acknowledged
// by decode), and the first decode step (decode resuming from the KV to
// its first token written).
type Phases struct {
	TTFTMS        *float64 `json:"ttft_ms,omitempty"`
	QueueMS       *float64 `json:"queue_ms,omitempty"`
	PrefillMS     *float64 `json:"prefill_ms,omitempty"`
	TransferMS    *float64 `json:"transfer_ms,omitempty"`
	FirstDecodeMS *float64 `json:"first_decode_ms,omitempty"`
}

// Transition is one entry of a room's history.
type Transition struct {
	// AtMS is milliseconds since the room was created.
	AtMS float64 `json:"at_ms"`
	From string  `json:"from"`
	To   string  `json:"to"`
	// Phase is the phase entered (workers; "" on the router).
	Phase  string `json:"phase"`
	Event  string `json:"event"`
	Reason string `json:"reason,omitempty"`
}

// Worker is the router's view of one worker in its /debug/rooms and
// /debug/cluster entry.
type Worker struct {
	URL  string `json:"url"`
	Role string `json:"role"`
	// Healthy: the worker passes its health checks.
	Healthy bool `json:"healthy"`
	// Draining: the worker drains (its /ready, or its answer to a leg,
	// said so): it gets no new legs while its legs in flight finish.
	Draining bool `json:"draining,omitempty"`
	// Problem is the last health probe's failure, if any.
	Problem string `json:"problem,omitempty"`
	// Breaker is the circuit breaker's state: "closed", "open" or
	// "half_open".
	Breaker string `json:"breaker"`
	// Failures is the breaker's count of consecutive failed legs.
	Failures int `json:"failures"`
	// Inflight is the router's open legs on the worker.
	Inflight int `json:"inflight"`
	// PrefillQueueTokens is the worker's reported prefill queue (prompt
	// tokens to compute) plus what the router sent it since; absent when
	// the worker does not report it.
	PrefillQueueTokens *int `json:"prefill_queue_tokens,omitempty"`
	// Waiting, Running and KVUsage are the worker's last /pd/status:
	// sequences queued and running in its engine, and its KV cache use
	// (0..1, vLLM's kv_cache_usage_perc); absent before it answered one.
	Waiting *int     `json:"waiting,omitempty"`
	Running *int     `json:"running,omitempty"`
	KVUsage *float64 `json:"kv_usage,omitempty"`
	// Membership: Name is the worker's name in its source (a pod's
	// namespace/name, a file endpoint's name); Source is where the router
	// found it (static, k8s, dns, file); Since when it joined (RFC 3339);
	// Listed whether its source lists it as Ready (ListReason why not);
	// Left that it left the source and only finishes its legs.
	Name       string `json:"name,omitempty"`
	Source     string `json:"source,omitempty"`
	Since      string `json:"since,omitempty"`
	Listed     bool   `json:"listed"`
	ListReason string `json:"list_reason,omitempty"`
	Left       bool   `json:"left,omitempty"`
	// Instance is the worker process's id as it reports it; Restarts how
	// many new instances the router saw on its address.
	Instance string `json:"instance,omitempty"`
	Restarts int    `json:"restarts,omitempty"`
}

// Cluster is the document GET /debug/cluster answers on the router: its
// own table first, then each worker's, prefill workers before decode
// workers.
type Cluster struct {
	Processes []Rooms `json:"processes"`
}

// Terminal reports whether the room has ended (succeeded or failed).
func (r Room) Terminal() bool { return r.State == StateSucceeded || r.State == StateFailed }

// Overdue reports whether a room that has not ended is more than the
// watchdog's grace (1 s) past its deadline.
func (r Room) Overdue() bool { return r.OverdueBy(watchdogGrace) }

// OverdueBy reports whether a room that has not ended is more than grace
// past its deadline.
func (r Room) OverdueBy(grace time.Duration) bool {
	return !r.Terminal() && r.DeadlineInMS != nil && *r.DeadlineInMS < -float64(grace)/float64(time.Millisecond)
}

// PastDeadlineMS returns how many milliseconds a room that has not ended
// is past its deadline (0 when it is not, or has none).
func (r Room) PastDeadlineMS() float64 {
	if r.Terminal() || r.DeadlineInMS == nil || *r.DeadlineInMS >= 0 {
		return 0
	}
	return -*r.DeadlineInMS
}
