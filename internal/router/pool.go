package router

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

	"tandem/internal/api/httpx"
	"tandem/internal/pd/debugdoc"
)

// Role is the part a worker plays in the handoff: "prefill" or "decode".
type Role string

// The worker roles.
const (
	RolePrefill Role = "prefill"
	RoleDecode  Role = "decode"
)

// WorkerStatus is a worker's answer to GET /pd/status: its queue depths and
// page use, polled with each health check and used to pick the least
// loaded worker.
type WorkerStatus struct {
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
	// TransferAddr is the worker's transfer address now. A prefill worker
	// that restarted listens on a new one; the router notices here.
	TransferAddr string `json:"transfer_addr,omitempty"`
}

// WorkerInfo is a worker's answer to GET /pd/info. A prefill worker's
// TransferAddr (host:port) is what decode legs carry in X-Tandem-Prefill.
type WorkerInfo struct {
	Role         string `json:"role"`
	TransferAddr string `json:"transfer_addr"`
	Model        string `json:"model"`
}

// worker is one configured worker and what the router knows of it. The
// fields below url and role are guarded by pool.mu.
type worker struct {
	url  string
	role Role

	healthy        bool
	fails          int // consecutive failed probes
	problem        string
	status         WorkerStatus
	haveStatus     bool
	inflight       int // the router's legs on this worker now
	inflightAtPoll int // inflight when status was read
	sentTokens     int // prompt tokens of the prefill and local legs the router sent, in all
	tokensAtPoll   int // sentTokens when status was read
	transferAddr   string
	model          string
	infoProblem    string  // the last /pd/info failure, logged once
	br             breaker // passive health from the router's own legs
}

// load is the worker's reported queue plus the legs the router sent (or
// finished) since that report; without a report, the router's legs alone.
// Callers hold pool.mu.
func (w *worker) load() int {
	if !w.haveStatus {
		return w.inflight
	}
	return max(0, w.status.Waiting+w.status.Running+w.inflight-w.inflightAtPoll)
}

// queuedTokens is the worker's reported prefill queue plus the prompt
// tokens of the legs the router sent since that report (an over-estimate
// until the next report: legs finished since are not taken off), and
// whether the worker reports it at all. Callers hold pool.mu.
func (w *worker) queuedTokens() (int, bool) {
	if !w.haveStatus || w.status.PrefillQueueTokens == nil {
		return 0, false
	}
	return max(0, *w.status.PrefillQueueTokens+w.sentTokens-w.tokensAtPoll), true
}

// pool holds the workers of both roles. It is safe for concurrent use.
type pool struct {
	log       *slog.Logger
	met       *metrics
	now       func() time.Time
	threshold int           // consecutive failed legs that open a breaker
	cooldown  time.Duration // how long an open breaker keeps a worker out
	mu        sync.Mutex
	byRo      map[Role][]*worker // in configured order
	rr        map[Role]int       // round-robin counter for ties
}

// breakerConfig is what newPool needs to know of the circuit breakers.
type breakerConfig struct {
	threshold int
	cooldown  time.Duration
	now       func() time.Time
}

func newPool(log *slog.Logger, met *metrics, bc breakerConfig, prefill, decode []string) *pool {
	p := &pool{log: log, met: met, now: bc.now, threshold: bc.threshold, cooldown: bc.cooldown,
		byRo: map[Role][]*worker{}, rr: map[Role]int{}}
	for _, r := range []struct {
		role Role
		urls []string
	}{{RolePrefill, prefill}, {RoleDecode, decode}} {
		for _, u := range r.urls {
			w := &worker{url: u, role: r.role, problem: "not checked yet"}
			p.byRo[r.role] = append(p.byRo[r.role], w)
			met.workerHealthy.WithLabelValues(u, string(r.role)).Set(0)
			met.workerInflight.WithLabelValues(u, string(r.role)).Set(0)
			met.breakerState.WithLabelValues(u, string(r.role)).Set(float64(breakerClosed))
		}
	}
	return p
}

// all returns every worker, prefill first, in configured order.
func (p *pool) all() []*worker {
	return append(append([]*worker(nil), p.byRo[RolePrefill]...), p.byRo[RoleDecode]...)
}

// errNoWorker is the cause of a pick that found no healthy worker.
var errNoWorker = errors.New("no healthy worker")

// publicError is err's text for a client: a noWorkerError's Public, else
// a phrase that names no worker.
func publicError(err error) string {
	var nw *noWorkerError
	if errors.As(err, &nw) {
		return nw.Public()
	}
	return "no worker could be picked"
}

