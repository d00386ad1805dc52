package router

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tandem/internal/api/openai"
)

// clock is a settable time for the breaker's cool-down.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func breakerPool(t *testing.T, c *clock, urls ...string) *pool {
	t.Helper()
	met, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	p := newPool(slog.New(slog.NewTextHandler(io.Discard, nil)), met, breakerConfig{threshold: 3, cooldown: time.Second, now: c.now}, nil, urls)
	for _, w := range p.byRo[RoleDecode] {
		w.healthy = true
	}
	return p
}

// legTo picks a and ends its leg with o; it fails the test when a is not
// the worker picked.
func legTo(t *testing.T, p *pool, a *worker, o outcome) {
	t.Helper()
	w, err := p.pick(RoleDecode, nil, nil)
	if err != nil || w != a {
		t.Fatalf("pick = %v, %v; want %s", w, err, a.url)
	}
	p.done(w, o, "test")
}

func TestBreakerOpensHalfOpensAndCloses(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	p := breakerPool(t, c, "http://a")
	a := p.byRo[RoleDecode][0]
	legTo(t, p, a, outcomeFailure)
	legTo(t, p, a, outcomeSuccess) // a success restarts the count
	for range 3 {
		legTo(t, p, a, outcomeFailure)
	}
	if a.br.state != breakerOpen {
		t.Fatalf("after 3 consecutive failures the breaker is %s, want open", a.br.state)
	}
	if _, err := p.pick(RoleDecode, nil, nil); err == nil || !strings.Contains(err.Error(), "circuit breaker open") {
		t.Fatalf("pick with the breaker open = %v, want an error saying so", err)
	}
	c.t = c.t.Add(time.Second) // the cool-down passed: one probe leg
	probe, err := p.pick(RoleDecode, nil, nil)
	if err != nil || a.br.state != breakerHalfOpen {
		t.Fatalf("pick after the cool-down = %v (breaker %s), want the probe leg, half open", err, a.br.state)
	}
	if _, err := p.pick(RoleDecode, nil, nil); err == nil {
		t.Fatalf("a second pick while the probe is out succeeded, want it refused")
	}
	p.done(probe, outcomeFailure, "still down") // the probe fails: open again, cool-down restarts
	if a.br.state != breakerOpen || a.br.openedAt != c.t {
		t.Fatalf("after a failed probe the breaker is %s opened at %v, want open now", a.br.state, a.br.openedAt)
	}
	c.t = c.t.Add(time.Second)
	probe, _ = p.pick(RoleDecode, nil, nil)
	p.done(probe, outcomeNeutral, "") // cancelled: tells nothing, another probe may go
	probe, err = p.pick(RoleDecode, nil, nil)
	if err != nil {
		t.Fatalf("pick after a cancelled probe = %v, want another probe", err)
	}
	p.done(probe, outcomeSuccess, "")
	if a.br.state != breakerClosed || a.br.consecutive != 0 || a.br.n != 0 {
		t.Fatalf("after a successful probe the breaker is %s (%d consecutive, %d in window), want closed and reset", a.br.state, a.br.consecutive, a.br.n)
	}
}

func TestBreakerOpensOnAFailureRate(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	p := breakerPool(t, c, "http://a")
	a := p.byRo[RoleDecode][0]
	for i := range breakerWindowMin {
		if a.br.state != breakerClosed {
			t.Fatalf("breaker %s after %d alternating legs, want closed until %d", a.br.state, i, breakerWindowMin)
		}
		o := outcomeSuccess
		if i%2 == 1 {
			o = outcomeFailure
		}
		legTo(t, p, a, o)
	}
	if a.br.state != breakerOpen {
		t.Errorf("after %d legs, half of them failed (never 2 in a row), the breaker is %s, want open", breakerWindowMin, a.br.state)
	}
}

func TestLegOutcomes(t *testing.T) {
	api := func(msg string) *openai.Error { return &openai.Error{Message: msg} }
	for _, tc := range []struct {
		name string
		e    *legError
		want outcome
	}{
		{"ok", nil, outcomeSuccess},
		{"refused", &legError{kind: kindUnreachable, cause: errors.New("connection refused")}, outcomeFailure},
		{"cancelled", &legError{kind: kindStream, cancelled: true}, outcomeNeutral},
		{"silent", &legError{kind: kindTimeout, cause: errLegSilent}, outcomeFailure},
		{"request deadline", &legError{kind: kindTimeout, cause: errRequestTimeout}, outcomeNeutral},
		{"client's 400", &legError{kind: kindStatus, status: 400, api: api("bad")}, outcomeSuccess},
		{"429", &legError{kind: kindStatus, status: http.StatusTooManyRequests, api: api("busy")}, outcomeSuccess},
		{"engine 500", &legError{kind: kindStatus, status: 500, api: api("engine failed")}, outcomeFailure},
		{"peer lost", &legError{kind: kindStatus, status: 502, api: api("disaggregated transfer failed: peer_lost: x")}, outcomeNeutral},
		{"alloc timeout", &legError{kind: kindStatus, status: 504, api: api("disaggregated transfer failed: alloc_timeout")}, outcomeNeutral},
		{"shutdown", &legError{kind: kindStatus, status: 503, api: api("disaggregated transfer failed: shutdown")}, outcomeFailure},
		{"error event", &legError{kind: kindErrorEvent, api: api("sequence failed")}, outcomeFailure},
		{"broken stream", &legError{kind: kindStream, cause: io.ErrUnexpectedEOF}, outcomeFailure},
	} {
		if got := legOutcome(tc.e); got != tc.want {
			t.Errorf("%s: outcome %d, want %d", tc.name, got, tc.want)
		}
	}
}
