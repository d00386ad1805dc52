package router

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func testPool(t *testing.T, urls ...string) *pool {
	t.Helper()
	met, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	p := newPool(slog.New(slog.NewTextHandler(io.Discard, nil)), met, breakerConfig{threshold: 3, cooldown: time.Second, now: time.Now}, nil, urls)
	for _, w := range p.byRo[RoleDecode] {
		w.healthy = true
	}
	return p
}

func TestPickSpreadsABurstBetweenPolls(t *testing.T) {
	p := testPool(t, "http://a", "http://b", "http://c")
	for _, w := range p.byRo[RoleDecode] {
		w.haveStatus, w.status = true, WorkerStatus{Running: 2}
	}
	p.byRo[RoleDecode][2].status.Running = 4 // c is busier by 2
	counts := map[string]int{}
	for range 8 { // no release: a burst between two polls
		w, err := p.pick(RoleDecode, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		counts[w.url]++
	}
	lo, hi := 1<<30, 0
	for _, w := range p.byRo[RoleDecode] {
		lo, hi = min(lo, w.load()), max(hi, w.load())
	}
	if hi-lo > 1 || counts["http://c"] > 2 {
		t.Errorf("8 picks without release over loads 2, 2, 4: picks %v leave loads from %d to %d; want them within 1, c picked at most twice", counts, lo, hi)
	}
}

func TestPickTiesRoundRobin(t *testing.T) {
	p := testPool(t, "http://a", "http://b")
	var got []string
	for range 4 {
		w, err := p.pick(RoleDecode, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, w.url)
		p.release(w) // sequential requests: loads stay tied
	}
	if got[0] == got[1] || got[1] == got[2] || got[2] == got[3] {
		t.Errorf("sequential picks over tied workers = %v, want them to alternate", got)
	}
}

func TestPickLoadCountsLegsSinceThePoll(t *testing.T) {
	p := testPool(t, "http://a")
	w := p.byRo[RoleDecode][0]
	w.haveStatus, w.status = true, WorkerStatus{Waiting: 1, Running: 3}
	cases := []struct {
		inflight, atPoll, want int
	}{
		{0, 0, 4},
		{2, 0, 6}, // two legs sent since the report
		{1, 3, 2}, // two of the reported legs ended since
		{0, 9, 0}, // never below zero
	}
	for _, tc := range cases {
		w.inflight, w.inflightAtPoll = tc.inflight, tc.atPoll
		if got := w.load(); got != tc.want {
			t.Errorf("load(report 4, inflight %d, at poll %d) = %d, want %d", tc.inflight, tc.atPoll, got, tc.want)
		}
	}
	w.haveStatus = false
	w.inflight = 5
	if got := w.load(); got != 5 {
		t.Errorf("load without a report, inflight 5 = %d, want 5", got)
	}
}

func TestPickSkipsUnhealthyAndExcluded(t *testing.T) {
	p := testPool(t, "http://a", "http://b")
	a, b := p.byRo[RoleDecode][0], p.byRo[RoleDecode][1]
	a.healthy = false
	a.problem = "health: connection refused"
	for range 3 {
		w, err := p.pick(RoleDecode, nil, nil)
		if err != nil || w != b {
			t.Fatalf("pick with a out = %v, %v; want b", w, err)
		}
	}
	_, err := p.pick(RoleDecode, []*worker{b}, nil)
	if err == nil {
		t.Fatalf("pick with a out and b excluded succeeded, want an error")
	}
	for _, want := range []string{"no healthy worker of role decode", "http://a: health: connection refused", "http://b: already failed"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("pick error %q, want it to contain %q", err, want)
		}
	}
}

func TestPickAvoidsOnlyWhileThereIsAnother(t *testing.T) {
	p := testPool(t, "http://a", "http://b")
	a, b := p.byRo[RoleDecode][0], p.byRo[RoleDecode][1]
	a.haveStatus, b.haveStatus = true, true
	b.status.Waiting = 9 // a is less loaded, but avoided
	if w, err := p.pick(RoleDecode, nil, []*worker{a}); err != nil || w != b {
		t.Errorf("pick avoiding a = %v, %v; want b", w, err)
	}
	if w, err := p.pick(RoleDecode, []*worker{b}, []*worker{a}); err != nil || w != a {
		t.Errorf("pick avoiding a, excluding b = %v, %v; want a, the only one left", w, err)
	}
}