// pick chooses the least loaded healthy worker of role whose circuit
// breaker lets a leg through, never one in exclude and one in avoid only
// when no other is left, breaking ties round-robin, and counts a leg on it
// (release undoes that). A worker picked while its breaker is open (past
// its cool-down) gets the one half-open probe leg.
func (p *pool) pick(role Role, exclude, avoid []*worker) (*worker, error) {
	return p.pickFor(role, exclude, avoid, 0)
}

// pickFor is pick for a leg whose prompt has tokens tokens (0: unknown,
// or computed elsewhere). Prefill workers are ranked by their queued
// prefill tokens, then by load, when every candidate reports its queue;
// otherwise (and for decode workers) by load alone. The picked worker's
// queue grows by tokens until its next report.
func (p *pool) pickFor(role Role, exclude, avoid []*worker, tokens int) (*worker, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	var cands []*worker
	byTokens := role == RolePrefill
	for _, w := range p.byRo[role] {
		if !w.healthy || containsWorker(exclude, w) || !w.br.pickable(now, p.cooldown) {
			continue
		}
		cands = append(cands, w)
		if _, ok := w.queuedTokens(); !ok {
			byTokens = false
		}
	}
	// key orders candidates: avoided last, then fewer queued tokens (when
	// ranked by them), then less load.
	key := func(w *worker) [3]int {
		k := [3]int{0, 0, w.load()}
		if containsWorker(avoid, w) {
			k[0] = 1
		}
		if byTokens {
			k[1], _ = w.queuedTokens()
		}
		return k
	}
	var best []*worker
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
	return fmt.Sprintf("pick %s worker: %v of role %s (%d configured; %s)", e.role, errNoWorker, e.role, e.configured, e.detail)
}

func (e *noWorkerError) Unwrap() error { return errNoWorker }

// Public says what a client is told: the role and the counts, no URLs.
func (e *noWorkerError) Public() string {
	s := fmt.Sprintf("%v of role %s (%d configured", errNoWorker, e.role, e.configured)
	if e.excluded > 0 {
		s += fmt.Sprintf(", %d already failed this request", e.excluded)
	}
	return s + ")"
}

// noneReason explains why no worker of role can be picked. Callers hold mu.
func (p *pool) noneReason(role Role, exclude []*worker) *noWorkerError {
	ws := p.byRo[role]
	parts := make([]string, 0, len(ws))
	e := &noWorkerError{role: role, configured: len(ws)}
	now := p.now()
	for _, w := range ws {
		why := w.problem
		if w.healthy && !w.br.pickable(now, p.cooldown) {
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

func containsWorker(list []*worker, w *worker) bool {
	for _, x := range list {
		if x == w {
			return true
		}
	}
	return false
}

// release ends a leg counted by pick that told nothing about the worker
// (it was never sent, or was cancelled).
func (p *pool) release(w *worker) { p.done(w, outcomeNeutral, "") }

// done ends a leg counted by pick and feeds its outcome to w's circuit
// breaker; why is the failure, for the log.
func (p *pool) done(w *worker, o outcome, why string) {
	p.mu.Lock()
	w.inflight--
	n := w.inflight
	if to := w.br.record(o, p.threshold, why); to != w.br.state {
		p.moveLocked(w, to)
	}
	p.mu.Unlock()
	p.met.workerInflight.WithLabelValues(w.url, string(w.role)).Set(float64(n))
}

// failed feeds a failure found in a leg's answer (after its request
// succeeded: an error event, a malformed chunk) to w's circuit breaker.
func (p *pool) failed(w *worker, why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if to := w.br.record(outcomeFailure, p.threshold, why); to != w.br.state {
		p.moveLocked(w, to)
	}
}

// moveLocked moves w's breaker to state to, counting and logging the
// transition. Callers hold mu.
func (p *pool) moveLocked(w *worker, to breakerState) {
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
	p.met.breakerState.WithLabelValues(w.url, string(w.role)).Set(float64(to))
	p.met.breakerTransitions.WithLabelValues(w.url, string(w.role), to.String()).Inc()
}

// healthyCount returns how many workers of role are in.
func (p *pool) healthyCount(role Role) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, w := range p.byRo[role] {
		if w.healthy {
			n++
		}
	}
	return n
}

// debugWorkers returns every worker's health for /debug/rooms.
func (p *pool) debugWorkers() []debugdoc.Worker {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []debugdoc.Worker
	for _, w := range append(append([]*worker(nil), p.byRo[RolePrefill]...), p.byRo[RoleDecode]...) {
		dw := debugdoc.Worker{URL: w.url, Role: string(w.role), Healthy: w.healthy, Problem: w.problem,
			Breaker: w.br.state.String(), Failures: w.br.consecutive, Inflight: w.inflight}
		if n, ok := w.queuedTokens(); ok {
			dw.PrefillQueueTokens = &n
		}
		out = append(out, dw)
	}
	return out
}

// transferAddr returns a prefill worker's transfer address, if known.
func (p *pool) transferAddr(w *worker) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return w.transferAddr
}

// setInfo records a worker's /pd/info answer. A role that differs from the
// configured one takes the worker out: pairing it would fail every request.
func (p *pool) setInfo(w *worker, info *WorkerInfo) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if info.Role != "" && info.Role != string(w.role) {
		return fmt.Errorf("worker %s says it is a %s worker in /pd/info, but it was given as --%s", w.url, info.Role, w.role)
	}
	if w.role == RolePrefill && info.TransferAddr == "" {
		return fmt.Errorf("prefill worker %s gave no transfer_addr in /pd/info", w.url)
	}
	w.transferAddr, w.model = info.TransferAddr, info.Model
	return nil
}

