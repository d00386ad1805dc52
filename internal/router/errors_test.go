package router_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"tandem/internal/router"
)

// logBuffer collects a router's log lines; safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// lines returns the log lines that contain every one of words.
func (l *logBuffer) lines(words ...string) []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		ok := line != ""
		for _, w := range words {
			ok = ok && strings.Contains(line, w)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

// withLog makes the router log to a buffer, at debug level.
func withLog(lb *logBuffer) func(*router.Options) {
	return func(o *router.Options) {
		o.Logger = slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
}

// TestClientErrorsNameNoWorker: what a client gets when a leg fails, or
// when no worker is left, says which leg failed but not the worker's URL
// or address; the log line has the URL.
func TestClientErrorsNameNoWorker(t *testing.T) {
	p := newFake(t, "prefill", nil)
	p.gen = func(w http.ResponseWriter, r *http.Request, _ []byte) { p.waitCancel(r) }
	d := newFake(t, "decode", answer(200, decodeAnswer))
	var lb logBuffer
	c := newCluster(t, []*fake{p}, []*fake{d}, withLog(&lb))
	dead := strings.TrimPrefix(d.url(), "http://")
	d.srv.Close() // the decode worker dies after the health round: its leg is refused
	status, body := c.post(t, "/v1/completions", `{"prompt":"x"}`)
	msg, _, _ := errorDoc(t, body)
	if status != 502 || !strings.Contains(msg, "decode leg") || strings.Contains(body, dead) || strings.Contains(body, "127.0.0.1") {
		t.Errorf("decode worker refused: client got %d %s, want 502 naming the decode leg and no address", status, body)
	}
	if got := lb.lines("level=WARN", "sample failed", d.url()); len(got) != 1 {
		t.Errorf("log has %d WARN sample-failed lines naming %s, want 1:\n%s", len(got), d.url(), lb.String())
	}
	for range 2 { // two failed probes take it out
		c.rt.CheckNow(t.Context())
	}
	status, body = c.post(t, "/v1/completions", `{"prompt":"x"}`)
	if status != 503 || strings.Contains(body, dead) || !strings.Contains(body, "no healthy worker of role decode") {
		t.Errorf("no decode worker left: client got %d %s, want 503 naming the role and no address", status, body)
	}
	if got := lb.lines("no pair", d.url()); len(got) == 0 {
		t.Errorf("log has no no-pair line naming %s", d.url())
	}
}

// TestClientFaultsAreNotWarnings: a 400 answered by a worker, and a
// request the router itself rejects, are logged below WARN.
func TestClientFaultsAreNotWarnings(t *testing.T) {
	decodeGot := make(chan struct{})
	p := newFake(t, "prefill", func(w http.ResponseWriter, r *http.Request, _ []byte) {
		<-decodeGot // answer once decode holds its leg, so that the router must cancel it
		writeJSONBody(w, 400, `{"error":{"message":"max_tokens is too large","type":"invalid_request_error","param":"max_tokens","code":null}}`)
	})
	d := newFake(t, "decode", nil)
	d.gen = func(w http.ResponseWriter, r *http.Request, _ []byte) {
		close(decodeGot)
		d.waitCancel(r)
	}
	var lb logBuffer
	c := newCluster(t, []*fake{p}, []*fake{d}, withLog(&lb))
	if status, body := c.post(t, "/v1/completions", `{"prompt":"x","max_tokens":1000000}`); status != 400 {
		t.Fatalf("worker answered 400: client got %d %s, want 400", status, body)
	}
	d.expectCancel(t)
	if status, body := c.post(t, "/v1/completions", `{"prompt":"x","n":99}`); status != 400 {
		t.Fatalf("n 99: client got %d %s, want 400", status, body)
	}
	if w := lb.lines("level=WARN"); len(w) != 0 {
		t.Errorf("client faults were logged as warnings:\n%s", strings.Join(w, "\n"))
	}
	if got := lb.lines("level=INFO", "sample failed", p.url(), "max_tokens is too large"); len(got) != 1 {
		t.Errorf("log has %d INFO lines for the worker's 400, want 1:\n%s", len(got), lb.String())
	}
	if got := lb.lines("level=DEBUG", "rejected", "n must be"); len(got) != 1 {
		t.Errorf("log has %d DEBUG lines for the router's own 400, want 1:\n%s", len(got), lb.String())
	}
}

// TestWorker401IsNotTheClients: a worker that refuses the router's leg
// signature (401: another cluster token, or clocks too far apart) is the
// cluster's failure, not the client's: the client gets a 502, not a 401
// that would read as its own API key being wrong.
func TestWorker401IsNotTheClients(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", answer(401, `{"error":{"message":"the leg's signature does not verify","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`))
	c := newCluster(t, []*fake{p}, []*fake{d}, nil)
	status, body := c.post(t, "/v1/completions", `{"prompt":"x"}`)
	_, typ, code := errorDoc(t, body)
	if status != 502 || code == "invalid_api_key" || typ != "server_error" {
		t.Errorf("decode answered 401: client got %d %s, want 502 server_error without invalid_api_key", status, body)
	}
}

// TestWorkerClientErrorPassesThrough: a worker's 4xx reaches the client as
// the worker wrote it (status, message, type, param, code), with no
// wrapper naming a leg or a status, as `tandem serve` would have answered.
func TestWorkerClientErrorPassesThrough(t *testing.T) {
	const werr = `{"error":{"message":"This model's maximum context length is 2048 tokens. However, you requested 100001 tokens (1 in the messages, 100000 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":"max_tokens","code":"context_length_exceeded"}}`
	for _, tc := range []struct{ name, prompt string }{
		{"local", "x"}, // under the PD threshold: the decode worker's local leg
		{"disaggregated", strings.Repeat("word ", 300)}, // both legs
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newFake(t, "prefill", answer(400, werr))
			d := newFake(t, "decode", answer(400, werr))
			c := newCluster(t, []*fake{p}, []*fake{d}, func(o *router.Options) { o.PDThreshold = 64 })
			status, body := c.post(t, "/v1/completions", `{"prompt":"`+tc.prompt+`","max_tokens":100000}`)
			if status != 400 || strings.TrimSpace(body) != werr {
				t.Errorf("worker answered 400: client got %d %s\nwant 400 %s", status, body, werr)
			}
		})
	}
}

