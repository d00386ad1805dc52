package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// seen records the request bodies a test server received.
type seen struct {
	mu   sync.Mutex
	reqs []map[string]any
}

func (s *seen) add(t *testing.T, r *http.Request) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		t.Errorf("server: decode request body: %v", err)
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, m)
	s.mu.Unlock()
	return m
}

// writeSSE writes events as a server-sent event stream.
func writeSSE(w http.ResponseWriter, events ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	f, _ := w.(http.Flusher)
	for _, e := range events {
		fmt.Fprintf(w, "data: %s\n\n", e)
		if f != nil {
			f.Flush()
		}
	}
}

func textChunk(text string) string {
	b, _ := json.Marshal(map[string]any{"object": "text_completion", "choices": []any{map[string]any{"index": 0, "text": text, "finish_reason": nil}}})
	return string(b)
}

const (
	finishChunk = `{"choices":[{"index":0,"text":"","finish_reason":"length"}]}`
	doneEvent   = "[DONE]"
)

func usageChunk(prompt, completion int) string {
	return fmt.Sprintf(`{"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, prompt, completion, prompt+completion)
}

// hang blocks a handler until the client goes away or the test ends. The
// body is drained first: only then does the server notice a closed
// connection and cancel r.Context().
func hang(t *testing.T, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	select {
	case <-r.Context().Done():
	case <-t.Context().Done():
	}
}

// newServer serves h at /v1/completions and one model at /v1/models.
func newServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", h)
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `{"object":"list","data":[{"id":"served-model","object":"model"}]}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestRunStreaming(t *testing.T) {
	var s seen
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		m := s.add(t, r)
		n := int(m["max_tokens"].(float64))
		ev := []string{}
		for i := 0; i < n; i++ {
			ev = append(ev, textChunk(fmt.Sprintf(" t%d", i)))
			if i == 1 {
				time.Sleep(time.Millisecond) // a visible gap; only structure is checked
			}
		}
		ev = append(ev, finishChunk, usageChunk(40, n), doneEvent)
		writeSSE(w, ev...)
	})
	o := Options{URL: srv.URL + "/v1/", Model: "m", Concurrency: 3, Requests: 7, PromptTokens: 32, GenTokens: 5, Stream: true, IgnoreEOS: true, Seed: 9}
	rep, err := Run(context.Background(), o, nil)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"URL", rep.URL, srv.URL},
		{"Model", rep.Model, "m"},
		{"Requests", rep.Requests, 7},
		{"Completed", rep.Completed, 7},
		{"Failed", rep.Failed, 0},
		{"Canceled", rep.Canceled, 0},
		{"Interrupted", rep.Interrupted, false},
		{"Concurrency", rep.Concurrency, 3},
		{"PromptTokens", rep.PromptTokens, int64(7 * 40)},
		{"OutputTokens", rep.OutputTokens, int64(7 * 5)},
		{"UsageReported", rep.UsageReported, 7},
		{"TTFT.N", rep.TTFT.N, 7},
		{"E2E.N", rep.E2E.N, 7},
		{"ITL.N", rep.ITL.N, 7 * 4},
		{"len(Errors)", len(rep.Errors), 0},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("Run(7 requests of 5 one-token chunks).%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if rep.DurationS <= 0 || rep.RequestThroughput <= 0 || rep.OutputTokS <= 0 || rep.TotalTokS <= rep.OutputTokS {
		t.Errorf("Run rates: duration %v, %v req/s, %v out tok/s, %v total tok/s; want all > 0 and total > output",
			rep.DurationS, rep.RequestThroughput, rep.OutputTokS, rep.TotalTokS)
	}
	if rep.TTFT.P50 > rep.E2E.P50 || rep.ITL.P99 > rep.E2E.P99 {
		t.Errorf("Run latencies TTFT p50 %v, ITL p99 %v exceed E2E p50 %v / p99 %v", rep.TTFT.P50, rep.ITL.P99, rep.E2E.P50, rep.E2E.P99)
	}

	// What the server was sent.
	if len(s.reqs) != 7 {
		t.Fatalf("server saw %d requests, want 7", len(s.reqs))
	}
	prompts := map[string]bool{}
	for _, m := range s.reqs {
		for _, kv := range []struct {
			key  string
			want any
		}{{"model", "m"}, {"max_tokens", 5.0}, {"temperature", 0.0}, {"stream", true}, {"ignore_eos", true},
			{"stream_options", map[string]any{"include_usage": true}}} {
			if got, ok := m[kv.key]; !ok || fmt.Sprint(got) != fmt.Sprint(kv.want) {
				t.Errorf("request field %q = %v (present %v), want %v", kv.key, got, ok, kv.want)
			}
		}
		p, _ := m["prompt"].(string)
		if n := len(strings.Fields(p)); n != 32 {
			t.Errorf("request prompt has %d words, want 32: %q", n, p)
		}
		prompts[p] = true
	}
	if len(prompts) != 7 {
		t.Errorf("7 requests carried %d distinct prompts, want 7", len(prompts))
	}
}

