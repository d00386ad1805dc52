package pool

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tandem/internal/api/drain"
	"tandem/internal/api/httpx"
	"tandem/internal/pd/debugdoc"
)

// Role is the part a worker plays in the handoff: "prefill" or "decode".
type Role string

// The worker roles.
const (
	Prefill Role = "prefill"
	Decode  Role = "decode"
)

// Limits of the health checks.
const (
	// probeBodyBytesMax bounds /health, /pd/status and /pd/info answers.
	probeBodyBytesMax = 64 << 10
	// healthFailuresMax consecutive failed probes take a worker out.
	healthFailuresMax = 2
)

// Status is a worker's answer to GET /pd/status: its queue depths and
// page use, polled with each health check and used to pick the least
// loaded worker.
type Status struct {
	Role       string `json:"role"`
	Waiting    int    `json:"waiting"`
	Running    int    `json:"running"`
	PagesUsed  int    `json:"pages_used"`
	PagesTotal int    `json:"pages_total"`
	RoomsLive  int    `json:"rooms_live"`
	// PrefillQueueTokens is the prompt tokens the worker's engine has
	// still to compute (queued and partly computed prompts); nil when the
	// worker does not report it. The router picks prefill workers by it.
	PrefillQueueTokens *int `json:"prefill_queue_tokens,omitempty"`
	// KVUsage is the worker's KV cache use as vLLM's kv_cache_usage_perc
	// reads it (0..1, pages only its prefix cache holds counted free); nil
	// when the worker does not report it.
	KVUsage *float64 `json:"kv_usage,omitempty"`
	// TransferAddr is the worker's transfer address now. A prefill worker
	// that restarted listens on a new one; the router notices here.
	TransferAddr string `json:"transfer_addr,omitempty"`
	// Instance identifies the worker process (new at each start); empty
	// when the worker does not report it. A new one on the same address is
	// a restart: the pool counts it and resets the worker's breaker.
	Instance string `json:"instance,omitempty"`
}

// Info is a worker's answer to GET /pd/info. A prefill worker's
// TransferAddr (host:port) is what decode legs carry in X-Tandem-Prefill.
type Info struct {
	Role         string `json:"role"`
	TransferAddr string `json:"transfer_addr"`
	Model        string `json:"model"`
	Instance     string `json:"instance,omitempty"`
	// EmbeddingsOnly: the worker's model computes embeddings and generates
	// no text; such a prefill worker has no transfer address.
	EmbeddingsOnly bool `json:"embeddings_only,omitempty"`
}

// EmbeddingsOnlyError is TransferAddr's error for a prefill worker whose
// /pd/info says its model computes embeddings only: a generation request
// cannot run on that cluster, which is the request's fault, not the
// worker's (the router answers 400, as the worker itself would).
type EmbeddingsOnlyError struct{ Model string }

func (e *EmbeddingsOnlyError) Error() string {
	return fmt.Sprintf("the model %q is an embedding model: it computes embeddings (POST /v1/embeddings) and does not generate text", e.Model)
}

// Worker is one worker of the pool, known by its base URL, and what the
// router knows of it. A *Worker is a handle: Pick returns it, the leg's
// end gives it back (Release, Done), and exclude and avoid lists compare
// handles. The fields below url and role are guarded by Pool.mu.
type Worker struct {
	url  string
	role Role

	healthy        bool
	draining       bool // its /ready (or a leg's answer) says it drains: no new legs; its legs finish
	fails          int  // consecutive failed probes
	problem        string
	status         Status
	haveStatus     bool
	inflight       int // the router's legs on this worker now
	inflightAtPoll int // inflight when status was read
	sentTokens     int // prompt tokens of the prefill and local legs the router sent, in all
	tokensAtPoll   int // sentTokens when status was read
	transferAddr   string
	embeddingsOnly bool // its /pd/info says its model only embeds
	model          string
	infoProblem    string  // the last /pd/info failure, logged once
	br             breaker // passive health from the router's own legs

	// Membership (membership.go): where the worker came from and whether
	// its source lists it as Ready.
	name        string    // the source's name for it (a pod's namespace/name); the URL for static workers
	source      string    // "static", "k8s", "dns", "file"
	since       time.Time // when it joined (or last joined again)
	listedReady bool      // its source lists it as Ready (static workers always)
	listReason  string    // why its source says it is not Ready
	gone        bool      // it left its source: no new legs; dropped once its legs ended
	dropped     bool      // no longer in the pool (its legs all ended after it left)
	droppedSeq  uint64    // when it was dropped, in Pool.dropSeq
	checked     bool      // a health probe answered since it joined
	instance    string    // the worker process's instance id (/pd/status, /pd/info)
	restarts    int       // instance changes seen on its address
}