// TestWorker429KeepsRetryAfter: a worker's 429 reaches the client with the
// worker's Retry-After; the router's own 429 carries one too.
func TestWorker429KeepsRetryAfter(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Retry-After", "7")
		writeJSONBody(w, 429, `{"error":{"message":"The server is overloaded: queue full","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}}`)
	})
	c := newCluster(t, []*fake{p}, []*fake{d}, nil)
	resp, err := http.Post(c.srv.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "7" {
		t.Errorf("worker answered 429 with Retry-After 7: client got %d with Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// TestWorker401OpensItsBreaker: a worker that refuses the router's leg
// signature counts as failing (its breaker opens) and is logged at ERROR,
// not counted as a success as a client's bad request is.
func TestWorker401OpensItsBreaker(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", answer(401, `{"error":{"message":"the leg's signature does not verify","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`))
	var lb logBuffer
	c := newCluster(t, []*fake{p}, []*fake{d}, func(o *router.Options) {
		withLog(&lb)(o)
		o.BreakerFailures, o.BreakerCooldown = 2, time.Hour
	})
	for range 2 {
		if status, body := c.post(t, "/v1/completions", `{"prompt":"x"}`); status != 502 {
			t.Fatalf("decode answered 401: client got %d %s, want 502", status, body)
		}
	}
	_, m := c.get(t, "/metrics")
	if st := metricValue(t, m, `tandem_router_worker_breaker_state{role="decode",worker="`+d.url()+`"}`); st != 2 {
		t.Errorf("breaker state of the worker that answered 401 twice = %v, want 2 (open)", st)
	}
	if got := lb.lines("level=ERROR", "signature", d.url()); len(got) == 0 {
		t.Errorf("no ERROR line naming %s and the refused signature:\n%s", d.url(), lb.String())
	}
}

// TestEmbeddingOnlyModelIs400: on a cluster whose prefill worker says in
// /pd/info that its model only embeds, a generation request gets the
// worker's own 400 ("an embedding model"), not a 502 about a transfer
// address, and no leg reaches a worker; the worker stays in.
func TestEmbeddingOnlyModelIs400(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	p.embedOnly.Store(true)
	d := newFake(t, "decode", answer(200, decodeAnswer))
	c := newCluster(t, []*fake{p}, []*fake{d}, nil)
	for _, tc := range []struct{ path, body string }{
		{"/v1/completions", `{"prompt":"x","max_tokens":2}`},
		{"/v1/completions", `{"prompt":"x","max_tokens":2}`}, // known from the health round now
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_tokens":2}`},
	} {
		status, body := c.post(t, tc.path, tc.body)
		msg, typ, _ := errorDoc(t, body)
		if status != 400 || typ != "invalid_request_error" || !strings.Contains(msg, `the model "m" is an embedding model`) {
			t.Errorf("%s: %d %s, want a 400 saying the model only embeds", tc.path, status, body)
		}
		c.rt.CheckNow(t.Context())
	}
	if n := len(p.got) + len(d.got); n != 0 {
		t.Errorf("%d legs reached the workers, want none", n)
	}
}
