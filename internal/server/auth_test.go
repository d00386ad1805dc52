package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tandem/internal/api/leg"
	"tandem/internal/engine"
)

const testClusterToken = "server-test-cluster-token-0123456789"

func testLegKeys(t testing.TB) *leg.Keys {
	t.Helper()
	k, err := leg.NewKeys([]byte(testClusterToken))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// signedLeg returns a POST of body to path carrying li's headers signed
// with k, as the router sends it.
func signedLeg(t testing.TB, k *leg.Keys, path, body string, li leg.Info) *http.Request {
	t.Helper()
	r := httptest.NewRequest("POST", path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	li.Set(r.Header)
	k.Sign(r.Header, "POST", path, []byte(body))
	return r
}

// legBackend is a fake backend that is also the server's Legs: it records
// the leg of each sequence submitted (nil for one that came to Submit, not
// as a leg) and plays the fake's script for both.
type legBackend struct {
	*fakeBackend
	mu   sync.Mutex
	legs []*leg.Info
}

func (b *legBackend) Submit(ctx context.Context, req engine.Request) (Stream, error) {
	return b.submit(ctx, nil, req)
}

func (b *legBackend) SubmitLeg(ctx context.Context, li leg.Info, req engine.Request) (Stream, error) {
	return b.submit(ctx, &li, req)
}

func (b *legBackend) submit(ctx context.Context, li *leg.Info, req engine.Request) (Stream, error) {
	b.mu.Lock()
	b.legs = append(b.legs, li)
	b.mu.Unlock()
	return b.fakeBackend.Submit(ctx, req)
}

var testDecodeLeg = leg.Info{Room: strings.Repeat("cd", 16), RequestID: "req-7", Leg: leg.KindDecode, Prefill: "10.1.2.3:7000"}

// TestUnsignedLegRefused: with leg keys (a PD worker), a generation
// request without a valid router signature gets 401 in OpenAI's shape and
// never reaches the backend; even a body that is not JSON gets 401, not
// 400, because the signature is checked before the body is parsed.
func TestUnsignedLegRefused(t *testing.T) {
	tok := testVocab(t, llama2Template, true)
	keys := testLegKeys(t)
	other, err := leg.NewKeys([]byte("another-cluster-token-abcdefgh"))
	if err != nil {
		t.Fatal(err)
	}
	const body = `{"prompt":"Hello","max_tokens":2}`
	const chatBody = `{"messages":[{"role":"user","content":"x"}],"max_tokens":2}`
	plain := func(path, body string) func(t *testing.T) *http.Request {
		return func(t *testing.T) *http.Request {
			r := httptest.NewRequest("POST", path, strings.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			return r
		}
	}
	tests := []struct {
		name string
		req  func(t *testing.T) *http.Request
		want string // in the message
	}{
		{"colocated completion", plain("/v1/completions", body), "not signed"},
		{"colocated chat", plain("/v1/chat/completions", chatBody), "not signed"},
		{"not JSON", plain("/v1/completions", `{"prompt":`), "not signed"},
		{"leg headers, no signature", func(t *testing.T) *http.Request {
			r := plain("/v1/completions", body)(t)
			testDecodeLeg.Set(r.Header)
			return r
		}, "not signed"},
		{"another token's signature", func(t *testing.T) *http.Request {
			return signedLeg(t, other, "/v1/completions", body, testDecodeLeg)
		}, "does not match"},
		{"prefill address changed", func(t *testing.T) *http.Request {
			r := signedLeg(t, keys, "/v1/completions", body, testDecodeLeg)
			r.Header.Set(leg.HeaderPrefill, "127.0.0.1:22")
			return r
		}, "does not match"},
		{"body changed", func(t *testing.T) *http.Request {
			r := signedLeg(t, keys, "/v1/completions", body, testDecodeLeg)
			r2 := httptest.NewRequest("POST", "/v1/completions", strings.NewReader(`{"prompt":"Hello","max_tokens":60}`))
			r2.Header = r.Header
			return r2
		}, "does not match"},
		{"signed for the other endpoint", func(t *testing.T) *http.Request {
			r := signedLeg(t, keys, "/v1/completions", chatBody, testDecodeLeg)
			r2 := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(chatBody))
			r2.Header = r.Header
			return r2
		}, "does not match"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := &legBackend{fakeBackend: newFake(t, tok, script{done(engine.FinishStop)})}
			s, _ := newTestServer(t, b, Options{LegKeys: keys})
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, tc.req(t))
			if rec.Code != http.StatusUnauthorized {
				t.Fatalf("status %d %s, want 401", rec.Code, rec.Body)
			}
			e := decodeError(t, rec.Body.String())
			if e.Error.Type != "invalid_request_error" || deref(e.Error.Code) != "invalid_api_key" || !strings.Contains(e.Error.Message, tc.want) ||
				!strings.Contains(e.Error.Message, "router") {
				t.Errorf("error %+v, want invalid_request_error/invalid_api_key naming the router and saying %q", e.Error, tc.want)
			}
			if n := len(b.submitted()); n != 0 {
				t.Errorf("the backend's Submit was called %d times for a refused request", n)
			}
			m := do(s.Handler(), "GET", "/metrics", "").Body.String()
			if !strings.Contains(m, `tandem_http_requests_total{endpoint=`) || !strings.Contains(m, `status="401"} 1`) {
				t.Errorf("/metrics does not count the 401:\n%s", m)
			}
		})
	}
}

