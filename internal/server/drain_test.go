package server

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"tandem/internal/api/drain"
)

// TestDrainFinishesInFlightAndRefusesNew: a server draining keeps a
// stream it admitted running to its end, answers new generation requests
// with the draining answer, stays alive on /health and unready on /ready,
// and its drain ends only when the stream did.
func TestDrainFinishesInFlightAndRefusesNew(t *testing.T) {
	tok := testVocab(t, "", true)
	b := newFake(t, tok, script(tokens(t, tok, 0, "▁Hello"))) // then blocks until cancelled
	b.subm = make(chan *fakeStream, 1)
	s, _ := newTestServer(t, b, Options{})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()

	resp, err := http.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x","stream":true,"max_tokens":8}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	st := <-b.subm
	rd := bufio.NewReader(resp.Body)
	if line, err := rd.ReadString('\n'); err != nil || !strings.Contains(line, "Hello") {
		t.Fatalf("first event %q (%v), want the first token", line, err)
	}

	refusing := make(chan struct{})
	done := make(chan drain.Result, 1)
	go func() {
		done <- s.Gate().Drain(drain.Config{Timeout: time.Minute, Refusing: func() { close(refusing) }})
	}()
	<-refusing

	rec := do(s.Handler(), "POST", "/v1/completions", `{"prompt":"x"}`)
	e := decodeError(t, rec.Body.String())
	if rec.Code != 503 || deref(e.Error.Code) != drain.Code || rec.Header().Get("Retry-After") != "1" || rec.Header().Get("Connection") != "close" {
		t.Errorf("a new request while draining got %d %s (Retry-After %q, Connection %q), want the draining answer", rec.Code, rec.Body,
			rec.Header().Get("Retry-After"), rec.Header().Get("Connection"))
	}
	if rec := do(s.Handler(), "GET", "/health", ""); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"draining"`) {
		t.Errorf("GET /health while draining = %d %s, want 200 draining (alive)", rec.Code, rec.Body)
	}
	if rec := do(s.Handler(), "GET", "/ready", ""); rec.Code != 503 {
		t.Errorf("GET /ready while draining = %d %s, want 503", rec.Code, rec.Body)
	}
	if rec := do(s.Handler(), "GET", "/v1/models", ""); rec.Code != 200 {
		t.Errorf("GET /v1/models while draining = %d, want 200: only generation is refused", rec.Code)
	}
	select {
	case res := <-done:
		t.Fatalf("the drain ended (%+v) while a stream was still running", res)
	case <-time.After(50 * time.Millisecond):
	}

	st.Cancel() // the stream ends (as a finished generation would)
	if _, err := rd.ReadString(0); err != nil && !strings.Contains(err.Error(), "EOF") {
		t.Fatalf("read the rest of the stream: %v", err)
	}
	select {
	case res := <-done:
		if res.Left != 0 {
			t.Errorf("drain = %+v, want nothing left", res)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the drain did not end 10 s after the last stream did")
	}
}