func TestPromptsAreSeeded(t *testing.T) {
	a, b, c := makePrompt(1, 3, 20), makePrompt(1, 3, 20), makePrompt(2, 3, 20)
	if a != b {
		t.Errorf("makePrompt(1, 3, 20) differs between calls: %q vs %q", a, b)
	}
	if a == c {
		t.Errorf("makePrompt(seed 1) == makePrompt(seed 2) = %q, want different prompts", a)
	}
	if makePrompt(1, 3, 20) == makePrompt(1, 4, 20) {
		t.Errorf("makePrompt gives requests 3 and 4 the same prompt")
	}
}

func TestRunMultiTokenChunksAndNoUsage(t *testing.T) {
	tests := []struct {
		name       string
		events     []string
		wantOut    int64
		wantPrompt int64
		wantITL    int
		wantUsage  int
	}{
		// 3 text chunks carrying 7 tokens: 6 intervals over 2 gaps.
		{"usage with packed chunks", []string{textChunk("a b"), textChunk("c d e"), textChunk("f g"), finishChunk, usageChunk(11, 7), doneEvent}, 7, 11, 6, 1},
		// No usage: one token per text chunk and the nominal prompt.
		{"no usage", []string{textChunk("a"), `{"choices":[{"text":""}]}`, textChunk("b"), textChunk("c"), finishChunk, doneEvent}, 3, 16, 2, 0},
		// No [DONE] but a finish reason: accepted (older llama.cpp servers).
		{"finish reason without DONE", []string{textChunk("a"), textChunk("b"), finishChunk}, 2, 16, 1, 0},
		// Tokens that render as no text still count when usage counts them.
		{"tokens without text", []string{`{"choices":[{"text":""}]}`, finishChunk, usageChunk(4, 3), doneEvent}, 3, 4, 0, 1},
		// Chat-style deltas parse too.
		{"chat deltas", []string{`{"choices":[{"delta":{"role":"assistant"}}]}`, `{"choices":[{"delta":{"content":"x"}}]}`, `{"choices":[{"delta":{"content":"y"},"finish_reason":"length"}]}`, doneEvent}, 2, 16, 1, 0},
	}
	for _, tc := range tests {
		srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) { writeSSE(w, tc.events...) })
		rep, err := Run(context.Background(), Options{URL: srv.URL, Model: "m", Requests: 1, PromptTokens: 16, GenTokens: 8, Stream: true}, nil)
		if err != nil {
			t.Fatalf("Run(%s): %v", tc.name, err)
		}
		if rep.Completed != 1 || rep.Failed != 0 {
			t.Errorf("Run(%s) completed %d failed %d (errors %v), want 1 and 0", tc.name, rep.Completed, rep.Failed, rep.ErrorExamples)
			continue
		}
		if rep.OutputTokens != tc.wantOut || rep.PromptTokens != tc.wantPrompt || rep.ITL.N != tc.wantITL || rep.UsageReported != tc.wantUsage {
			t.Errorf("Run(%s) = output %d, prompt %d, ITL samples %d, usage %d; want %d, %d, %d, %d", tc.name,
				rep.OutputTokens, rep.PromptTokens, rep.ITL.N, rep.UsageReported, tc.wantOut, tc.wantPrompt, tc.wantITL, tc.wantUsage)
		}
	}
}