func TestRoomIDsAreUniqueHex(t *testing.T) {
	seen := make(map[string]bool, 10000)
	for i := range 10000 {
		id := newRoomID()
		if len(id) != 32 {
			t.Fatalf("newRoomID() = %q, want 32 hex digits", id)
		}
		for _, c := range id {
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				t.Fatalf("newRoomID() = %q, want lower-case hex digits only", id)
			}
		}
		if seen[id] {
			t.Fatalf("newRoomID() repeated %q after %d ids", id, i)
		}
		seen[id] = true
	}
}

// prefillPool is a pool of healthy prefill workers.
func prefillPool(t *testing.T, urls ...string) *pool {
	t.Helper()
	met, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	p := newPool(slog.New(slog.NewTextHandler(io.Discard, nil)), met, breakerConfig{threshold: 3, cooldown: time.Second, now: time.Now}, urls, []string{"http://d"})
	for _, w := range p.byRo[RolePrefill] {
		w.healthy = true
	}
	return p
}

func intp(n int) *int { return &n }

// TestPickPrefillByQueuedTokens: prefill workers are ranked by their
// reported prefill queue, not by open legs: a worker with one long prompt
// queued loses to one with several short ones; the tokens sent since the
// report count; equal queues fall back to load.
func TestPickPrefillByQueuedTokens(t *testing.T) {
	p := prefillPool(t, "http://a", "http://b")
	a, b := p.byRo[RolePrefill][0], p.byRo[RolePrefill][1]
	a.haveStatus, a.status = true, WorkerStatus{Running: 1, PrefillQueueTokens: intp(1000)} // one long prompt
	b.haveStatus, b.status = true, WorkerStatus{Running: 3, Waiting: 2, PrefillQueueTokens: intp(150)}
	w, err := p.pickFor(RolePrefill, nil, nil, 600)
	if err != nil || w != b {
		t.Fatalf("pick = %v, %v; want b (150 queued tokens against 1000, though b has more legs)", w, err)
	}
	// b now holds 150+600 since its report: still under a's 1000.
	if w, _ = p.pickFor(RolePrefill, nil, nil, 600); w != b {
		t.Errorf("second pick = %s, want b (750 < 1000)", w.url)
	}
	// 1350 > 1000: a's turn.
	if w, _ = p.pickFor(RolePrefill, nil, nil, 10); w != a {
		t.Errorf("third pick = %s, want a (1000 < 1350)", w.url)
	}
	// A report resets what was sent since.
	p.apply(b, probe{status: &WorkerStatus{PrefillQueueTokens: intp(0)}, inflight: b.inflight, sent: b.sentTokens})
	if n, _ := b.queuedTokens(); n != 0 {
		t.Errorf("b's queue after a report of 0 = %d, want 0", n)
	}
	// Ties on tokens: fewer open legs wins.
	a.status.PrefillQueueTokens, a.sentTokens, a.tokensAtPoll = intp(0), 0, 0
	a.inflight, a.inflightAtPoll, b.inflight, b.inflightAtPoll = 5, 0, 0, 0
	if w, _ = p.pickFor(RolePrefill, nil, nil, 0); w != b {
		t.Errorf("tied queues: pick = %s, want b (no open legs against 5)", w.url)
	}
}

// TestPickPrefillFallsBackToLoad: when a candidate does not report its
// queue, every prefill worker is ranked by load as before.
func TestPickPrefillFallsBackToLoad(t *testing.T) {
	p := prefillPool(t, "http://a", "http://b")
	a, b := p.byRo[RolePrefill][0], p.byRo[RolePrefill][1]
	a.haveStatus, a.status = true, WorkerStatus{Running: 0, PrefillQueueTokens: intp(5000)}
	b.haveStatus, b.status = true, WorkerStatus{Running: 3} // an older worker: no queue reported
	if w, _ := p.pickFor(RolePrefill, nil, nil, 10); w != a {
		t.Errorf("pick = %s, want a (load 0 against 3: b does not report its queue, so queues are ignored)", w.url)
	}
}
