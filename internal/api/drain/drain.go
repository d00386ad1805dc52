package drain

import (
	"log/slog"
	"net/http"
	"sync"
	"time"

	"tandem/internal/api/httpx"
	"tandem/internal/api/openai"
	"tandem/internal/invariant"
)

// Phase is where a process is in its life; see the package doc.
type Phase int32

// The phases, in order.
const (
	Starting Phase = iota
	Ready
	Settling
	Draining
)

// String names the phase as /health and /ready say it.
func (p Phase) String() string {
	switch p {
	case Starting:
		return "starting"
	case Ready:
		return "ok"
	case Settling, Draining:
		return "draining"
	}
	return "unknown"
}

// Defaults of the drain flags (--drain-settle, --drain-timeout) of every
// serving command.
const (
	// DefaultSettle is how long a process keeps serving after SIGTERM
	// while routers and load balancers notice it is no longer ready: a
	// router probes every second, a Kubernetes endpoint update takes a
	// few; SGLang's gateway settles 5 s, Dynamo 5 s.
	DefaultSettle = 5 * time.Second
	// DefaultTimeout bounds the work a draining process finishes: llm-d's
	// PD guide gives vLLM 60 s (30 s without PD, the extra for KV
	// transfers), KServe 45 s; Dynamo's 900 s suits GPUs serving long
	// generations. A CPU worker's longest request is longer than a GPU's,
	// but a deployment that needs more says so with the flag.
	DefaultTimeout = 60 * time.Second
)

// Code is the error code of the draining answer.
const Code = "draining"

// RetryAfter is the Retry-After of the draining answer, in seconds: the
// request may go to another instance at once.
const RetryAfter = 1

// pollInterval is how often Drain looks at work held outside the gate
// (Config.Busy).
const pollInterval = 25 * time.Millisecond

// Gate holds a process's phase and counts the work it admitted. The zero
// value is not usable: make one with New. It is safe for concurrent use.
type Gate struct {
	mu    sync.Mutex
	phase Phase
	held  int
	idle  chan struct{} // closed when held falls to 0; replaced when it rises from 0
}

// New returns a gate in phase Starting.
func New() *Gate {
	idle := make(chan struct{})
	close(idle)
	return &Gate{idle: idle}
}

// Phase returns the current phase.
func (g *Gate) Phase() Phase {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.phase
}

// SetReady moves a Starting gate to Ready (ready true) or a Ready one back
// to Starting (ready false, for tests); it never undoes a drain.
func (g *Gate) SetReady(ready bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case ready && g.phase == Starting:
		g.phase = Ready
	case !ready && g.phase == Ready:
		g.phase = Starting
	}
}

// Enter admits one unit of work unless the phase refuses it (Starting or
// Draining), and returns the phase it saw. The caller ends admitted work
// with Leave exactly once.
func (g *Gate) Enter() (Phase, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.phase == Starting || g.phase == Draining {
		return g.phase, false
	}
	if g.held == 0 {
		g.idle = make(chan struct{})
	}
	g.held++
	return g.phase, true
}

// Leave ends one unit of work Enter admitted.
func (g *Gate) Leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	invariant.Check(g.held > 0, "drain", "Leave without Enter")
	g.held--
	if g.held == 0 {
		close(g.idle)
	}
}

// Held returns the work admitted and not yet ended.
func (g *Gate) Held() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held
}

// Admit is Enter for an HTTP handler: when the work is refused it writes
// the answer (503 not ready while Starting, the draining Refusal while
// Draining) and returns false. An admitted handler calls Leave when done.
func (g *Gate) Admit(w http.ResponseWriter) bool {
	p, ok := g.Enter()
	switch {
	case ok:
		return true
	case p == Draining:
		Refuse(w)
	default:
		w.Header().Set("Retry-After", "1")
		httpx.WriteError(w, openai.Unavailable("the model is not ready yet (starting)"))
	}
	return false
}

// Refusal is the draining answer's error: 503, type
// service_unavailable_error, code "draining".
func Refusal() *openai.Error {
	return &openai.Error{Status: http.StatusServiceUnavailable, Type: openai.TypeUnavailable, Code: Code,
		Message: "The server is draining (stopping or restarting) and takes no new requests: send the request to another instance."}
}

// Refuse writes the draining answer: Refusal, with Retry-After and
// Connection: close.
func Refuse(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	w.Header().Set("Connection", "close")
	httpx.WriteError(w, Refusal())
}