func TestInterTokenLatencies(t *testing.T) {
	at := func(msec ...int) []time.Time {
		t0 := time.Unix(1000, 0)
		var out []time.Time
		for _, m := range msec {
			out = append(out, t0.Add(time.Duration(m)*time.Millisecond))
		}
		return out
	}
	tests := []struct {
		name   string
		times  []time.Time
		tokens int
		want   []float64
	}{
		{"one chunk", at(5), 4, nil},
		{"one token per chunk", at(0, 10, 40), 3, []float64{10, 30}},
		{"fewer tokens than chunks", at(0, 10, 40), 2, []float64{10, 30}},
		{"two tokens per gap", at(0, 10, 40), 5, []float64{5, 5, 15, 15}},
		{"uneven spread", at(0, 10, 40), 4, []float64{10, 15, 15}},
		{"three per gap", at(0, 10, 40), 7, []float64{10.0 / 3, 10.0 / 3, 10.0 / 3, 10, 10, 10}},
	}
	for _, tc := range tests {
		got := interTokenLatencies(tc.times, tc.tokens)
		ok := len(got) == len(tc.want)
		for i := 0; ok && i < len(got); i++ {
			ok = got[i]-tc.want[i] < 1e-9 && tc.want[i]-got[i] < 1e-9
		}
		if !ok {
			t.Errorf("interTokenLatencies(%s, %d tokens) = %v, want %v", tc.name, tc.tokens, got, tc.want)
		}
	}
}

func TestRunFailures(t *testing.T) {
	long := `{"choices":[{"text":"` + strings.Repeat("x", MaxEventBytes) + `"}]}`
	tests := []struct {
		name    string
		handler http.HandlerFunc
		kind    string
		msg     string // substring of the example message
	}{
		{"openai error 429", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"error":{"message":"waiting queue is full","type":"server_error"}}`)
		}, "http_429", "waiting queue is full"},
		{"plain 500", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "boom", http.StatusInternalServerError)
		}, "http_500", "boom"},
		{"string error 400", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":"bad prompt"}`)
		}, "http_400", "bad prompt"},
		{"detail 422", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusUnprocessableEntity)
			io.WriteString(w, `{"detail":"field required"}`)
		}, "http_422", "field required"},
		{"malformed json", func(w http.ResponseWriter, _ *http.Request) {
			writeSSE(w, textChunk("a"), `{"choices":[{"text":`, doneEvent)
		}, kindBadResponse, "parse event"},
		{"wrong json type", func(w http.ResponseWriter, _ *http.Request) {
			writeSSE(w, `{"choices":"nope"}`, doneEvent)
		}, kindBadResponse, "parse event"},
		{"event too long", func(w http.ResponseWriter, _ *http.Request) {
			writeSSE(w, long, doneEvent)
		}, kindBadResponse, "too long"},
		{"error inside stream", func(w http.ResponseWriter, _ *http.Request) {
			writeSSE(w, textChunk("a"), `{"error":{"message":"engine died","code":500}}`)
		}, kindStreamError, "engine died"},
		{"ends early", func(w http.ResponseWriter, _ *http.Request) {
			writeSSE(w, textChunk("a"), textChunk("b"))
		}, kindTruncated, "without [DONE]"},
		{"cut mid-line", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: "+textChunk("a")+"\n\ndata: {\"choi")
		}, kindTruncated, "middle of a line"},
		{"no text, zero completion tokens", func(w http.ResponseWriter, _ *http.Request) {
			writeSSE(w, finishChunk, usageChunk(3, 0), doneEvent)
		}, kindNoOutput, "no text"},
		{"no text, no usage", func(w http.ResponseWriter, _ *http.Request) {
			writeSSE(w, `{"choices":[{"text":""}]}`, finishChunk, doneEvent)
		}, kindNoOutput, "no text"},
		{"not sse at all", func(w http.ResponseWriter, _ *http.Request) {
			io.WriteString(w, "<html>hello</html>\n")
		}, kindTruncated, ""},
		{"usage beyond max_tokens", func(w http.ResponseWriter, _ *http.Request) {
			writeSSE(w, textChunk("a"), finishChunk, usageChunk(3, 1<<40), doneEvent)
		}, kindBadResponse, "completion_tokens"},
		{"negative usage", func(w http.ResponseWriter, _ *http.Request) {
			writeSSE(w, textChunk("a"), finishChunk, usageChunk(-1, 1), doneEvent)
		}, kindBadResponse, "prompt_tokens"},
		{"connection dropped", func(w http.ResponseWriter, _ *http.Request) {
			hj, ok := w.(http.Hijacker)
			if !ok {
				t.Error("test server cannot hijack")
				return
			}
			c, _, _ := hj.Hijack()
			c.Close()
		}, kindConnection, ""},
	}
	for _, tc := range tests {
		srv := newServer(t, tc.handler)
		rep, err := Run(context.Background(), Options{URL: srv.URL, Model: "m", Concurrency: 2, Requests: 3, PromptTokens: 4, GenTokens: 4, Stream: true}, nil)
		if err != nil {
			t.Fatalf("Run(%s): %v", tc.name, err)
		}
		if rep.Completed != 0 || rep.Failed != 3 || rep.Errors[tc.kind] != 3 || len(rep.Errors) != 1 {
			t.Errorf("Run(%s) completed %d, failed %d, errors %v; want 0, 3, {%s:3}", tc.name, rep.Completed, rep.Failed, rep.Errors, tc.kind)
		}
		if !strings.Contains(rep.ErrorExamples[tc.kind], tc.msg) {
			t.Errorf("Run(%s) example message %q, want it to contain %q", tc.name, rep.ErrorExamples[tc.kind], tc.msg)
		}
		if rep.TTFT.N != 0 || rep.OutputTokens != 0 || rep.RequestThroughput != 0 {
			t.Errorf("Run(%s) counted failed requests: TTFT samples %d, output tokens %d, %v req/s", tc.name, rep.TTFT.N, rep.OutputTokens, rep.RequestThroughput)
		}
	}
}

