package pool

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"tandem/internal/api/drain"
	"tandem/internal/api/httpx"
)

// readyServer is a worker whose /ready answers as a drain.Gate in the
// phase held by phase, and whose /pd/status answers an empty decode status.
func readyServer(t *testing.T, phase *atomic.Int32) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, r *http.Request) {
		p := drain.Phase(phase.Load())
		status := http.StatusServiceUnavailable
		if p == drain.Ready {
			status = http.StatusOK
		}
		httpx.WriteJSON(w, status, drain.Doc{Status: p.String()})
	})
	mux.HandleFunc("GET /pd/status", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"role":"decode"}`)) })
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts
}

// TestDrainingWorkerGetsNoLegs: a worker whose /ready says it drains, or
// whose leg answer said so (Draining), is passed over at once (no
// two-failure hysteresis), counted as not taking legs, named "draining" in
// a failed pick, shown in Debug, and left out of its breaker; its /ready
// at 200 again (a restart on the same address) puts it back.
func TestDrainingWorkerGetsNoLegs(t *testing.T) {
	var pa, pb atomic.Int32
	pa.Store(int32(drain.Ready))
	pb.Store(int32(drain.Ready))
	a, b := readyServer(t, &pa), readyServer(t, &pb)
	p := newTestPool(t, Config{Decode: []string{a.URL, b.URL}, Client: a.Client()})
	p.probeTime = 10 * time.Second // a probe that times out on a loaded machine would read as a failure
	ctx := context.Background()
	picks := func() map[string]int {
		got := map[string]int{}
		for range 4 {
			w, err := p.Pick(Decode, nil, nil, 0)
			if err != nil {
				t.Fatalf("pick: %v", err)
			}
			got[w.URL()]++
			p.Release(w)
		}
		return got
	}

	p.Check(ctx)
	if got := picks(); got[a.URL] == 0 || got[b.URL] == 0 {
		t.Fatalf("both workers ready: picks %v, want both picked", got)
	}

	pa.Store(int32(drain.Settling)) // a's /ready: 503 draining
	p.Check(ctx)
	if got := picks(); got[a.URL] != 0 {
		t.Errorf("after one probe found a draining: picks %v, want none on it", got)
	}
	if n, all := p.Count(Decode); n != 1 || all != 2 {
		t.Errorf("Count = %d of %d, want 1 of 2 taking legs", n, all)
	}
	var dbg []bool
	for _, w := range p.Debug() {
		dbg = append(dbg, w.Draining && w.Healthy)
	}
	if len(dbg) != 2 || !dbg[0] || dbg[1] {
		t.Errorf("Debug draining&healthy = %v, want [true false]: a drains but is alive", dbg)
	}

	// b refuses a leg with the draining answer: out at once too.
	wb := p.byRo[Decode][1]
	if _, err := p.Pick(Decode, []*Worker{p.byRo[Decode][0]}, nil, 0); err != nil {
		t.Fatal(err)
	}
	p.Draining(wb)
	p.Done(wb, Neutral, "draining")
	_, err := p.Pick(Decode, nil, nil, 0)
	if !errors.Is(err, ErrNoWorker) || strings.Count(err.Error(), "draining") != 2 {
		t.Errorf("pick with both draining = %v, want ErrNoWorker naming both as draining", err)
	}
	if wb.br.state != breakerClosed || wb.br.consecutive != 0 {
		t.Errorf("b's breaker after a draining refusal: %v with %d failures, want closed with none", wb.br.state, wb.br.consecutive)
	}

	// b's next probe answers 200 (b restarted on its address): back in;
	// a is still draining.
	p.Check(ctx)
	if got := picks(); got[a.URL] != 0 || got[b.URL] != 4 {
		t.Errorf("after b's /ready answered 200 again: picks %v, want all on b", got)
	}
	pa.Store(int32(drain.Ready)) // a restarted
	p.Check(ctx)
	if got := picks(); got[a.URL] == 0 {
		t.Errorf("after a's /ready answered 200 again: picks %v, want a back", got)
	}

	pa.Store(int32(drain.Starting)) // a 503 that is not a drain: an ordinary failed probe
	p.Check(ctx)
	if got := picks(); got[a.URL] == 0 {
		t.Errorf("after one failed probe (503 starting): picks %v, want a still in (two failures take it out)", got)
	}
}