// URL returns the worker's base URL ("http://host:port"), which
// identifies it.
func (w *Worker) URL() string { return w.url }

// Role returns the role the worker was given.
func (w *Worker) Role() Role { return w.role }

// takes reports whether the worker may get a new leg as far as its health
// and membership go: it passes its probes, does not drain, and its source
// lists it as Ready. Callers hold Pool.mu.
func (w *Worker) takes() bool { return w.healthy && !w.draining && w.listedReady && !w.gone }

// counted reports whether the worker is a member (not gone), for Count.
// Callers hold Pool.mu.
func (w *Worker) counted() bool { return !w.gone }

// load is the worker's reported queue plus the legs the router sent (or
// finished) since that report; without a report, the router's legs alone.
// Callers hold Pool.mu.
func (w *Worker) load() int {
	if !w.haveStatus {
		return w.inflight
	}
	return max(0, w.status.Waiting+w.status.Running+w.inflight-w.inflightAtPoll)
}

// queuedTokens is the worker's reported prefill queue plus the prompt
// tokens of the legs the router sent since that report (an over-estimate
// until the next report: legs finished since are not taken off), and
// whether the worker reports it at all. Callers hold pool.mu.
func (w *Worker) queuedTokens() (int, bool) {
	if !w.haveStatus || w.status.PrefillQueueTokens == nil {
		return 0, false
	}
	return max(0, *w.status.PrefillQueueTokens+w.sentTokens-w.tokensAtPoll), true
}

// Config configures a Pool.
type Config struct {
	// Prefill and Decode are the workers' base URLs, already checked
	// ("http://host:port", no trailing slash, none twice).
	Prefill, Decode []string
	// Logger receives health and breaker changes; default slog.Default().
	Logger *slog.Logger
	// Registry receives the pool's metrics (tandem_router_worker_inflight,
	// _healthy, _breaker_state, _breaker_transitions_total); default a new
	// registry.
	Registry prometheus.Registerer
	// Client makes the probes (GET /health, /pd/status, /pd/info); it
	// carries the cluster credential. Default http.DefaultClient.
	Client *http.Client
	// HealthTimeout bounds each probe of a health round; InfoTimeout a
	// GET /pd/info made by TransferAddr while picking.
	HealthTimeout, InfoTimeout time.Duration
	// BreakerFailures consecutive failed legs (or a failure rate of half
	// the last 20) open a worker's circuit breaker; BreakerCooldown is how
	// long it keeps the worker out before one probe leg goes through.
	BreakerFailures int
	BreakerCooldown time.Duration
	// Now is the clock of the breakers' cool-down; default time.Now.
	Now func() time.Time
	// Source names where Prefill and Decode came from, for Debug; default
	// "static". A pool whose members change uses Reconcile instead.
	Source string
	// OnDrop, when set, is called when a worker that left is dropped (its
	// last leg ended), with the pool's lock held: it may forget what it
	// keeps per worker (metric series) and must not call the pool.
	OnDrop func(url string, role Role)
}

// Pool holds the workers of both roles: their health (from Check's
// probes), their load, and a circuit breaker each (from the legs the router
// reports back). It is safe for concurrent use.
type Pool struct {
	log         *slog.Logger
	met         *metrics
	client      *http.Client
	now         func() time.Time
	threshold   int           // consecutive failed legs that open a breaker
	cooldown    time.Duration // how long an open breaker keeps a worker out
	probeTime   time.Duration // bounds each health probe
	infoTimeout time.Duration // bounds TransferAddr's /pd/info
	onDrop      func(url string, role Role)
	mu          sync.Mutex
	byRo        map[Role][]*Worker // in configured (then joining) order; gone workers stay until their legs end
	rr          map[Role]int       // round-robin counter for ties
	// past holds workers dropped after they left, by key, so that one
	// listed again keeps its breaker and restart count; at most pastMax.
	past    map[string]*Worker
	dropSeq uint64 // counts drops, to forget the oldest of past
}