// TestSignedLegServed: a leg the router signed reaches Legs (not the
// Backend) with its verified headers, on both endpoints.
func TestSignedLegServed(t *testing.T) {
	tok := testVocab(t, llama2Template, true)
	keys := testLegKeys(t)
	for path, body := range map[string]string{
		"/v1/completions":      `{"prompt":"Hello","max_tokens":2}`,
		"/v1/chat/completions": `{"messages":[{"role":"user","content":"x"}],"max_tokens":2}`,
	} {
		b := &legBackend{fakeBackend: newFake(t, tok, append(tokens(t, tok, 0, "▁Hello"), done(engine.FinishStop)))}
		s, _ := newTestServer(t, b, Options{LegKeys: keys, Legs: b})
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, signedLeg(t, keys, path, body, testDecodeLeg))
		if rec.Code != 200 {
			t.Fatalf("%s: status %d %s, want 200", path, rec.Code, rec.Body)
		}
		if len(b.legs) != 1 || b.legs[0] == nil || *b.legs[0] != testDecodeLeg {
			t.Errorf("%s: Legs saw legs %v, want one %+v", path, b.legs, testDecodeLeg)
		}
	}
}

// TestLegHeadersIgnoredWithoutKeys: a server without leg keys (tandem
// serve) does not believe X-Tandem-* headers from a client.
func TestLegHeadersIgnoredWithoutKeys(t *testing.T) {
	tok := testVocab(t, "", true)
	b := &legBackend{fakeBackend: newFake(t, tok, append(tokens(t, tok, 0, "!"), done(engine.FinishStop)))}
	s, _ := newTestServer(t, b, Options{})
	r := httptest.NewRequest("POST", "/v1/completions", strings.NewReader(`{"prompt":"Hello","max_tokens":1}`))
	testDecodeLeg.Set(r.Header)
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, r)
	if rec.Code != 200 || len(b.legs) != 1 || b.legs[0] != nil {
		t.Errorf("status %d %s, legs %v; want 200 served colocated (no leg)", rec.Code, rec.Body, b.legs)
	}
}

