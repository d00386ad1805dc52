package httpx_test

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"tandem/internal/api/httpx"
	"tandem/internal/api/openai"
)

// TestReadBody: a body within the limit is read; a larger one is a 413
// before anything is read; one that stalls past the timeout is a 408.
func TestReadBody(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpx.BodyDeadline(w, r, time.Second)
		b, e := httpx.ReadBody(w, r, 16, 200*time.Millisecond)
		if e != nil {
			httpx.WriteError(w, e)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, map[string]int{"bytes": len(b)})
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	post := func(body string) int {
		resp, err := http.Post(srv.URL, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	if got := post(`{"a":1}`); got != 200 {
		t.Errorf("small body: %d, want 200", got)
	}
	if got := post(strings.Repeat("x", 17)); got != 413 {
		t.Errorf("17-byte body over a 16-byte limit: %d, want 413", got)
	}
	c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{")
	c.SetReadDeadline(time.Now().Add(10 * time.Second)) // only so a broken build fails instead of hanging
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("stalled body: no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), httpx.CodeBodyTimeout) {
		t.Errorf("stalled body: %d %s, want 408 %s", resp.StatusCode, b, httpx.CodeBodyTimeout)
	}
}

// TestRecorderAndMethods: the recorder remembers the first status (200 when
// only a body was written), and CheckMethod answers 405 with Allow.
func TestRecorderAndMethods(t *testing.T) {
	w := httptest.NewRecorder()
	rec := &httpx.Recorder{ResponseWriter: w}
	if rec.StatusOr200() != 200 {
		t.Errorf("nothing written: %d, want 200", rec.StatusOr200())
	}
	rec.Write([]byte("x"))
	rec.WriteHeader(500) // too late: the first status stands
	if rec.Status != 200 {
		t.Errorf("status after a body: %d, want 200", rec.Status)
	}
	w = httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPut, "/v1/models", nil)
	if httpx.CheckMethod(w, r, []string{http.MethodGet, http.MethodHead}) {
		t.Fatal("PUT allowed on a GET, HEAD route")
	}
	if w.Code != 405 || w.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("405 answer: %d Allow %q", w.Code, w.Header().Get("Allow"))
	}
	if !httpx.CheckMethod(httptest.NewRecorder(), r, nil) {
		t.Error("a route without methods refused PUT")
	}
	if s := httpx.Server(":0", http.NotFoundHandler(), slog.New(slog.DiscardHandler)); s.ReadHeaderTimeout == 0 || s.ReadTimeout != 0 {
		t.Errorf("Server: ReadHeaderTimeout %v ReadTimeout %v, want a header timeout and no read timeout", s.ReadHeaderTimeout, s.ReadTimeout)
	}
}

// TestEvery429HasRetryAfter: a 429 carries Retry-After whether or not the
// error named one; other errors carry it only when they name one.
func TestEvery429HasRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		e    *openai.Error
		want string
	}{
		{&openai.Error{Status: 429, Message: "busy"}, "1"},
		{openai.RateLimited("queue full"), "1"},
		{&openai.Error{Status: 429, Message: "busy", RetryAfter: 2500 * time.Millisecond}, "3"},
		{&openai.Error{Status: 503, Message: "down"}, ""},
		{openai.Invalid("x", "", "bad"), ""},
	} {
		w := httptest.NewRecorder()
		httpx.WriteError(w, tc.e)
		if got := w.Header().Get("Retry-After"); w.Code != tc.e.Status || got != tc.want {
			t.Errorf("WriteError(%d %q) = %d, Retry-After %q; want %d, %q", tc.e.Status, tc.e.Message, w.Code, got, tc.e.Status, tc.want)
		}
	}
}
