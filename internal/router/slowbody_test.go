package router_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tandem/internal/router"
)

// serveHTTPServer serves rt with its own HTTPServer (the timeouts under
// test are the server's and the handlers') and returns its address.
func serveHTTPServer(t *testing.T, rt *router.Router) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := rt.HTTPServer(ln.Addr().String())
	go srv.Serve(ln) // ends at srv.Close, below
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// TestSlowRequestBodiesAreTimedOut: a client that sends its headers and
// then trickles (here: stops sending) its body gets an answer and its
// connection closed once the body timeout passes, on a generation
// endpoint (which reads the body) and on one that does not read it.
func TestSlowRequestBodiesAreTimedOut(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", answer(200, decodeAnswer))
	o := router.Options{Prefill: []string{p.url()}, Decode: []string{d.url()}, BodyTimeout: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registry: prometheus.NewRegistry()}
	rt, err := router.New(o)
	if err != nil {
		t.Fatal(err)
	}
	rt.CheckNow(t.Context())
	addr := serveHTTPServer(t, rt)
	for _, tc := range []struct {
		method, path string
		wantStatus   int
	}{
		{"POST", "/v1/completions", 408},
		{"POST", "/nowhere", 404},
		{"GET", "/health", 200},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"pro", tc.method, tc.path)
			// A connection the server forgot would block this test until
			// the guard below; the server is expected to answer and close
			// right after the body timeout.
			conn.SetReadDeadline(time.Now().Add(20 * time.Second))
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer to a stalled body: %v", err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.wantStatus {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.wantStatus)
			}
			if _, err := br.ReadByte(); err == nil || strings.Contains(err.Error(), "timeout") {
				t.Errorf("after the answer the connection is still open (read: %v); want it closed by the server", err)
			}
		})
	}
}

// TestLongStreamOutlivesTheBodyTimeout: the body deadline is lifted once
// the body arrived, so a stream that runs longer than it is not cut.
func TestLongStreamOutlivesTheBodyTimeout(t *testing.T) {
	const bodyTimeout = 50 * time.Millisecond
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	first := "data: {\"choices\":[{\"index\":0,\"text\":\"a\"}]}\n\n"
	d := newFake(t, "decode", func(w http.ResponseWriter, r *http.Request, _ []byte) {
		writeEvents(w, first)
		<-time.After(8 * bodyTimeout) // a slow worker: the stream goes on past the body deadline
		io.WriteString(w, "data: [DONE]\n\n")
	})
	o := router.Options{Prefill: []string{p.url()}, Decode: []string{d.url()}, BodyTimeout: bodyTimeout,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registry: prometheus.NewRegistry()}
	rt, err := router.New(o)
	if err != nil {
		t.Fatal(err)
	}
	rt.CheckNow(t.Context())
	addr := serveHTTPServer(t, rt)
	resp, err := http.Post("http://"+addr+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != first+"data: [DONE]\n\n" {
		t.Errorf("stream = %q, %v; want the whole stream", body, err)
	}
}

// TestAdmissionBeforeBody: with MaxRequests 1, of two requests whose
// bodies stall, one holds the slot and the other is refused with 429 at
// once, before its body is read: a flood of large bodies costs no memory
// past the limit. With the body read first, neither would be answered
// before the body timeout (10 s here).
func TestAdmissionBeforeBody(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", answer(200, decodeAnswer))
	o := router.Options{Prefill: []string{p.url()}, Decode: []string{d.url()}, MaxRequests: 1, BodyTimeout: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registry: prometheus.NewRegistry()}
	rt, err := router.New(o)
	if err != nil {
		t.Fatal(err)
	}
	rt.CheckNow(t.Context())
	addr := serveHTTPServer(t, rt)
	type result struct {
		resp *http.Response
		err  error
	}
	results := make(chan result, 2)
	for range 2 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{\"pro")
		go func() {
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			results <- result{resp, err}
		}()
	}
	select {
	case r := <-results:
		if r.err != nil {
			t.Fatalf("reading the answer: %v", r.err)
		}
		if r.resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("status %d, want 429", r.resp.StatusCode)
		}
		if r.resp.Header.Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
	case <-time.After(3 * time.Second):
		t.Fatal("neither of two requests over a limit of one was answered while their bodies stalled; want a 429 before the body is read")
	}
}
