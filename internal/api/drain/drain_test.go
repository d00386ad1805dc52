package drain_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"tandem/internal/api/drain"
	"tandem/internal/invariant"
)

// probe returns a handler's status, body status and Connection header.
func probe(t *testing.T, h http.Handler) (int, string, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	var doc drain.Doc
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatalf("answer %q is not a status document: %v", rec.Body, err)
	}
	return rec.Code, doc.Status, rec.Header().Get("Connection")
}

// admit runs g.Admit behind CloseConnections and returns the answer
// (status 0: admitted, and left at once).
func admit(t *testing.T, g *drain.Gate) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	g.CloseConnections(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.Admit(w) {
			g.Leave()
		}
	})).ServeHTTP(rec, httptest.NewRequest("POST", "/v1/completions", nil))
	return rec
}

// errorCode reads an OpenAI error document's code.
func errorCode(t *testing.T, rec *httptest.ResponseRecorder) string {
	t.Helper()
	var doc struct {
		Error struct {
			Code string `json:"code"`
			Type string `json:"type"`
		} `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatalf("answer %q is not an error document: %v", rec.Body, err)
	}
	return doc.Error.Code
}

// TestPhasesOnTheWire walks a gate through its phases and checks what
// /health, /ready and a piece of work get in each.
func TestPhasesOnTheWire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := drain.New()
		health, ready := http.HandlerFunc(g.ServeHealth), http.HandlerFunc(g.ServeReady)
		check := func(step string, wantReady int, wantStatus string) {
			t.Helper()
			if c, s, _ := probe(t, health); c != 200 || s != wantStatus {
				t.Errorf("%s: /health = %d %q, want 200 %q (alive in every phase)", step, c, s, wantStatus)
			}
			if c, s, _ := probe(t, ready); c != wantReady || s != wantStatus {
				t.Errorf("%s: /ready = %d %q, want %d %q", step, c, s, wantReady, wantStatus)
			}
		}

		check("starting", 503, "starting")
		if rec := admit(t, g); rec.Code != 503 || errorCode(t, rec) != "service_unavailable" || rec.Header().Get("Retry-After") == "" {
			t.Errorf("starting: work got %d %s (Retry-After %q), want 503 service_unavailable with Retry-After", rec.Code, rec.Body, rec.Header().Get("Retry-After"))
		}
		g.SetReady(true)
		check("ready", 200, "ok")
		if rec := admit(t, g); rec.Code != 200 || rec.Header().Get("Connection") != "" {
			t.Errorf("ready: work got %d (Connection %q), want admitted on a kept-alive connection", rec.Code, rec.Header().Get("Connection"))
		}

		done := make(chan drain.Result)
		go func() { done <- g.Drain(drain.Config{Settle: 5 * time.Second, Timeout: time.Minute}) }()
		synctest.Wait()
		check("settling", 503, "draining")
		rec := admit(t, g)
		if rec.Code != 200 || rec.Header().Get("Connection") != "close" {
			t.Errorf("settling: work got %d (Connection %q), want admitted, with Connection: close", rec.Code, rec.Header().Get("Connection"))
		}
		g.SetReady(true) // never undoes a drain
		check("settling after SetReady", 503, "draining")

		time.Sleep(5 * time.Second)
		synctest.Wait()
		check("draining", 503, "draining")
		rec = admit(t, g)
		if rec.Code != 503 || errorCode(t, rec) != drain.Code || rec.Header().Get("Retry-After") != "1" || rec.Header().Get("Connection") != "close" {
			t.Errorf("draining: work got %d %s (Retry-After %q, Connection %q), want the draining answer", rec.Code, rec.Body,
				rec.Header().Get("Retry-After"), rec.Header().Get("Connection"))
		}
		if !drain.IsRefusal(rec.Code, errorCode(t, rec)) {
			t.Errorf("IsRefusal does not recognize the draining answer")
		}
		if res := <-done; res.Left != 0 || res.Settled != 5*time.Second || res.Drained != 0 {
			t.Errorf("drain of an idle gate = %+v, want settled 5s, drained 0, nothing left", res)
		}
	})
}

// TestIsRefusal: only a 503 with the draining code is the draining answer.
func TestIsRefusal(t *testing.T) {
	for _, tc := range []struct {
		status int
		code   string
		want   bool
	}{{503, "draining", true}, {503, "service_unavailable", false}, {502, "draining", false}, {200, "", false}} {
		if got := drain.IsRefusal(tc.status, tc.code); got != tc.want {
			t.Errorf("IsRefusal(%d, %q) = %v, want %v", tc.status, tc.code, got, tc.want)
		}
	}
}

// TestDrainWaitsForWork: work admitted before and during the settle
// window runs to its end; the drain returns when the last piece leaves
// and the busy count is zero, not before, and Refusing runs once as the
// refusals begin.
func TestDrainWaitsForWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := drain.New()
		g.SetReady(true)
		if _, ok := g.Enter(); !ok {
			t.Fatal("a ready gate refused work")
		}
		var busy atomic.Int64
		busy.Store(2)
		var refusing atomic.Int32
		var phaseAtRefusing drain.Phase
		done := make(chan drain.Result)
		start := time.Now()
		go func() {
			done <- g.Drain(drain.Config{Settle: 5 * time.Second, Timeout: time.Minute, Busy: func() int { return int(busy.Load()) },
				Refusing: func() { refusing.Add(1); phaseAtRefusing = g.Phase() }})
		}()
		time.Sleep(3 * time.Second)
		if _, ok := g.Enter(); !ok { // late work, inside the settle window
			t.Fatal("a settling gate refused work")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := refusing.Load(); n != 1 || phaseAtRefusing != drain.Draining {
			t.Errorf("at the end of the settle window Refusing ran %d times (phase %v), want once, in phase Draining", n, phaseAtRefusing)
		}
		if _, ok := g.Enter(); ok {
			t.Fatal("a draining gate admitted work")
		}
		steps := []struct {
			at   time.Duration
			step func()
		}{
			{10 * time.Second, g.Leave},
			{12 * time.Second, g.Leave},
			{20 * time.Second, func() { busy.Store(1) }},
			{30 * time.Second, func() { busy.Store(0) }},
		}
		for _, s := range steps {
			time.Sleep(s.at - time.Since(start))
			synctest.Wait()
			select {
			case res := <-done:
				t.Fatalf("the drain returned at %s with %+v, before the work ended", time.Since(start), res)
			default:
			}
			s.step()
		}
		res := <-done
		if got := time.Since(start); got > 30*time.Second+50*time.Millisecond {
			t.Errorf("the drain returned at %s, want within a poll of 30s (the end of the work)", got)
		}
		if res.Left != 0 || res.Settled != 5*time.Second || res.Drained < 25*time.Second {
			t.Errorf("drain = %+v, want settled 5s, drained about 25s, nothing left", res)
		}
	})
}

// TestDrainDeadline: work that never ends is left at Settle + Timeout, and
// reported.
func TestDrainDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := drain.New()
		g.SetReady(true)
		g.Enter()
		g.Enter()
		start := time.Now()
		res := g.Drain(drain.Config{Settle: 5 * time.Second, Timeout: 60 * time.Second, Busy: func() int { return 3 }})
		if got := time.Since(start); got != 65*time.Second {
			t.Errorf("the drain returned after %s, want settle + timeout = 65s", got)
		}
		if res.Left != 5 || res.Settled != 5*time.Second || res.Drained != 60*time.Second {
			t.Errorf("drain = %+v, want 5 left (2 requests, 3 busy) after settling 5s and draining 60s", res)
		}
		g.Leave()
		g.Leave()
	})
}

// TestDrainHurry: closing Hurry ends the settle window at once; admitted
// work still runs to its end.
func TestDrainHurry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := drain.New()
		g.SetReady(true)
		g.Enter()
		hurry := make(chan struct{})
		done := make(chan drain.Result)
		go func() { done <- g.Drain(drain.Config{Settle: time.Hour, Timeout: time.Hour, Hurry: hurry}) }()
		time.Sleep(time.Second)
		close(hurry)
		synctest.Wait()
		if p := g.Phase(); p != drain.Draining {
			t.Fatalf("after Hurry the phase is %v, want draining", p)
		}
		time.Sleep(4 * time.Second)
		g.Leave()
		res := <-done
		if res.Settled != time.Second || res.Drained != 4*time.Second || res.Left != 0 {
			t.Errorf("drain = %+v, want settled 1s (hurried), drained 4s (the work's end), nothing left", res)
		}
	})
}

// TestLeaveWithoutEnter is a broken invariant, not a silent count below
// zero.
func TestLeaveWithoutEnter(t *testing.T) {
	defer func() {
		v := recover()
		var ie *invariant.Error
		if err, ok := v.(error); !ok || !errors.As(err, &ie) {
			t.Errorf("Leave without Enter recovered %v, want an invariant.Error", v)
		}
	}()
	drain.New().Leave()
}