func TestRunMixedOutcomes(t *testing.T) {
	var n atomic.Int64
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
		if n.Add(1)%3 == 0 {
			http.Error(w, `{"error":{"message":"busy"}}`, http.StatusServiceUnavailable)
			return
		}
		writeSSE(w, textChunk("a"), textChunk("b"), finishChunk, doneEvent)
	})
	rep, err := Run(context.Background(), Options{URL: srv.URL, Model: "m", Concurrency: 4, Requests: 9, GenTokens: 2, Stream: true}, nil)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if rep.Completed != 6 || rep.Failed != 3 || rep.Errors["http_503"] != 3 || rep.E2E.N != 6 {
		t.Errorf("Run(every third request 503) = completed %d, failed %d, errors %v, E2E samples %d; want 6, 3, {http_503:3}, 6",
			rep.Completed, rep.Failed, rep.Errors, rep.E2E.N)
	}
}

func TestRunNonStreaming(t *testing.T) {
	var s seen
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		s.add(t, r)
		io.WriteString(w, `{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":"hello there","finish_reason":"length"}],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`)
	})
	rep, err := Run(context.Background(), Options{URL: srv.URL, Model: "m", Concurrency: 2, Requests: 4, PromptTokens: 8, GenTokens: 3}, nil)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if rep.Completed != 4 || rep.OutputTokens != 12 || rep.PromptTokens != 36 || rep.ITL.N != 0 || rep.TTFT != rep.E2E || rep.Stream {
		t.Errorf("Run(not streaming) = completed %d, output %d, prompt %d, ITL samples %d, TTFT %+v, E2E %+v, stream %v; want 4, 12, 36, 0, TTFT == E2E, false",
			rep.Completed, rep.OutputTokens, rep.PromptTokens, rep.ITL.N, rep.TTFT, rep.E2E, rep.Stream)
	}
	for _, m := range s.reqs {
		if _, ok := m["stream_options"]; ok {
			t.Errorf("non-streaming request sent stream_options: %v", m)
		}
		if _, ok := m["ignore_eos"]; ok {
			t.Errorf("request with IgnoreEOS false sent ignore_eos: %v", m)
		}
		if m["stream"] != false {
			t.Errorf("request stream = %v, want false", m["stream"])
		}
	}
}

