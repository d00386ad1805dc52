package pool

import (
	"strings"
	"testing"
	"time"
)

// clock is a settable time for the breaker's cool-down.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func breakerPool(t *testing.T, c *clock, urls ...string) *Pool {
	t.Helper()
	p := newTestPool(t, Config{Decode: urls, Now: c.now})
	for _, w := range p.byRo[Decode] {
		w.healthy = true
	}
	return p
}

// legTo picks a and ends its leg with o; it fails the test when a is not
// the worker picked.
func legTo(t *testing.T, p *Pool, a *Worker, o Outcome) {
	t.Helper()
	w, err := p.Pick(Decode, nil, nil, 0)
	if err != nil || w != a {
		t.Fatalf("pick = %v, %v; want %s", w, err, a.url)
	}
	p.Done(w, o, "test")
}

func TestBreakerOpensHalfOpensAndCloses(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	p := breakerPool(t, c, "http://a")
	a := p.byRo[Decode][0]
	legTo(t, p, a, Failure)
	legTo(t, p, a, Success) // a success restarts the count
	for range 3 {
		legTo(t, p, a, Failure)
	}
	if a.br.state != breakerOpen {
		t.Fatalf("after 3 consecutive failures the breaker is %s, want open", a.br.state)
	}
	if _, err := p.Pick(Decode, nil, nil, 0); err == nil || !strings.Contains(err.Error(), "circuit breaker open") {
		t.Fatalf("pick with the breaker open = %v, want an error saying so", err)
	}
	c.t = c.t.Add(time.Second) // the cool-down passed: one probe leg
	probe, err := p.Pick(Decode, nil, nil, 0)
	if err != nil || a.br.state != breakerHalfOpen {
		t.Fatalf("pick after the cool-down = %v (breaker %s), want the probe leg, half open", err, a.br.state)
	}
	if _, err := p.Pick(Decode, nil, nil, 0); err == nil {
		t.Fatalf("a second pick while the probe is out succeeded, want it refused")
	}
	p.Done(probe, Failure, "still down") // the probe fails: open again, cool-down restarts
	if a.br.state != breakerOpen || a.br.openedAt != c.t {
		t.Fatalf("after a failed probe the breaker is %s opened at %v, want open now", a.br.state, a.br.openedAt)
	}
	c.t = c.t.Add(time.Second)
	probe, _ = p.Pick(Decode, nil, nil, 0)
	p.Done(probe, Neutral, "") // cancelled: tells nothing, another probe may go
	probe, err = p.Pick(Decode, nil, nil, 0)
	if err != nil {
		t.Fatalf("pick after a cancelled probe = %v, want another probe", err)
	}
	p.Done(probe, Success, "")
	if a.br.state != breakerClosed || a.br.consecutive != 0 || a.br.n != 0 {
		t.Fatalf("after a successful probe the breaker is %s (%d consecutive, %d in window), want closed and reset", a.br.state, a.br.consecutive, a.br.n)
	}
}

func TestBreakerOpensOnAFailureRate(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	p := breakerPool(t, c, "http://a")
	a := p.byRo[Decode][0]
	for i := range breakerWindowMin {
		if a.br.state != breakerClosed {
			t.Fatalf("breaker %s after %d alternating legs, want closed until %d", a.br.state, i, breakerWindowMin)
		}
		o := Success
		if i%2 == 1 {
			o = Failure
		}
		legTo(t, p, a, o)
	}
	if a.br.state != breakerOpen {
		t.Errorf("after %d legs, half of them failed (never 2 in a row), the breaker is %s, want open", breakerWindowMin, a.br.state)
	}
}
