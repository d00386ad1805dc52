package router_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"tandem/internal/api/leg"
	"tandem/internal/router"
)

// strictWorker is a fake worker that checks what real workers check: the
// cluster credential on /pd/* and /debug/*, the leg signature on
// generation requests.
type strictWorker struct {
	srv     *httptest.Server
	mu      sync.Mutex
	legs    []leg.Info
	refused []string
}

func newStrictWorker(t *testing.T, keys *leg.Keys, role, answer string) *strictWorker {
	t.Helper()
	sw := &strictWorker{}
	pd := http.NewServeMux()
	pd.HandleFunc("GET /pd/status", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(router.WorkerStatus{Role: role})
	})
	pd.HandleFunc("GET /pd/info", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(router.WorkerInfo{Role: role, TransferAddr: "127.0.0.1:9", Model: "m"})
	})
	pd.HandleFunc("GET /debug/rooms", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"role":"`+role+`","rooms":[]}`)
	})
	mux := http.NewServeMux()
	mux.Handle("/pd/", keys.RequireCredential(pd))
	mux.Handle("/debug/", keys.RequireCredential(pd))
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"status":"ok"}`) })
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		li, err := keys.Verify(r.Method, r.URL.Path, r.Header, body)
		sw.mu.Lock()
		if err != nil {
			sw.refused = append(sw.refused, err.Error())
		} else {
			sw.legs = append(sw.legs, li)
		}
		sw.mu.Unlock()
		if err != nil {
			http.Error(w, `{"error":{"message":"unsigned"}}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer)
	})
	sw.srv = httptest.NewServer(mux)
	t.Cleanup(sw.srv.Close)
	return sw
}

// TestRouterSignsLegsAndSendsCredential: with LegKeys the router signs both
// legs (a worker checking signatures serves them), reads /pd/* with the
// cluster credential (else it could not learn the prefill address), and
// its own /debug/* needs the credential.
func TestRouterSignsLegsAndSendsCredential(t *testing.T) {
	keys, err := leg.NewKeys([]byte("router-test-cluster-token-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	p := newStrictWorker(t, keys, "prefill", prefillAnswer)
	d := newStrictWorker(t, keys, "decode", decodeAnswer)
	o := func(o *router.Options) {
		o.Prefill, o.Decode, o.LegKeys = []string{p.srv.URL}, []string{d.srv.URL}, keys
	}
	c := newCluster(t, nil, nil, o)
	status, body := c.post(t, "/v1/completions", `{"model":"m","prompt":"Say hi","max_tokens":3}`)
	if status != 200 || body != decodeAnswer {
		t.Fatalf("POST /v1/completions = %d %q, want 200 and decode's answer", status, body)
	}
	p.mu.Lock()
	d.mu.Lock()
	if len(p.refused)+len(d.refused) != 0 || len(p.legs) != 1 || len(d.legs) != 1 {
		t.Errorf("workers refused %q %q, served %v %v; want one signed leg each", p.refused, d.refused, p.legs, d.legs)
	} else if pl, dl := p.legs[0], d.legs[0]; pl.Leg != "prefill" || dl.Leg != "decode" || pl.Room != dl.Room ||
		dl.Prefill != "127.0.0.1:9" || pl.Prefill != "" {
		t.Errorf("signed legs %+v and %+v: want one room, decode naming the prefill address from /pd/info", pl, dl)
	}
	p.mu.Unlock()
	d.mu.Unlock()

	for _, path := range []string{"/debug/rooms", "/debug/cluster"} {
		if status, body := c.get(t, path); status != http.StatusUnauthorized || !strings.Contains(body, "invalid_api_key") {
			t.Errorf("GET %s without the credential = %d %s, want 401 in OpenAI's shape", path, status, body)
		}
		req, _ := http.NewRequest("GET", c.srv.URL+path, nil)
		req.Header.Set("Authorization", keys.Credential())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || strings.Contains(string(b), `"error"`) {
			t.Errorf("GET %s with the credential = %d %s, want 200 with every worker's table", path, resp.StatusCode, b)
		}
	}
	if status, _ := c.get(t, "/health"); status != 200 {
		t.Errorf("GET /health = %d, want 200 without any credential", status)
	}
}
