package router_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tandem/internal/router"
	"tandem/internal/router/pool"
)

// legReq is one leg a fake worker received.
type legReq struct {
	path string
	body []byte
	hdr  http.Header
}

// fake is a scripted prefill or decode worker. gen answers generation
// requests; everything else (health, status, info, debug rooms) is served
// from the fields.
type fake struct {
	t         *testing.T
	role      string
	srv       *httptest.Server
	healthy   atomic.Bool
	draining  atomic.Bool // /ready answers 503 draining (legs are still the gen's to answer)
	infoOK    atomic.Bool
	embedOnly atomic.Bool // /pd/info says the model only embeds (no transfer address)
	mu        sync.Mutex
	status    pool.Status
	rooms     string // /debug/rooms body; "" answers 404
	gen       func(w http.ResponseWriter, r *http.Request, body []byte)
	got       chan legReq  // every generation leg, in arrival order
	cancelled chan string  // rooms whose leg context ended while gen waited (see waitCancel)
	conns     atomic.Int64 // connections accepted
	// count, when set, answers /tokenize with {"count": count(body)}
	// (a negative count answers 500).
	count func(body []byte) int
}

func newFake(t *testing.T, role string, gen func(w http.ResponseWriter, r *http.Request, body []byte)) *fake {
	t.Helper()
	f := &fake{t: t, role: role, gen: gen, got: make(chan legReq, 64), cancelled: make(chan string, 64)}
	f.healthy.Store(true)
	f.infoOK.Store(true)
	f.status = pool.Status{Role: role}
	mux := http.NewServeMux()
	ready := func(w http.ResponseWriter, r *http.Request) {
		switch {
		case !f.healthy.Load():
			http.Error(w, `{"status":"unavailable"}`, http.StatusServiceUnavailable)
		case f.draining.Load():
			http.Error(w, `{"status":"draining"}`, http.StatusServiceUnavailable)
		default:
			io.WriteString(w, `{"status":"ok"}`)
		}
	}
	mux.HandleFunc("GET /health", ready)
	mux.HandleFunc("GET /ready", ready)
	mux.HandleFunc("GET /pd/status", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		json.NewEncoder(w).Encode(f.status)
	})
	mux.HandleFunc("GET /pd/info", func(w http.ResponseWriter, r *http.Request) {
		if !f.infoOK.Load() {
			http.Error(w, "no info", http.StatusInternalServerError)
			return
		}
		if f.embedOnly.Load() {
			json.NewEncoder(w).Encode(pool.Info{Role: role, Model: "m", EmbeddingsOnly: true})
			return
		}
		json.NewEncoder(w).Encode(pool.Info{Role: role, TransferAddr: f.transferAddr(), Model: "m"})
	})
	mux.HandleFunc("GET /debug/rooms", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.rooms == "" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, f.rooms)
	})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"object":"list","data":[{"id":"m-%s","object":"model"}]}`, role)
	})
	mux.HandleFunc("GET /v1/models/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"id": r.PathValue("id"), "object": "model"})
	})
	leg := func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.got <- legReq{path: r.URL.Path, body: body, hdr: r.Header.Clone()}
		f.gen(w, r, body)
	}
	mux.HandleFunc("POST /v1/completions", leg)
	mux.HandleFunc("POST /v1/chat/completions", leg)
	mux.HandleFunc("POST /tokenize", f.tokenizer)
	mux.HandleFunc("POST /detokenize", f.tokenizer)
	f.srv = httptest.NewUnstartedServer(mux)
	f.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			f.conns.Add(1)
		}
	}
	f.srv.Start()
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) url() string          { return f.srv.URL }
func (f *fake) transferAddr() string { return "xfer-" + strings.TrimPrefix(f.srv.URL, "http://") }

func (f *fake) setStatus(waiting, running int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status.Waiting, f.status.Running = waiting, running
}

// waitCancel blocks a leg until its context ends (the router cancelled
// it), reports that on f.cancelled, and gives up after a long while.
func (f *fake) waitCancel(r *http.Request) {
	select {
	case <-r.Context().Done():
		f.cancelled <- r.Header.Get(router.HeaderRoom)
	case <-time.After(20 * time.Second):
	}
}

// nextLeg returns the next leg f received, failing the test after a while.
func (f *fake) nextLeg(t *testing.T) legReq {
	t.Helper()
	select {
	case l := <-f.got:
		return l
	case <-time.After(10 * time.Second):
		t.Fatalf("%s worker %s received no leg", f.role, f.url())
		return legReq{}
	}
}

// expectCancel fails the test unless f saw a leg cancelled soon.
func (f *fake) expectCancel(t *testing.T) string {
	t.Helper()
	select {
	case room := <-f.cancelled:
		return room
	case <-time.After(10 * time.Second):
		t.Fatalf("%s worker %s: its leg was not cancelled", f.role, f.url())
		return ""
	}
}

// writeJSONBody answers a whole JSON body, as a worker does.
func writeJSONBody(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// writeEvents streams raw SSE text, flushing after each piece.
func writeEvents(w http.ResponseWriter, pieces ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for _, p := range pieces {
		io.WriteString(w, p)
		w.(http.Flusher).Flush()
	}
}

// answer returns a gen that always answers status and body as JSON.
func answer(status int, body string) func(http.ResponseWriter, *http.Request, []byte) {
	return func(w http.ResponseWriter, _ *http.Request, _ []byte) { writeJSONBody(w, status, body) }
}

// stream returns a gen that always streams pieces.
func stream(pieces ...string) func(http.ResponseWriter, *http.Request, []byte) {
	return func(w http.ResponseWriter, _ *http.Request, _ []byte) { writeEvents(w, pieces...) }
}

const prefillAnswer = `{"id":"cmpl-p","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"x","logprobs":null,"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}` + "\n"

// cluster is a router over fakes, served over HTTP.
type cluster struct {
	rt  *router.Router
	srv *httptest.Server
	reg *prometheus.Registry
}

// newCluster builds a router over the fakes, runs one health round and
// serves it. edit may change the options first.
func newCluster(t *testing.T, prefill, decode []*fake, edit func(*router.Options)) *cluster {
	t.Helper()
	o := router.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registry: prometheus.NewRegistry()}
	for _, f := range prefill {
		o.Prefill = append(o.Prefill, f.url())
	}
	for _, f := range decode {
		o.Decode = append(o.Decode, f.url())
	}
	if edit != nil {
		edit(&o)
	}
	rt, err := router.New(o)
	if err != nil {
		t.Fatalf("router.New: %v", err)
	}
	rt.CheckNow(context.Background())
	srv := httptest.NewServer(rt.Handler())
	t.Cleanup(func() {
		srv.Close()
		rt.Close()
	})
	return &cluster{rt: rt, srv: srv, reg: o.Registry}
}

// post sends body to path on the router and returns status and body.
func (c *cluster) post(t *testing.T, path, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(c.srv.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: read body: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

func (c *cluster) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(c.srv.URL + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// errorDoc decodes an OpenAI error body.
func errorDoc(t *testing.T, body string) (message, typ, code string) {
	t.Helper()
	var doc struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(bytes.TrimPrefix([]byte(body), []byte("data: ")), &doc); err != nil {
		t.Fatalf("error body %q does not decode: %v", body, err)
	}
	if doc.Error.Code != nil {
		code = *doc.Error.Code
	}
	return doc.Error.Message, doc.Error.Type, code
}