// New builds a pool of c's workers. Every worker starts out of service
// until a health round (Check) finds it healthy.
func New(c Config) (*Pool, error) {
	if c.BreakerFailures < 1 || c.BreakerCooldown < 0 || c.HealthTimeout <= 0 || c.InfoTimeout <= 0 {
		return nil, fmt.Errorf("new worker pool: breaker failures %d (want at least 1), cooldown %s (want it not negative), health timeout %s and info timeout %s (want them positive)",
			c.BreakerFailures, c.BreakerCooldown, c.HealthTimeout, c.InfoTimeout)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	if c.Client == nil {
		c.Client = http.DefaultClient
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	met, err := newMetrics(c.Registry)
	if err != nil {
		return nil, err
	}
	if c.Source == "" {
		c.Source = "static"
	}
	p := &Pool{log: c.Logger, met: met, client: c.Client, now: c.Now, threshold: c.BreakerFailures, cooldown: c.BreakerCooldown,
		probeTime: c.HealthTimeout, infoTimeout: c.InfoTimeout, onDrop: c.OnDrop, byRo: map[Role][]*Worker{}, rr: map[Role]int{}, past: map[string]*Worker{}}
	now := c.Now()
	for _, r := range []struct {
		role Role
		urls []string
	}{{Prefill, c.Prefill}, {Decode, c.Decode}} {
		for _, u := range r.urls {
			w := &Worker{url: u, role: r.role, problem: "not checked yet", name: u, source: c.Source, since: now, listedReady: true}
			p.byRo[r.role] = append(p.byRo[r.role], w)
			p.exportLocked(w)
		}
	}
	return p, nil
}

// exportLocked sets every gauge of a worker that (re)joins. Callers hold
// mu (or own the pool alone).
func (p *Pool) exportLocked(w *Worker) {
	u, r := w.url, string(w.role)
	p.met.workerHealthy.WithLabelValues(u, r).Set(b2f(w.healthy))
	p.met.workerDraining.WithLabelValues(u, r).Set(b2f(w.draining))
	p.met.workerInflight.WithLabelValues(u, r).Set(float64(w.inflight))
	p.met.breakerState.WithLabelValues(u, r).Set(float64(w.br.state))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Workers returns every worker, prefill first, in configured order
// (workers that joined later after them), including those that left but
// still hold legs.
func (p *Pool) Workers() []*Worker {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.workersLocked()
}

func (p *Pool) workersLocked() []*Worker {
	return append(append([]*Worker(nil), p.byRo[Prefill]...), p.byRo[Decode]...)
}

// ErrNoWorker is the cause of a pick that found no healthy worker.
var ErrNoWorker = errors.New("no healthy worker")

// PublicError is a failed pick's error for a client: the role and counts
// of a pick that found no worker, else a phrase; never a worker's URL
// (those are in err's own text, for the log).
func PublicError(err error) string {
	var nw *noWorkerError
	if errors.As(err, &nw) {
		return nw.Public()
	}
	return "no worker could be picked"
}

// Pick chooses the least loaded healthy worker of role whose circuit
// breaker lets a leg through, never one in exclude and one in avoid only
// when no other is left, breaking ties round-robin, and counts a leg on it:
// the caller ends that leg with Release or Done, exactly once. A worker
// picked while its breaker is open (past its cool-down) gets the one
// half-open probe leg.
//
// tokens is the leg's prompt in tokens (0: unknown, or computed
// elsewhere). Prefill workers are ranked by their queued prefill tokens,
// then by load, when every candidate reports its queue; otherwise (and for
// decode workers) by load alone. The picked worker's queue grows by tokens
// until its next report. A pick that finds no worker is an error that
// wraps ErrNoWorker and names each worker's problem.
func (p *Pool) Pick(role Role, exclude, avoid []*Worker, tokens int) (*Worker, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	var cands []*Worker
	byTokens := role == Prefill
	for _, w := range p.byRo[role] {
		if !w.takes() || containsWorker(exclude, w) || !w.br.pickable(now, p.cooldown) {
			continue
		}
		cands = append(cands, w)
		if _, ok := w.queuedTokens(); !ok {
			byTokens = false
		}
	}
	// key orders candidates: avoided last, then fewer queued tokens (when
	// ranked by them), then less load.
	key := func(w *Worker) [3]int {
		k := [3]int{0, 0, w.load()}
		if containsWorker(avoid, w) {
			k[0] = 1
		}
		if byTokens {
			k[1], _ = w.queuedTokens()
		}
		return k
	}
	var best []*Worker
	var bestKey [3]int
	for _, w := range cands {
		k := key(w)
		switch c := cmpKey(k, bestKey); {
		case len(best) == 0 || c < 0:
			best, bestKey = append(best[:0], w), k
		case c == 0:
			best = append(best, w)
		}
	}
	if len(best) == 0 {
		return nil, p.noneReason(role, exclude)
	}
	w := best[p.rr[role]%len(best)]
	p.rr[role]++
	if w.br.state != breakerClosed {
		p.moveLocked(w, breakerHalfOpen)
		w.br.probing = true
	}
	w.inflight++
	w.sentTokens += max(0, tokens) // a prefill leg's prompt, or a local leg's on a decode worker
	p.met.workerInflight.WithLabelValues(w.url, string(role)).Set(float64(w.inflight))
	return w, nil
}

// cmpKey compares two pick keys element by element.
func cmpKey(a, b [3]int) int {
	for i := range a {
		if a[i] != b[i] {
			return cmp.Compare(a[i], b[i])
		}
	}
	return 0
}

// noWorkerError is a pick that found no worker: Error names each worker
// and its problem (for the log), Public only counts them (for clients).
type noWorkerError struct {
	role                 Role
	configured, excluded int
	detail               string
}

func (e *noWorkerError) Error() string {
	return fmt.Sprintf("pick %s worker: %v of role %s (%d configured; %s)", e.role, ErrNoWorker, e.role, e.configured, e.detail)
}

func (e *noWorkerError) Unwrap() error { return ErrNoWorker }

// Public says what a client is told: the role and the counts, no URLs.
func (e *noWorkerError) Public() string {
	s := fmt.Sprintf("%v of role %s (%d configured", ErrNoWorker, e.role, e.configured)
	if e.excluded > 0 {
		s += fmt.Sprintf(", %d already failed this request", e.excluded)
	}
	return s + ")"
}

// noneReason explains why no worker of role can be picked. Callers hold mu.
func (p *Pool) noneReason(role Role, exclude []*Worker) *noWorkerError {
	ws := p.byRo[role]
	parts := make([]string, 0, len(ws))
	e := &noWorkerError{role: role}
	now := p.now()
	for _, w := range ws {
		if w.counted() {
			e.configured++
		}
		why := w.problem
		switch {
		case w.gone:
			why = "left the membership (its legs finish)"
		case !w.listedReady:
			why = "not ready in " + w.source + " discovery"
			if w.listReason != "" {
				why += " (" + w.listReason + ")"
			}
		case w.healthy && w.draining:
			why = "draining"
		case w.healthy && !w.br.pickable(now, p.cooldown):
			why = w.br.problem(now, p.cooldown)
		}
		if containsWorker(exclude, w) {
			why = "already failed this request"
			e.excluded++
		}
		parts = append(parts, w.url+": "+why)
	}
	e.detail = strings.Join(parts, "; ")
	return e
}

func containsWorker(list []*Worker, w *Worker) bool {
	for _, x := range list {
		if x == w {
			return true
		}
	}
	return false
}

// Release ends a leg counted by Pick that told nothing about the worker
// (it was never sent, or was cancelled).
func (p *Pool) Release(w *Worker) { p.Done(w, Neutral, "") }

// Done ends a leg counted by Pick and feeds its outcome to w's circuit
// breaker; why is the failure, for the log.
func (p *Pool) Done(w *Worker, o Outcome, why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w.inflight--
	if to := w.br.record(o, p.threshold, why); to != w.br.state {
		p.moveLocked(w, to)
	}
	if w.gone && w.inflight == 0 {
		p.dropLocked(w) // it left; its last leg ended
		return
	}
	if !w.dropped {
		p.met.workerInflight.WithLabelValues(w.url, string(w.role)).Set(float64(w.inflight))
	}
}

// Failed feeds a failure found in a leg's answer (after its request
// succeeded: an error event, a malformed chunk) to w's circuit breaker.
// It does not end the leg: Done still does.
func (p *Pool) Failed(w *Worker, why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if to := w.br.record(Failure, p.threshold, why); to != w.br.state {
		p.moveLocked(w, to)
	}
}

// Draining records that w answered a leg with the draining answer
// (drain.IsRefusal): it gets no new legs until a health probe finds its
// /ready at 200 again (a restarted process on the same address). Its legs
// in flight are not touched; the refusal is not a failure for its breaker.
func (p *Pool) Draining(w *Worker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setDrainingLocked(w, true)
}

// setDrainingLocked sets w's draining state, logging and exporting a
// change. Callers hold mu.
func (p *Pool) setDrainingLocked(w *Worker, draining bool) {
	if w.draining == draining {
		return
	}
	w.draining = draining
	v := 0.0
	if draining {
		v = 1
		p.log.Info("worker draining: no new legs; its legs in flight finish", "worker", w.url, "role", w.role)
	} else {
		p.log.Info("worker ready again after draining", "worker", w.url, "role", w.role)
	}
	if !w.dropped {
		p.met.workerDraining.WithLabelValues(w.url, string(w.role)).Set(v)
	}
}

// moveLocked moves w's breaker to state to, counting and logging the
// transition. Callers hold mu.
func (p *Pool) moveLocked(w *Worker, to breakerState) {
	from := w.br.state
	if from == to {
		return
	}
	w.br.state, w.br.probing = to, false
	switch to {
	case breakerOpen:
		w.br.openedAt = p.now()
		p.log.Warn("circuit breaker open: worker out until a probe leg succeeds", "worker", w.url, "role", w.role,
			"from", from, "consecutive_failures", w.br.consecutive, "cooldown", p.cooldown, "err", w.br.why)
	case breakerClosed:
		w.br.reset()
		p.log.Info("circuit breaker closed: worker back", "worker", w.url, "role", w.role)
	case breakerHalfOpen:
		p.log.Info("circuit breaker half open: sending a probe leg", "worker", w.url, "role", w.role)
	}
	if !w.dropped {
		p.met.breakerState.WithLabelValues(w.url, string(w.role)).Set(float64(to))
		p.met.breakerTransitions.WithLabelValues(w.url, string(w.role), to.String()).Inc()
	}
}

// LeastQueued returns the fewest queued prefill tokens on a pickable
// prefill worker and on a pickable decode worker (healthy, not in exclude,
// breaker letting legs through), and false when a role has no such worker
// or one of them does not report its queue. Selective disaggregation
// weighs them to spill a long prompt to a decode worker.
func (p *Pool) LeastQueued(exclude []*Worker) (prefill, decode int, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	least := func(role Role) (int, bool) {
		best, found := 0, false
		for _, w := range p.byRo[role] {
			if !w.takes() || containsWorker(exclude, w) || !w.br.pickable(now, p.cooldown) {
				continue
			}
			n, ok := w.queuedTokens()
			if !ok {
				return 0, false
			}
			if !found || n < best {
				best, found = n, true
			}
		}
		return best, found
	}
	prefill, okp := least(Prefill)
	decode, okd := least(Decode)
	return prefill, decode, okp && okd
}

// Count returns how many workers of role take new legs (healthy, not
// draining, Ready in their source) and how many are members (workers that
// left but still finish legs are not).
func (p *Pool) Count(role Role) (healthy, all int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.byRo[role] {
		if w.takes() {
			healthy++
		}
		if w.counted() {
			all++
		}
	}
	return healthy, all
}

// Debug returns every worker's health for /debug/rooms.
func (p *Pool) Debug() []debugdoc.Worker {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []debugdoc.Worker
	for _, w := range append(append([]*Worker(nil), p.byRo[Prefill]...), p.byRo[Decode]...) {
		dw := debugdoc.Worker{URL: w.url, Role: string(w.role), Healthy: w.healthy, Draining: w.draining, Problem: w.problem,
			Breaker: w.br.state.String(), Failures: w.br.consecutive, Inflight: w.inflight,
			Name: w.name, Source: w.source, Since: w.since.UTC().Format(time.RFC3339Nano), Listed: w.listedReady, ListReason: w.listReason,
			Left: w.gone, Instance: w.instance, Restarts: w.restarts}
		if n, ok := w.queuedTokens(); ok {
			dw.PrefillQueueTokens = &n
		}
		if w.haveStatus {
			waiting, running := w.status.Waiting, w.status.Running
			dw.Waiting, dw.Running, dw.KVUsage = &waiting, &running, w.status.KVUsage
		}
		out = append(out, dw)
	}
	return out
}

// Model returns the model name the workers report (GET /pd/info): the
// first prefill, then decode, worker's that answered; "" before any did.
func (p *Pool) Model() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range []Role{Prefill, Decode} {
		for _, w := range p.byRo[r] {
			if w.model != "" {
				return w.model
			}
		}
	}
	return ""
}

// TransferAddr returns a prefill worker's transfer address, asking it
// (GET /pd/info, within InfoTimeout) if the health checks have not learned
// it yet.
func (p *Pool) TransferAddr(ctx context.Context, w *Worker) (string, error) {
	if a, model, embOnly := p.transferAddr(w); a != "" {
		return a, nil
	} else if embOnly {
		return "", &EmbeddingsOnlyError{Model: model}
	}
	var info Info
	if err := getJSON(ctx, p.client, w.url+"/pd/info", p.infoTimeout, &info); err != nil {
		return "", fmt.Errorf("learn the transfer address: %w", err)
	}
	if err := p.setInfo(w, &info); err != nil {
		return "", fmt.Errorf("learn the transfer address: %w", err)
	}
	if info.EmbeddingsOnly {
		return "", &EmbeddingsOnlyError{Model: info.Model}
	}
	return info.TransferAddr, nil
}

// transferAddr returns a prefill worker's transfer address, if known, its
// model and whether that model only embeds.
func (p *Pool) transferAddr(w *Worker) (addr, model string, embeddingsOnly bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return w.transferAddr, w.model, w.embeddingsOnly
}

// setInfo records a worker's /pd/info answer. A role that differs from the
// configured one takes the worker out: pairing it would fail every request.
func (p *Pool) setInfo(w *Worker, info *Info) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if info.Role != "" && info.Role != string(w.role) {
		return fmt.Errorf("worker %s says it is a %s worker in /pd/info, but it was given as --%s", w.url, info.Role, w.role)
	}
	if w.role == Prefill && info.TransferAddr == "" && !info.EmbeddingsOnly {
		return fmt.Errorf("prefill worker %s gave no transfer_addr in /pd/info", w.url)
	}
	w.transferAddr, w.model, w.embeddingsOnly = info.TransferAddr, info.Model, info.EmbeddingsOnly
	p.seeInstanceLocked(w, info.Instance)
	return nil
}

// probe is the outcome of one health round for one worker.
type probe struct {
	health    error
	draining  bool // /ready answered the draining phase
	status    *Status
	statusErr error
	info      *Info
	infoErr   error
	inflight  int // the router's legs on the worker when status was read
	sent      int // its sentTokens then
}

// Check runs one health round over every worker, concurrently, and waits
// for it: GET /ready and, when it answers (200, or 503 draining),
// /pd/status (and /pd/info for a prefill worker whose transfer address is
// unknown), each within HealthTimeout. Two consecutive failures take a
// worker out; one success puts it back; a worker that reports the other
// role stays out; one whose /ready says it drains gets no new legs until
// its /ready answers 200.
func (p *Pool) Check(ctx context.Context) { p.check(ctx, p.Workers()) }

// check runs a health round over ws and waits for it.
func (p *Pool) check(ctx context.Context, ws []*Worker) {
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() {
			pr := p.probe(ctx, p.client, w, p.probeTime)
			if ctx.Err() == nil {
				p.apply(w, pr)
			}
		})
	}
	wg.Wait()
}

