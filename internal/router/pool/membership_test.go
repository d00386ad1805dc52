package pool

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"tandem/internal/api/httpx"
)

// instanceServer is a decode worker that answers /ready 200 and reports
// the instance id held by id in /pd/status.
func instanceServer(t *testing.T, id *atomic.Value) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	mux.HandleFunc("GET /pd/status", func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteJSON(w, http.StatusOK, map[string]any{"role": "decode", "instance": id.Load().(string)})
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts
}

// pickAll picks n decode legs and releases each at once, counting by URL.
func pickAll(t *testing.T, p *Pool, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		w, err := p.Pick(Decode, nil, nil, 0)
		if err != nil {
			got["error"]++
			continue
		}
		got[w.URL()]++
		p.Release(w)
	}
	return got
}

// TestReconcileJoinLeaveDrop: a member listed Ready joins out of service
// and takes legs once CheckNew's probe answers; one that leaves gets no new
// leg while its leg in flight finishes, is still shown (Left) and probed
// until that leg ends, and is then dropped, its metric series with it; a
// member listed but not Ready takes nothing until it is Ready.
func TestReconcileJoinLeaveDrop(t *testing.T) {
	var ida, idb atomic.Value
	ida.Store("a1")
	idb.Store("b1")
	a, b := instanceServer(t, &ida), instanceServer(t, &idb)
	reg := prometheus.NewRegistry()
	var dropped []string
	p := newTestPool(t, Config{Client: a.Client(), Registry: reg, OnDrop: func(u string, _ Role) { dropped = append(dropped, u) }})
	ctx := context.Background()

	joined := p.Reconcile("file", []Member{{Name: "a", URL: a.URL, Role: Decode, Ready: true}})
	if len(joined) != 1 || joined[0].URL() != a.URL {
		t.Fatalf("joined %v, want a", joined)
	}
	if _, err := p.Pick(Decode, nil, nil, 0); err == nil {
		t.Fatal("a worker not probed yet was picked")
	}
	p.CheckNew(ctx)
	if got := pickAll(t, p, 2); got[a.URL] != 2 {
		t.Fatalf("after the join probe: picks %v, want both on a", got)
	}

	// b listed but not Ready: probed, shown, not picked.
	p.Reconcile("file", []Member{{Name: "a", URL: a.URL, Role: Decode, Ready: true}, {Name: "b", URL: b.URL, Role: Decode, Reason: "pod not ready"}})
	p.CheckNew(ctx)
	if got := pickAll(t, p, 4); got[a.URL] != 4 {
		t.Fatalf("b listed unready: picks %v, want all on a", got)
	}
	if h, all := p.Count(Decode); h != 1 || all != 2 {
		t.Errorf("Count = %d taking of %d, want 1 of 2", h, all)
	}
	p.Reconcile("file", []Member{{Name: "a", URL: a.URL, Role: Decode, Ready: true}, {Name: "b", URL: b.URL, Role: Decode, Ready: true}})
	if got := pickAll(t, p, 4); got[a.URL] != 2 || got[b.URL] != 2 {
		t.Fatalf("b Ready: picks %v, want 2 each", got)
	}

	// a leaves while it holds a leg.
	var held *Worker
	for held == nil || held.URL() != a.URL {
		w, err := p.Pick(Decode, nil, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if w.URL() != a.URL {
			defer p.Release(w)
			continue
		}
		held = w
	}
	p.Reconcile("file", []Member{{Name: "b", URL: b.URL, Role: Decode, Ready: true}})
	if got := pickAll(t, p, 4); got[b.URL] != 4 {
		t.Fatalf("a left: picks %v, want all on b", got)
	}
	if h, all := p.Count(Decode); h != 1 || all != 1 {
		t.Errorf("a left: Count = %d taking of %d, want 1 of 1", h, all)
	}
	dbg := p.Debug()
	if len(dbg) != 2 || !dbg[0].Left || dbg[0].URL != a.URL || dbg[0].Inflight != 1 || dbg[0].Source != "file" || dbg[0].Name != "a" {
		t.Fatalf("a left holding a leg: Debug %+v, want it shown left with 1 leg", dbg)
	}
	if len(dropped) != 0 {
		t.Fatalf("dropped %v while a still held a leg", dropped)
	}
	p.Done(held, Success, "")
	if len(dropped) != 1 || dropped[0] != a.URL {
		t.Fatalf("dropped %v after a's last leg, want [a]", dropped)
	}
	if ws := p.Workers(); len(ws) != 1 || ws[0].URL() != b.URL {
		t.Errorf("workers after the drop: %v, want b alone", ws)
	}
	for _, m := range []string{"tandem_router_worker_healthy", "tandem_router_worker_inflight", "tandem_router_worker_breaker_state"} {
		if n, err := testutil.GatherAndCount(reg, m); err != nil || n != 1 {
			t.Errorf("%s: %d series (err %v), want 1 (b's; a's deleted)", m, n, err)
		}
	}
	if n := testutil.ToFloat64(p.met.membership.WithLabelValues("decode", "join")); n != 2 {
		t.Errorf("joins counted %g, want 2", n)
	}
	for _, c := range []string{"leave", "drop", "ready"} {
		if n := testutil.ToFloat64(p.met.membership.WithLabelValues("decode", c)); n != 1 {
			t.Errorf("%s counted %g, want 1", c, n)
		}
	}
}

// TestReaddKeepsBreaker: a worker whose breaker opened, that leaves and is
// listed again (while its legs finish, or after it was dropped), comes back
// with its breaker open: re-listing the same process does not wipe what its
// failed legs showed. A new instance on its address (a restart) resets the
// breaker and counts a restart.
func TestReaddKeepsBreaker(t *testing.T) {
	var ida atomic.Value
	ida.Store("a1")
	a := instanceServer(t, &ida)
	p := newTestPool(t, Config{Client: a.Client()})
	ctx := context.Background()
	list := []Member{{Name: "a", URL: a.URL, Role: Decode, Ready: true}}
	p.Reconcile("k8s", list)
	p.CheckNew(ctx)
	w, err := p.Pick(Decode, nil, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	p.Done(w, Failure, "boom")
	for range 2 {
		w, err := p.Pick(Decode, nil, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		p.Done(w, Failure, "boom")
	}
	if st := p.Debug()[0].Breaker; st != "open" {
		t.Fatalf("breaker %s after 3 failures, want open", st)
	}
	p.Reconcile("k8s", nil) // leaves with no leg: dropped at once
	if len(p.Workers()) != 0 {
		t.Fatal("a worker that left with no leg was kept")
	}
	again := p.Reconcile("k8s", list)
	if len(again) != 1 || again[0] != w {
		t.Fatalf("re-added %v, want the same worker handle back", again)
	}
	p.CheckNew(ctx)
	if d := p.Debug()[0]; d.Breaker != "open" || d.Restarts != 0 || d.Instance != "a1" {
		t.Fatalf("re-added: %+v, want breaker open, instance a1, no restart", d)
	}
	if _, err := p.Pick(Decode, nil, nil, 0); err == nil {
		t.Fatal("a re-added worker whose breaker is open was picked within its cool-down")
	}
	ida.Store("a2") // the process restarted on the same address
	p.Check(ctx)
	if d := p.Debug()[0]; d.Breaker != "closed" || d.Restarts != 1 || d.Instance != "a2" {
		t.Fatalf("after a restart: %+v, want breaker closed, instance a2, 1 restart", d)
	}
	if got := pickAll(t, p, 2); got[a.URL] != 2 {
		t.Fatalf("after a restart: picks %v, want a", got)
	}
}

// TestReconcileRoleChange: the same URL listed with another role is
// another worker: the old one leaves, the new one joins.
func TestReconcileRoleChange(t *testing.T) {
	p := newTestPool(t, Config{})
	p.Reconcile("file", []Member{{Name: "x", URL: "http://x", Role: Decode, Ready: true}})
	j := p.Reconcile("file", []Member{{Name: "x", URL: "http://x", Role: Prefill, Ready: true}, {Name: "bad", URL: "http://y", Role: "unknown"}})
	if len(j) != 1 || j[0].Role() != Prefill {
		t.Fatalf("joined %v, want x as prefill", j)
	}
	if ws := p.Workers(); len(ws) != 1 || ws[0].Role() != Prefill {
		t.Fatalf("workers %v, want x as prefill alone", ws)
	}
}