// probe is the outcome of one health round for one worker.
type probe struct {
	health    error
	status    *WorkerStatus
	statusErr error
	info      *WorkerInfo
	infoErr   error
	inflight  int // the router's legs on the worker when status was read
	sent      int // its sentTokens then
}

// check runs one health round over every worker, concurrently, and waits
// for it. Each probe is bounded by timeout.
func (p *pool) check(ctx context.Context, c *http.Client, timeout time.Duration) {
	var wg sync.WaitGroup
	for _, w := range p.all() {
		wg.Go(func() {
			pr := p.probe(ctx, c, w, timeout)
			if ctx.Err() == nil {
				p.apply(w, pr)
			}
		})
	}
	wg.Wait()
}

// probe asks one worker for /health, then /pd/status, then (a prefill
// worker whose transfer address is unknown) /pd/info.
func (p *pool) probe(ctx context.Context, c *http.Client, w *worker, timeout time.Duration) probe {
	var pr probe
	if pr.health = getJSON(ctx, c, w.url+"/health", timeout, nil); pr.health != nil {
		return pr
	}
	p.mu.Lock()
	pr.inflight, pr.sent = w.inflight, w.sentTokens
	needInfo := w.role == RolePrefill && w.transferAddr == ""
	p.mu.Unlock()
	var st WorkerStatus
	if pr.statusErr = getJSON(ctx, c, w.url+"/pd/status", timeout, &st); pr.statusErr == nil {
		pr.status = &st
	}
	if needInfo {
		var info WorkerInfo
		if pr.infoErr = getJSON(ctx, c, w.url+"/pd/info", timeout, &info); pr.infoErr == nil {
			pr.info = &info
		}
	}
	return pr
}

// apply updates a worker from a probe: two consecutive failures take it
// out, one success puts it back; a role that differs from the configured
// one keeps it out.
func (p *pool) apply(w *worker, pr probe) {
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
		w.haveStatus = pr.status != nil
		if pr.status != nil {
			w.status, w.inflightAtPoll, w.tokensAtPoll = *pr.status, pr.inflight, pr.sent
			if a := pr.status.TransferAddr; w.role == RolePrefill && a != "" && w.transferAddr != "" && a != w.transferAddr {
				p.log.Warn("prefill worker's transfer address changed (it restarted); using the new one",
					"worker", w.url, "old", w.transferAddr, "new", a)
				w.transferAddr = a
			}
		}
	}
	switch {
	case was && !w.healthy:
		w.transferAddr = "" // learned again when it comes back: it may have restarted elsewhere
		p.log.Warn("worker taken out", "worker", w.url, "role", w.role, "failures", w.fails, "err", pr.health)
	case !was && w.healthy:
		p.log.Info("worker in", "worker", w.url, "role", w.role)
	case pr.health != nil && w.fails == 1:
		p.log.Warn("worker health probe failed", "worker", w.url, "role", w.role, "in", w.healthy, "err", pr.health)
	}
	v := 0.0
	if w.healthy {
		v = 1
	}
	p.met.workerHealthy.WithLabelValues(w.url, string(w.role)).Set(v)
}

// getJSON GETs url within timeout, requires a 200, and decodes the body
// (at most probeBodyBytesMax) into v when v is not nil.
func getJSON(ctx context.Context, c *http.Client, url string, timeout time.Duration, v any) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("get %s: %w", url, err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("get %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, probeBodyBytesMax+1))
	if err != nil {
		return fmt.Errorf("get %s: read body: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("get %s: status %d: %s", url, resp.StatusCode, httpx.Clip(string(body), 200))
	}
	if len(body) > probeBodyBytesMax {
		return fmt.Errorf("get %s: answer over %d bytes", url, probeBodyBytesMax)
	}
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			return fmt.Errorf("get %s: decode answer: %w", url, err)
		}
	}
	return nil
}