// probe asks one worker for /ready, then /pd/status, then (a prefill
// worker whose transfer address is unknown) /pd/info.
func (p *Pool) probe(ctx context.Context, c *http.Client, w *Worker, timeout time.Duration) probe {
	var pr probe
	if pr.draining, pr.health = getReady(ctx, c, w.url+"/ready", timeout); pr.health != nil {
		return pr
	}
	p.mu.Lock()
	pr.inflight, pr.sent = w.inflight, w.sentTokens
	needInfo := w.role == Prefill && w.transferAddr == "" && !w.embeddingsOnly
	p.mu.Unlock()
	var st Status
	if pr.statusErr = getJSON(ctx, c, w.url+"/pd/status", timeout, &st); pr.statusErr == nil {
		pr.status = &st
	}
	if needInfo {
		var info Info
		if pr.infoErr = getJSON(ctx, c, w.url+"/pd/info", timeout, &info); pr.infoErr == nil {
			pr.info = &info
		}
	}
	return pr
}

// apply updates a worker from a probe: two consecutive failures take it
// out, one success puts it back; a role that differs from the configured
// one keeps it out.
func (p *Pool) apply(w *Worker, pr probe) {
	if pr.info != nil {
		if err := p.setInfo(w, pr.info); err != nil {
			pr.health = err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case pr.infoErr != nil && w.infoProblem != pr.infoErr.Error(): // log a problem once, not every round
		w.infoProblem = pr.infoErr.Error()
		p.log.Warn("cannot learn the prefill worker's transfer address; requests picking it ask again, and go elsewhere if it still fails",
			"worker", w.url, "err", pr.infoErr)
	case pr.info != nil:
		w.infoProblem = ""
	}
	if pr.status != nil {
		p.seeInstanceLocked(w, pr.status.Instance)
	}
	w.checked = true
	if pr.health == nil && pr.status != nil && pr.status.Role != "" && pr.status.Role != string(w.role) {
		pr.health = fmt.Errorf("worker %s says it is a %s worker in /pd/status, but it was given as --%s", w.url, pr.status.Role, w.role)
	}
	was := w.healthy
	if pr.health != nil {
		w.fails++
		w.problem = pr.health.Error()
		if w.fails >= healthFailuresMax {
			w.healthy = false
		}
	} else {
		w.fails, w.healthy, w.problem = 0, true, ""
		p.setDrainingLocked(w, pr.draining)
		w.haveStatus = pr.status != nil
		if pr.status != nil {
			w.status, w.inflightAtPoll, w.tokensAtPoll = *pr.status, pr.inflight, pr.sent
			if a := pr.status.TransferAddr; w.role == Prefill && a != "" && w.transferAddr != "" && a != w.transferAddr {
				p.log.Warn("prefill worker's transfer address changed (it restarted); using the new one",
					"worker", w.url, "old", w.transferAddr, "new", a)
				w.transferAddr = a
			}
		}
	}
	switch {
	case was && !w.healthy:
		w.transferAddr, w.embeddingsOnly = "", false // learned again when it comes back: it may have restarted elsewhere, or with another model
		p.log.Warn("worker taken out", "worker", w.url, "role", w.role, "failures", w.fails, "err", pr.health)
	case !was && w.healthy:
		p.log.Info("worker in", "worker", w.url, "role", w.role)
	case pr.health != nil && w.fails == 1:
		p.log.Warn("worker health probe failed", "worker", w.url, "role", w.role, "in", w.healthy, "err", pr.health)
	}
	if !w.dropped {
		p.met.workerHealthy.WithLabelValues(w.url, string(w.role)).Set(b2f(w.healthy))
	}
}

// getReady GETs a worker's /ready within timeout: nil for 200; draining
// true (and nil) for a 503 whose body says {"status":"draining"}; any other
// answer is an error.
func getReady(ctx context.Context, c *http.Client, url string, timeout time.Duration) (draining bool, err error) {
	var doc drain.Doc
	status, err := get(ctx, c, url, timeout, &doc)
	switch {
	case err != nil:
		return false, err
	case status == http.StatusServiceUnavailable && doc.Status == drain.Draining.String():
		return true, nil
	case status != http.StatusOK:
		return false, fmt.Errorf("get %s: status %d (%s)", url, status, doc.Status)
	}
	return false, nil
}

// getJSON GETs url within timeout, requires a 200, and decodes the body
// (at most probeBodyBytesMax) into v when v is not nil.
func getJSON(ctx context.Context, c *http.Client, url string, timeout time.Duration, v any) error {
	status, err := get(ctx, c, url, timeout, v)
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("get %s: status %d", url, status)
	}
	return err
}

// get GETs url within timeout and decodes the answer (at most
// probeBodyBytesMax) into v when v is not nil. It returns the status; an
// answer other than 200 is an error unless its body decodes into v.
func get(ctx context.Context, c *http.Client, url string, timeout time.Duration, v any) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, fmt.Errorf("get %s: %w", url, err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, fmt.Errorf("get %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, probeBodyBytesMax+1))
	if err != nil {
		return 0, fmt.Errorf("get %s: read body: %w", url, err)
	}
	if len(body) > probeBodyBytesMax {
		return 0, fmt.Errorf("get %s: answer over %d bytes", url, probeBodyBytesMax)
	}
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			if resp.StatusCode != http.StatusOK {
				return 0, fmt.Errorf("get %s: status %d: %s", url, resp.StatusCode, httpx.Clip(string(body), 200))
			}
			return 0, fmt.Errorf("get %s: decode answer: %w", url, err)
		}
	} else if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("get %s: status %d: %s", url, resp.StatusCode, httpx.Clip(string(body), 200))
	}
	return resp.StatusCode, nil
}