func TestRunDiscoversModel(t *testing.T) {
	var s seen
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		s.add(t, r)
		writeSSE(w, textChunk("a"), finishChunk, doneEvent)
	})
	rep, err := Run(context.Background(), Options{URL: srv.URL, Requests: 2, GenTokens: 1, Stream: true}, nil)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if rep.Model != "served-model" || rep.Completed != 2 {
		t.Errorf("Run(no model) = model %q, completed %d; want served-model, 2", rep.Model, rep.Completed)
	}
	for _, m := range s.reqs {
		if m["model"] != "served-model" {
			t.Errorf("request model = %v, want served-model", m["model"])
		}
	}
}

func TestDiscoverModelErrors(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"empty list", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, `{"data":[]}`) }, "lists no model"},
		{"not json", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, `<html>`) }, "parse response"},
		{"404", http.NotFound, "404"},
	}
	for _, tc := range tests {
		srv := httptest.NewServer(tc.handler)
		_, err := Run(context.Background(), Options{URL: srv.URL, Requests: 1}, nil)
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Run(%s /v1/models) error = %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
	// Nothing listening.
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	if _, err := Run(context.Background(), Options{URL: addr, Requests: 1}, nil); err == nil || !strings.Contains(err.Error(), "is the server running") {
		t.Errorf("Run(closed server) error = %v, want one asking whether the server runs", err)
	}
}

func TestRunTimeout(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		writeSSE(w, textChunk("a"))
		hang(t, r) // never finishes on its own
	})
	rep, err := Run(context.Background(), Options{URL: srv.URL, Model: "m", Concurrency: 2, Requests: 2, Stream: true, Timeout: 50 * time.Millisecond}, nil)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if rep.Failed != 2 || rep.Errors[kindTimeout] != 2 || rep.Interrupted {
		t.Errorf("Run(server that hangs, timeout 50ms) = failed %d, errors %v, interrupted %v; want 2, {timeout:2}, false", rep.Failed, rep.Errors, rep.Interrupted)
	}
}

func TestRunCancel(t *testing.T) {
	var n atomic.Int64
	blocked := make(chan struct{}, 16)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 2 {
			writeSSE(w, textChunk("a"), finishChunk, doneEvent)
			return
		}
		blocked <- struct{}{}
		hang(t, r)
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Both workers are stuck in requests 3 and 4: interrupt the run.
		<-blocked
		<-blocked
		cancel()
	}()
	done := make(chan struct{})
	var rep *Report
	var err error
	go func() {
		rep, err = Run(ctx, Options{URL: srv.URL, Model: "m", Concurrency: 2, Requests: 100, Stream: true}, nil)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return 30 s after its context was cancelled")
	}
	if err != nil {
		t.Fatalf("Run(cancelled) error = %v, want a report and no error", err)
	}
	if rep.Completed != 2 || rep.Failed != 0 || rep.Canceled != 2 || !rep.Interrupted || rep.Requests != 100 {
		t.Errorf("Run(cancelled after 2) = completed %d, failed %d, canceled %d, interrupted %v, requests %d; want 2, 0, 2, true, 100",
			rep.Completed, rep.Failed, rep.Canceled, rep.Interrupted, rep.Requests)
	}
}

func TestOptionsErrors(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		want string
	}{
		{"no url", Options{}, "URL is empty"},
		{"bad scheme", Options{URL: "ftp://x"}, "scheme"},
		{"no host", Options{URL: "http://"}, "no host"},
		{"query", Options{URL: "http://h/?a=1"}, "query"},
		{"unparsable", Options{URL: "http://[::1"}, "parse server URL"},
		{"negative concurrency", Options{URL: "http://h", Concurrency: -1}, "concurrency"},
		{"huge requests", Options{URL: "http://h", Requests: 1 << 30}, "requests"},
		{"negative prompt", Options{URL: "http://h", PromptTokens: -3}, "prompt tokens"},
		{"huge gen", Options{URL: "http://h", GenTokens: 1 << 30}, "gen tokens"},
		{"negative timeout", Options{URL: "http://h", Timeout: -time.Second}, "timeout"},
	}
	for _, tc := range tests {
		_, err := Run(context.Background(), tc.o, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Run(%s) error = %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
}

func TestBaseURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://h:1", "http://h:1"},
		{"http://h:1/", "http://h:1"},
		{"http://h:1/v1", "http://h:1"},
		{"http://h:1/v1/", "http://h:1"},
		{"https://h/proxy/v1", "https://h/proxy"},
	} {
		if got, err := baseURL(tc.in); err != nil || got != tc.want {
			t.Errorf("baseURL(%q) = %q, %v; want %q, nil", tc.in, got, err, tc.want)
		}
	}
}

