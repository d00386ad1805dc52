package pool

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// newTestPool is a pool of c's workers with a discarding logger, 3 failures
// to open a breaker and a 1 s cool-down.
func newTestPool(t *testing.T, c Config) *Pool {
	t.Helper()
	c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	c.HealthTimeout, c.InfoTimeout = time.Second, time.Second
	c.BreakerFailures, c.BreakerCooldown = 3, time.Second
	p, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// testPool is a pool of healthy decode workers.
func testPool(t *testing.T, urls ...string) *Pool {
	t.Helper()
	p := newTestPool(t, Config{Decode: urls})
	for _, w := range p.byRo[Decode] {
		w.healthy = true
	}
	return p
}

func TestPickSpreadsABurstBetweenPolls(t *testing.T) {
	p := testPool(t, "http://a", "http://b", "http://c")
	for _, w := range p.byRo[Decode] {
		w.haveStatus, w.status = true, Status{Running: 2}
	}
	p.byRo[Decode][2].status.Running = 4 // c is busier by 2
	counts := map[string]int{}
	for range 8 { // no release: a burst between two polls
		w, err := p.Pick(Decode, nil, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		counts[w.url]++
	}
	lo, hi := 1<<30, 0
	for _, w := range p.byRo[Decode] {
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
		w, err := p.Pick(Decode, nil, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, w.url)
		p.Release(w) // sequential requests: loads stay tied
	}
	if got[0] == got[1] || got[1] == got[2] || got[2] == got[3] {
		t.Errorf("sequential picks over tied workers = %v, want them to alternate", got)
	}
}

func TestPickLoadCountsLegsSinceThePoll(t *testing.T) {
	p := testPool(t, "http://a")
	w := p.byRo[Decode][0]
	w.haveStatus, w.status = true, Status{Waiting: 1, Running: 3}
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
	a, b := p.byRo[Decode][0], p.byRo[Decode][1]
	a.healthy = false
	a.problem = "health: connection refused"
	for range 3 {
		w, err := p.Pick(Decode, nil, nil, 0)
		if err != nil || w != b {
			t.Fatalf("pick with a out = %v, %v; want b", w, err)
		}
	}
	_, err := p.Pick(Decode, []*Worker{b}, nil, 0)
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
	a, b := p.byRo[Decode][0], p.byRo[Decode][1]
	a.haveStatus, b.haveStatus = true, true
	b.status.Waiting = 9 // a is less loaded, but avoided
	if w, err := p.Pick(Decode, nil, []*Worker{a}, 0); err != nil || w != b {
		t.Errorf("pick avoiding a = %v, %v; want b", w, err)
	}
	if w, err := p.Pick(Decode, []*Worker{b}, []*Worker{a}, 0); err != nil || w != a {
		t.Errorf("pick avoiding a, excluding b = %v, %v; want a, the only one left", w, err)
	}
}

// prefillPool is a pool of healthy prefill workers.
func prefillPool(t *testing.T, urls ...string) *Pool {
	t.Helper()
	p := newTestPool(t, Config{Prefill: urls, Decode: []string{"http://d"}})
	for _, w := range p.byRo[Prefill] {
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
	a, b := p.byRo[Prefill][0], p.byRo[Prefill][1]
	a.haveStatus, a.status = true, Status{Running: 1, PrefillQueueTokens: intp(1000)} // one long prompt
	b.haveStatus, b.status = true, Status{Running: 3, Waiting: 2, PrefillQueueTokens: intp(150)}
	w, err := p.Pick(Prefill, nil, nil, 600)
	if err != nil || w != b {
		t.Fatalf("pick = %v, %v; want b (150 queued tokens against 1000, though b has more legs)", w, err)
	}
	// b now holds 150+600 since its report: still under a's 1000.
	if w, _ = p.Pick(Prefill, nil, nil, 600); w != b {
		t.Errorf("second pick = %s, want b (750 < 1000)", w.url)
	}
	// 1350 > 1000: a's turn.
	if w, _ = p.Pick(Prefill, nil, nil, 10); w != a {
		t.Errorf("third pick = %s, want a (1000 < 1350)", w.url)
	}
	// A report resets what was sent since.
	p.apply(b, probe{status: &Status{PrefillQueueTokens: intp(0)}, inflight: b.inflight, sent: b.sentTokens})
	if n, _ := b.queuedTokens(); n != 0 {
		t.Errorf("b's queue after a report of 0 = %d, want 0", n)
	}
	// Ties on tokens: fewer open legs wins.
	a.status.PrefillQueueTokens, a.sentTokens, a.tokensAtPoll = intp(0), 0, 0
	a.inflight, a.inflightAtPoll, b.inflight, b.inflightAtPoll = 5, 0, 0, 0
	if w, _ = p.Pick(Prefill, nil, nil, 0); w != b {
		t.Errorf("tied queues: pick = %s, want b (no open legs against 5)", w.url)
	}
}

// TestPickPrefillFallsBackToLoad: when a candidate does not report its
// queue, every prefill worker is ranked by load as before.
func TestPickPrefillFallsBackToLoad(t *testing.T) {
	p := prefillPool(t, "http://a", "http://b")
	a, b := p.byRo[Prefill][0], p.byRo[Prefill][1]
	a.haveStatus, a.status = true, Status{Running: 0, PrefillQueueTokens: intp(5000)}
	b.haveStatus, b.status = true, Status{Running: 3} // an older worker: no queue reported
	if w, _ := p.Pick(Prefill, nil, nil, 10); w != a {
		t.Errorf("pick = %s, want a (load 0 against 3: b does not report its queue, so queues are ignored)", w.url)
	}
}

// TestLeastQueued: the spill weighs the least-queued pickable worker of
// each role: excluded, unhealthy and open-breaker workers do not count, a
// pickable worker that reports no queue makes the comparison impossible,
// and so does a role with no pickable worker.
func TestLeastQueued(t *testing.T) {
	p := prefillPool(t, "http://a", "http://b")
	a, b := p.byRo[Prefill][0], p.byRo[Prefill][1]
	d := p.byRo[Decode][0]
	d.healthy = true
	a.haveStatus, a.status = true, Status{PrefillQueueTokens: intp(3000)}
	b.haveStatus, b.status = true, Status{PrefillQueueTokens: intp(1000)}
	d.haveStatus, d.status = true, Status{PrefillQueueTokens: intp(40)}
	d.sentTokens = 60 // a local leg sent since its report
	if qp, qd, ok := p.LeastQueued(nil); !ok || qp != 1000 || qd != 100 {
		t.Errorf("leastQueued = %d, %d, %v; want 1000 (b), 100 (40 reported + 60 sent), true", qp, qd, ok)
	}
	if qp, _, ok := p.LeastQueued([]*Worker{b}); !ok || qp != 3000 {
		t.Errorf("with b excluded: %d, %v; want 3000 (a)", qp, ok)
	}
	b.healthy = false
	if qp, _, _ := p.LeastQueued(nil); qp != 3000 {
		t.Errorf("with b out: %d, want 3000 (a)", qp)
	}
	b.healthy = true
	b.br.state, b.br.openedAt = breakerOpen, time.Now()
	if qp, _, _ := p.LeastQueued(nil); qp != 3000 {
		t.Errorf("with b's breaker open: %d, want 3000 (a)", qp)
	}
	b.br.state = breakerClosed
	b.status.PrefillQueueTokens = nil // an older worker
	if _, _, ok := p.LeastQueued(nil); ok {
		t.Error("a prefill worker without a reported queue: want no comparison")
	}
	b.status.PrefillQueueTokens = intp(1000)
	if _, _, ok := p.LeastQueued([]*Worker{d}); ok {
		t.Error("no decode worker pickable: want no comparison")
	}
}
