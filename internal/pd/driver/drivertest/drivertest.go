package drivertest

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tandem/internal/pd/driver"
	"tandem/internal/pd/room"
)

// Host runs an implementation under test.
type Host interface {
	// Do runs f as the driver's caller does: with the lock the
	// implementation's methods expect to be called under (the worker's
	// mutex), or simply (the simulator's one goroutine).
	Do(f func())
	// Wait lets the host run until cond holds and reports whether it did
	// within the host's patience: the simulator runs its event queue
	// (virtual time) until cond holds or it is empty, the worker polls
	// for a bounded wall-clock time. cond is called outside Do.
	Wait(cond func() bool) bool
	// Settle lets what the host has started run its course, so that a
	// report that should not come (a second ComputeDone, say) has come
	// if it would: the simulator empties its event queue; the worker
	// waits (bounded) until its engine has no sequence left.
	Settle()
}

// callTimeout bounds one call into an implementation: the contracts say
// every method returns quickly.
const callTimeout = 30 * time.Second

// Call is one report an implementation made to the Recorder.
type Call[Leg comparable] struct {
	Kind   string // "sent", "kv_ready", "compute_done", "engine_error", "admitted"
	Peer   string
	Lane   driver.Lane
	Err    error
	Room   room.ID
	Leg    Leg
	Frames []driver.KVFrame
	First  driver.Token
	Dest   driver.Pages
	Pages  []int32
	State  []byte // "admitted": the state buffer (the engine's, not a copy)
}

// Recorder is a driver.Reports that records every report, in order. Its
// methods are safe for concurrent use. A report made while the suite is
// inside a call into the implementation (a synchronous call back, which
// the driver forbids: it is not re-entrant) is recorded as reentrant.
type Recorder[Leg comparable] struct {
	mu        sync.Mutex
	calls     []Call[Leg]
	inside    atomic.Int32
	reentrant []string
}

var _ driver.Reports[int] = (*Recorder[int])(nil)

// NewRecorder returns an empty Recorder.
func NewRecorder[Leg comparable]() *Recorder[Leg] { return &Recorder[Leg]{} }

func (r *Recorder[Leg]) add(c Call[Leg]) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inside.Load() > 0 {
		r.reentrant = append(r.reentrant, c.Kind)
	}
	r.calls = append(r.calls, c)
}

// Sent records Driver.Sent.
func (r *Recorder[Leg]) Sent(_ room.Instant, peer string, lane driver.Lane, err error) {
	r.add(Call[Leg]{Kind: "sent", Peer: peer, Lane: lane, Err: err})
}

// KVReady records Driver.KVReady.
func (r *Recorder[Leg]) KVReady(_ room.Instant, id room.ID, leg Leg, frames []driver.KVFrame) {
	r.add(Call[Leg]{Kind: "kv_ready", Room: id, Leg: leg, Frames: frames})
}

// ComputeDone records Driver.ComputeDone.
func (r *Recorder[Leg]) ComputeDone(_ room.Instant, id room.ID, leg Leg, first driver.Token) {
	r.add(Call[Leg]{Kind: "compute_done", Room: id, Leg: leg, First: first})
}

// EngineError records Driver.EngineError.
func (r *Recorder[Leg]) EngineError(_ room.Instant, id room.ID, leg Leg) {
	r.add(Call[Leg]{Kind: "engine_error", Room: id, Leg: leg})
}

// Admitted records Driver.Admitted.
func (r *Recorder[Leg]) Admitted(_ room.Instant, id room.ID, leg Leg, dest driver.Pages, pages []int32, state []byte) {
	r.add(Call[Leg]{Kind: "admitted", Room: id, Leg: leg, Dest: dest, Pages: slices.Clone(pages), State: state})
}

// Calls returns the reports so far that match, in order.
func (r *Recorder[Leg]) Calls(match func(Call[Leg]) bool) []Call[Leg] {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Call[Leg]
	for _, c := range r.calls {
		if match(c) {
			out = append(out, c)
		}
	}
	return out
}

// count returns how many reports match.
func (r *Recorder[Leg]) count(match func(Call[Leg]) bool) int { return len(r.Calls(match)) }

// checkReentrant fails the test for every report made synchronously
// inside a call into the implementation.
func (r *Recorder[Leg]) checkReentrant(t testing.TB) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reentrant) > 0 {
		t.Errorf("the implementation called back into the driver inside a call to it (%s); the driver is not re-entrant",
			strings.Join(r.reentrant, ", "))
		r.reentrant = nil
	}
}

// call runs f, a call into the implementation, through h.Do as the
// driver would, and fails the test if it does not return within
// callTimeout (it blocked, or called back into the driver under the
// caller's lock).
func call[Leg comparable](t testing.TB, h Host, rec *Recorder[Leg], what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	var panicked any
	go func() {
		defer close(done)
		defer func() { panicked = recover() }()
		h.Do(func() {
			rec.inside.Add(1)
			defer rec.inside.Add(-1)
			f()
		})
	}()
	select {
	case <-done:
	case <-time.After(callTimeout):
		t.Fatalf("%s did not return within %v: it blocked, or called back into the driver", what, callTimeout)
	}
	if panicked != nil {
		t.Fatalf("%s panicked: %v", what, panicked)
	}
	rec.checkReentrant(t)
}

// wait fails the test when cond does not come to hold.
func wait(t testing.TB, h Host, what string, cond func() bool) {
	t.Helper()
	if !h.Wait(cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// of returns a matcher for reports of kind about leg.
func of[Leg comparable](kind string, leg Leg) func(Call[Leg]) bool {
	return func(c Call[Leg]) bool { return c.Kind == kind && c.Leg == leg }
}

// roomID returns a room id unique to the suite and n.
func roomID(suite byte, n int) room.ID {
	return room.ID{0: 0xc0, 1: suite, 14: byte(n >> 8), 15: byte(n)}
}

// describe names a report for failure messages.
func describe[Leg comparable](c Call[Leg]) string {
	switch c.Kind {
	case "sent":
		return fmt.Sprintf("sent(%s, lane %d, %v)", c.Peer, c.Lane, c.Err)
	case "kv_ready":
		return fmt.Sprintf("kv_ready(%v, %d frames)", c.Room, len(c.Frames))
	case "admitted":
		return fmt.Sprintf("admitted(%v, pages %v)", c.Room, c.Pages)
	}
	return fmt.Sprintf("%s(%v)", c.Kind, c.Room)
}