// IsRefusal reports whether an answer's status and error code are the
// draining answer's.
func IsRefusal(status int, code string) bool {
	return status == http.StatusServiceUnavailable && code == Code
}

// CloseConnections wraps h so that, from the start of the drain (phase
// Settling on), every answer carries Connection: close: net/http then
// closes the connection after it, and clients open their next one
// elsewhere (or to whoever takes this one's listening socket).
func (g *Gate) CloseConnections(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.Phase() >= Settling {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}

// Doc is the body of /health and of /ready.
type Doc struct {
	Status string `json:"status"` // "ok", "starting" or "draining"
}

// ServeHealth answers liveness: 200 in every phase, with the phase's name.
func (g *Gate) ServeHealth(w http.ResponseWriter, _ *http.Request) {
	httpx.WriteJSON(w, http.StatusOK, Doc{Status: g.Phase().String()})
}

// ServeReady answers readiness: 200 while Ready, else 503, with the
// phase's name.
func (g *Gate) ServeReady(w http.ResponseWriter, _ *http.Request) {
	p := g.Phase()
	status := http.StatusOK
	if p != Ready {
		status = http.StatusServiceUnavailable
	}
	httpx.WriteJSON(w, status, Doc{Status: p.String()})
}

// Config is one drain.
type Config struct {
	// Settle is how long work is still admitted once the drain began
	// (--drain-settle); Timeout how long admitted work may then run
	// (--drain-timeout).
	Settle, Timeout time.Duration
	// Hurry, when closed, ends the settle window at once (a second
	// SIGTERM or SIGINT); nil: never.
	Hurry <-chan struct{}
	// Busy returns work the process holds beyond the gate's count (a PD
	// worker's live rooms); nil: none.
	Busy func() int
	// Refusing, when set, is called once as the settle window ends and
	// refusals begin (a router closes its share of a common listening
	// socket there).
	Refusing func()
	// Logger receives the drain's steps; default: none.
	Logger *slog.Logger
}

// Result is how a drain went.
type Result struct {
	// Settled is how long the settle window lasted; Drained how long the
	// work took after it, up to the deadline.
	Settled, Drained time.Duration
	// Left is the work still held at the deadline (0: everything ended).
	Left int
}

// Drain runs the drain: Settling at once for c.Settle (or until c.Hurry),
// then Draining until the gate's work and c.Busy are both zero or
// c.Timeout has passed. It returns what it saw; the caller ends what is
// left and exits. Drain on a gate already draining runs again (a second
// call is the caller's mistake, but harmless).
func (g *Gate) Drain(c Config) Result {
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	busy := c.Busy
	if busy == nil {
		busy = func() int { return 0 }
	}
	start := time.Now()
	g.mu.Lock()
	g.phase = max(g.phase, Settling)
	held := g.held
	g.mu.Unlock()
	log.Info("draining: not ready; still serving while routers notice (a second SIGINT or SIGTERM skips the wait)",
		"settle", c.Settle, "timeout", c.Timeout, "requests", held, "busy", busy())
	if c.Settle > 0 {
		t := time.NewTimer(c.Settle)
		select {
		case <-t.C:
		case <-c.Hurry:
			t.Stop()
			log.Info("draining: settle window cut short by a second signal")
		}
	}
	g.mu.Lock()
	g.phase = Draining
	g.mu.Unlock()
	var res Result
	res.Settled = time.Since(start)
	if c.Refusing != nil {
		c.Refusing()
	}
	log.Info("draining: refusing new work; finishing what is held", "requests", g.Held(), "busy", busy())
	refuseStart := time.Now()
	deadline := time.NewTimer(c.Timeout)
	defer deadline.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		g.mu.Lock()
		held, idle := g.held, g.idle
		g.mu.Unlock()
		if held == 0 {
			idle = nil // closed: only the busy count can still change
		}
		left := held + busy()
		if left == 0 {
			res.Drained = time.Since(refuseStart)
			log.Info("drained: nothing left", "settled", res.Settled, "drained", res.Drained)
			return res
		}
		select {
		case <-deadline.C:
			res.Drained, res.Left = time.Since(refuseStart), left
			log.Warn("drain timeout: ending what is left with an error", "requests", held, "busy", left-held, "timeout", c.Timeout)
			return res
		case <-idle:
		case <-tick.C:
		}
	}
}
