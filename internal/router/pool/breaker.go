package pool

import (
	"fmt"
	"time"
)

// Circuit breaker: passive health from the router's own legs. A worker
// whose legs fail (it refuses connections, breaks its answers, goes
// silent, answers 5xx for its own reasons) is taken out of picking at
// once, without waiting for the health checks, which probe only every
// HealthInterval and take two failures. Without it a dead worker looks
// idle (its failed legs end at once) and draws more traffic than the
// others.
//
//	closed ──N consecutive failures, or ≥ half of the last 20 legs (10 at least)──▶ open
//	open ──BreakerCooldown passed, the worker is picked──▶ half_open (one probe leg)
//	half_open ──the probe succeeds──▶ closed
//	half_open ──the probe fails──▶ open (the cool-down starts again)
//
// The router says how each leg ended (Done's Outcome): a leg the router
// or the client cancelled counts neither way; a 4xx the worker answered
// counts as a success (it is alive and answering); a disaggregated
// transfer failure the worker reports (its peer was lost or timed out) is
// not held against it, since either side may be at fault.

// breakerState is a circuit breaker's state.
type breakerState int

// The breaker states; the values are those of the state gauge.
const (
	breakerClosed   breakerState = 0
	breakerHalfOpen breakerState = 1
	breakerOpen     breakerState = 2
)

func (s breakerState) String() string {
	switch s {
	case breakerClosed:
		return "closed"
	case breakerHalfOpen:
		return "half_open"
	case breakerOpen:
		return "open"
	}
	return fmt.Sprintf("breaker(%d)", int(s))
}

// Limits of the failure-rate rule.
const (
	// breakerWindow is how many recent leg outcomes the rate looks at.
	breakerWindow = 20
	// breakerWindowMin is how many outcomes the window needs before the
	// rate can open the breaker.
	breakerWindowMin = 10
)

// breaker is one worker's circuit breaker. Its fields are guarded by
// Pool.mu.
type breaker struct {
	state       breakerState
	consecutive int                 // failed legs in a row
	window      [breakerWindow]bool // recent outcomes, true: failed
	n, next     int                 // outcomes in window; the slot written next
	failed      int                 // failures in window
	openedAt    time.Time           // when it last opened
	probing     bool                // half open: the probe leg is out
	why         string              // the failure that opened it
}

// Outcome is how a leg ended, for its worker's circuit breaker.
type Outcome int

// The outcomes of a leg.
const (
	// Neutral: the leg told nothing about the worker (the router or the
	// client cancelled it, it was never sent, the request's own deadline
	// passed, a transfer failure that may be the peer's).
	Neutral Outcome = iota
	// Success: the worker answered (a 4xx the worker chose counts too).
	Success
	// Failure: the worker failed the leg.
	Failure
)

// record adds one outcome; it returns the state to move to, or the
// current one. Callers hold Pool.mu.
func (b *breaker) record(o Outcome, threshold int, why string) breakerState {
	if o == Neutral {
		if b.state == breakerHalfOpen {
			b.probing = false // the probe told nothing: let another through
		}
		return b.state
	}
	failed := o == Failure
	if b.n == breakerWindow && b.window[b.next] {
		b.failed--
	}
	b.window[b.next] = failed
	b.next = (b.next + 1) % breakerWindow
	b.n = min(b.n+1, breakerWindow)
	if failed {
		b.failed++
		b.consecutive++
	} else {
		b.consecutive = 0
	}
	switch {
	case b.state == breakerHalfOpen && failed:
		b.why = why
		return breakerOpen
	case b.state == breakerHalfOpen:
		return breakerClosed
	case b.state == breakerClosed && failed && (b.consecutive >= threshold || (b.n >= breakerWindowMin && 2*b.failed >= b.n)):
		b.why = why
		return breakerOpen
	}
	return b.state
}

// reset empties the window (on closing: a recovered worker starts over).
func (b *breaker) reset() {
	b.consecutive, b.n, b.next, b.failed = 0, 0, 0, 0
	b.window = [breakerWindow]bool{}
}

// pickable reports whether the breaker lets a leg through now: closed, or
// open past its cool-down, or half open with no probe out.
func (b *breaker) pickable(now time.Time, cooldown time.Duration) bool {
	switch b.state {
	case breakerClosed:
		return true
	case breakerOpen:
		return now.Sub(b.openedAt) >= cooldown
	}
	return !b.probing
}

// problem says why the breaker keeps the worker out.
func (b *breaker) problem(now time.Time, cooldown time.Duration) string {
	if b.state == breakerHalfOpen {
		return "circuit breaker half open: a probe leg is out"
	}
	left := max(0, cooldown-now.Sub(b.openedAt)).Round(time.Millisecond)
	return fmt.Sprintf("circuit breaker open for another %s after failed legs (last: %s)", left, b.why)
}