// signalWriter is a progress writer that signals its first write.
type signalWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	first chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf.Len() == 0 {
		close(w.first)
	}
	return w.buf.Write(p)
}

func TestProgressLines(t *testing.T) {
	w := &signalWriter{first: make(chan struct{})}
	srv := newServer(t, func(rw http.ResponseWriter, _ *http.Request) {
		select { // hold the request until a progress line is out
		case <-w.first:
		case <-time.After(10 * time.Second):
		}
		writeSSE(rw, textChunk("a"), finishChunk, doneEvent)
	})
	_, err := Run(context.Background(), Options{URL: srv.URL, Model: "m", Requests: 3, Stream: true, ProgressInterval: time.Millisecond}, w)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	w.mu.Lock()
	out := w.buf.String()
	w.mu.Unlock()
	if !strings.HasPrefix(out, "bench serve: 0/3 requests done (0 ok, 0 failed)") || strings.Contains(out, "\r") {
		t.Errorf("progress to a non-terminal = %q, want plain lines starting with \"bench serve: 0/3 requests done (0 ok, 0 failed)\"", out)
	}
}

func TestProgressBar(t *testing.T) {
	tl := &tally{}
	tl.completed.Store(5)
	tl.failed.Store(1)
	got := progressLine(Options{Requests: 12}, tl, time.Now(), true)
	want := "[" + strings.Repeat("#", 15) + strings.Repeat(".", 15) + "] 6/12  ok 5  failed 1"
	if !strings.HasPrefix(got, want) {
		t.Errorf("progressLine(6 of 12, bar) = %q, want prefix %q", got, want)
	}
}

func TestReportJSONAndText(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		writeSSE(w, textChunk("a"), textChunk("b"), finishChunk, usageChunk(5, 2), doneEvent)
	})
	rep, err := Run(context.Background(), Options{URL: srv.URL, Model: "m", Concurrency: 2, Requests: 2, GenTokens: 2, Stream: true}, nil)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatalf("json.Marshal(report): %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("json.Unmarshal(report): %v", err)
	}
	for _, k := range []string{"requests", "completed", "failed", "duration_s", "request_throughput", "output_tok_s", "total_tok_s", "errors"} {
		if _, ok := m[k]; !ok {
			t.Errorf("report JSON lacks %q: %s", k, b)
		}
	}
	if e, ok := m["errors"].(map[string]any); !ok || len(e) != 0 {
		t.Errorf("report JSON errors = %v, want an empty object", m["errors"])
	}
	for _, k := range []string{"ttft_ms", "itl_ms", "e2e_ms"} {
		s, ok := m[k].(map[string]any)
		if !ok {
			t.Errorf("report JSON %q = %v, want an object", k, m[k])
			continue
		}
		for _, f := range []string{"p50", "p90", "p99", "mean"} {
			if _, ok := s[f]; !ok {
				t.Errorf("report JSON %s lacks %q", k, f)
			}
		}
	}

	rep.Errors = map[string]int{"http_503": 2}
	rep.ErrorExamples = map[string]string{"http_503": "busy"}
	var buf bytes.Buffer
	if err := rep.WriteText(&buf); err != nil {
		t.Fatalf("WriteText: %v", err)
	}
	for _, want := range []string{"requests     2 ok, 0 failed", "TTFT", "ITL", "E2E", "http_503", "e.g. busy", "4 output"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("WriteText() = %q, want it to contain %q", buf.String(), want)
		}
	}
}
