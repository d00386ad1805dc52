package router_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"tandem/internal/api/leg"
	"tandem/internal/router"
)

// embedWorker is a worker that answers /ready and, on /v1/embeddings,
// status with body (counting the requests and whether they carried the
// cluster credential).
type embedWorker struct {
	srv        *httptest.Server
	status     atomic.Int32
	calls      atomic.Int32
	credential atomic.Int32
}

func newEmbedWorker(t *testing.T, keys *leg.Keys, status int) *embedWorker {
	t.Helper()
	w := &embedWorker{}
	w.status.Store(int32(status))
	mux := http.NewServeMux()
	ok := func(rw http.ResponseWriter, _ *http.Request) { io.WriteString(rw, `{"status":"ok"}`) }
	mux.HandleFunc("GET /ready", ok)
	mux.HandleFunc("GET /health", ok)
	mux.HandleFunc("POST /v1/embeddings", func(rw http.ResponseWriter, r *http.Request) {
		w.calls.Add(1)
		if keys.CheckCredential(r.Header) {
			w.credential.Add(1)
		}
		body, _ := io.ReadAll(r.Body)
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(int(w.status.Load()))
		io.WriteString(rw, `{"echo":`+string(body)+`}`)
	})
	w.srv = httptest.NewServer(mux)
	t.Cleanup(w.srv.Close)
	return w
}

// TestEmbeddingsAnyWorker: the router forwards /v1/embeddings as it came,
// with the cluster credential, to a worker of either role; a worker that
// fails (5xx) is left for another; a 4xx is the client's and passed on.
func TestEmbeddingsAnyWorker(t *testing.T) {
	keys, err := leg.NewKeys([]byte("router-test-cluster-token-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	p, d := newEmbedWorker(t, keys, 200), newEmbedWorker(t, keys, 200)
	c := newCluster(t, nil, nil, func(o *router.Options) {
		o.Prefill, o.Decode, o.LegKeys = []string{p.srv.URL}, []string{d.srv.URL}, keys
	})
	body := `{"model":"m","input":["a","b"]}`
	for range 4 {
		if status, got := c.post(t, "/v1/embeddings", body); status != 200 || !strings.Contains(got, `"input":["a","b"]`) {
			t.Fatalf("POST /v1/embeddings = %d %s", status, got)
		}
	}
	if p.calls.Load() == 0 || d.calls.Load() == 0 {
		t.Errorf("calls: prefill %d, decode %d; want both roles to serve", p.calls.Load(), d.calls.Load())
	}
	if n := p.credential.Load() + d.credential.Load(); n != 4 {
		t.Errorf("%d of 4 requests carried the cluster credential", n)
	}
	d.status.Store(503)
	p.calls.Store(0)
	for range 2 {
		if status, got := c.post(t, "/v1/embeddings", body); status != 200 {
			t.Fatalf("with the decode worker failing: %d %s, want the prefill worker's 200", status, got)
		}
	}
	if p.calls.Load() != 2 {
		t.Errorf("prefill worker served %d of 2", p.calls.Load())
	}
	p.status.Store(400)
	if status, _ := c.post(t, "/v1/embeddings", body); status != 400 {
		t.Errorf("a worker's 400: router answered %d", status)
	}
	p.status.Store(429)
	d.status.Store(429)
	if status, got := c.post(t, "/v1/embeddings", body); status != 429 {
		t.Errorf("every worker busy: %d %s, want the workers' 429", status, got)
	}
	p.status.Store(500)
	d.status.Store(500)
	if status, got := c.post(t, "/v1/embeddings", body); status < 500 || status == 503 {
		t.Errorf("every worker failing: %d %s, want a 5xx", status, got)
	}
}