// TestAPIKey: with an API key every /v1/* request needs it as a bearer
// token; /health and /metrics stay open.
func TestAPIKey(t *testing.T) {
	tok := testVocab(t, "", true)
	b := newFake(t, tok, append(tokens(t, tok, 0, "!"), done(engine.FinishStop)))
	s, _ := newTestServer(t, b, Options{APIKey: "sk-test-key"})
	for _, tc := range []struct {
		method, path, body, auth string
		want                     int
	}{
		{"POST", "/v1/completions", `{"prompt":"Hello","max_tokens":1}`, "", 401},
		{"POST", "/v1/completions", `{"prompt":"Hello","max_tokens":1}`, "Bearer sk-wrong", 401},
		{"POST", "/v1/completions", `{"prompt":"Hello","max_tokens":1}`, "sk-test-key", 401},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`, "", 401},
		{"GET", "/v1/models", "", "", 401},
		{"GET", "/v1/nothing", "", "", 401},
		{"GET", "/v1/models", "", "Bearer sk-test-key", 200},
		{"GET", "/health", "", "", 200},
		{"GET", "/metrics", "", "", 200},
		{"POST", "/v1/completions", `{"prompt":"Hello","max_tokens":1}`, "Bearer sk-test-key", 200},
	} {
		r := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
		if tc.auth != "" {
			r.Header.Set("Authorization", tc.auth)
		}
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, r)
		if rec.Code != tc.want {
			t.Errorf("%s %s with Authorization %q: status %d %s, want %d", tc.method, tc.path, tc.auth, rec.Code, rec.Body, tc.want)
		}
		if tc.want == 401 {
			if e := decodeError(t, rec.Body.String()); deref(e.Error.Code) != "invalid_api_key" {
				t.Errorf("%s %s: 401 error %+v, want code invalid_api_key", tc.method, tc.path, e.Error)
			}
		}
	}
	if n := len(b.submitted()); n != 1 {
		t.Errorf("the backend got %d requests, want 1 (only the one with the key)", n)
	}
}

// gatedBackend holds every stream's first update until gate is closed.
type gatedBackend struct {
	*fakeBackend
	gate      chan struct{}
	submitted chan struct{}
}

type gatedStream struct {
	Stream
	gate <-chan struct{}
}

func (s gatedStream) Next(ctx context.Context) (engine.Update, error) {
	select {
	case <-s.gate:
	case <-ctx.Done():
		return engine.Update{}, ctx.Err()
	}
	return s.Stream.Next(ctx)
}

func (b *gatedBackend) Submit(ctx context.Context, req engine.Request) (Stream, error) {
	st, err := b.fakeBackend.Submit(ctx, req)
	if err == nil {
		b.submitted <- struct{}{}
	}
	return gatedStream{Stream: st, gate: b.gate}, err
}

// trickle opens a connection to addr, sends head (which promises a body of
// 1000 bytes) and then one body byte every few milliseconds until the
// connection breaks, and returns everything the server sends back, once
// it closes the connection. hangGuard is only there so that a server that
// never closes fails the test instead of hanging it.
func trickle(t *testing.T, addr, head string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const hangGuard = 20 * time.Second
	c.SetDeadline(time.Now().Add(hangGuard))
	if _, err := io.WriteString(c, head+"{"); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tk := time.NewTicker(5 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	got, err := io.ReadAll(bufio.NewReader(c))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server still held the connection after %s with the body trickling in (got %q)", hangGuard, got)
	}
	return string(got)
}

// TestSlowBodyTimesOut: a client that trickles a request body loses its
// connection BodyTimeout after its headers, whether the handler reads the
// body (a generation request) or not (a 405 or 404, after which net/http
// would read the rest to reuse the connection). A stream that began
// before and outlives that deadline is not cut.
func TestSlowBodyTimesOut(t *testing.T) {
	tok := testVocab(t, "", true)
	b := &gatedBackend{fakeBackend: newFake(t, tok, append(tokens(t, tok, 0, "!"), done(engine.FinishStop))),
		gate: make(chan struct{}), submitted: make(chan struct{}, 1)}
	s, _ := newTestServer(t, b, Options{BodyTimeout: 200 * time.Millisecond})
	hs := s.HTTPServer("127.0.0.1:0")
	ln, err := net.Listen("tcp", hs.Addr)
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(ln)
	defer hs.Close()
	addr := ln.Addr().String()

	// A stream whose body arrived at once, held by the backend until the
	// slow clients below have been cut.
	type result struct {
		body string
		err  error
	}
	streamed := make(chan result, 1)
	go func() {
		resp, err := http.Post("http://"+addr+"/v1/completions", "application/json",
			strings.NewReader(`{"prompt":"Hello","max_tokens":1,"stream":true}`))
		if err != nil {
			streamed <- result{err: err}
			return
		}
		defer resp.Body.Close()
		bb, err := io.ReadAll(resp.Body)
		streamed <- result{string(bb), err}
	}()
	<-b.submitted

	head := func(method, path string) string {
		return fmt.Sprintf("%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n", method, path)
	}
	if got := trickle(t, addr, head("POST", "/v1/completions")); !strings.Contains(got, "408 Request Timeout") || !strings.Contains(got, "body_timeout") {
		t.Errorf("generation request with a trickling body: answer %q, want a 408 body_timeout and the connection closed", got)
	}
	if got := trickle(t, addr, head("POST", "/health")); !strings.Contains(got, "405 Method Not Allowed") {
		t.Errorf("POST /health with a trickling body: answer %q, want a 405 and the connection closed", got)
	}
	if got := trickle(t, addr, head("PUT", "/nothing")); !strings.Contains(got, "404 Not Found") {
		t.Errorf("PUT /nothing with a trickling body: answer %q, want a 404 and the connection closed", got)
	}
	close(b.gate)
	r := <-streamed
	if r.err != nil || !strings.Contains(r.body, "data: [DONE]") {
		t.Errorf("the stream that outlived the body timeout: %q, %v; want it whole", r.body, r.err)
	}
}

// TestLegKeysWithoutLegs: a server built with leg keys and no Legs (a
// configuration error) answers a verified leg 500, naming the mistake,
// and never hands it to the Backend as if it were a colocated request.
func TestLegKeysWithoutLegs(t *testing.T) {
	tok := testVocab(t, "", true)
	keys := testLegKeys(t)
	b := newFake(t, tok, script{done(engine.FinishStop)})
	s := New(b, Options{LegKeys: keys, Registry: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)})
	s.SetReady(true)
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, signedLeg(t, keys, "/v1/completions", `{"prompt":"Hello","max_tokens":2}`, testDecodeLeg))
	if rec.Code != 500 || !strings.Contains(rec.Body.String(), "no Legs") || len(b.submitted()) != 0 {
		t.Errorf("verified leg without Legs: %d %s, %d submitted to the backend; want 500 naming the missing Legs, none", rec.Code, rec.Body, len(b.submitted()))
	}
}
