package router_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"tandem/internal/api/leg"
	"tandem/internal/router"
	"tandem/internal/router/pool"
)

// strictWorker is a fake worker that checks what real workers check: the
// cluster credential on /pd/* and /debug/*, the leg signature on
// generation requests.
type strictWorker struct {
	srv  *httptest.Server
	legs chan strictLeg // every generation request, in arrival order
}

// strictLeg is a generation request a strictWorker got: its verified
// headers, or why it was refused.
type strictLeg struct {
	info leg.Info
	err  error
}

// next returns the next generation request w got, failing the test after
// a long while.
func (w *strictWorker) next(t *testing.T) strictLeg {
	t.Helper()
	select {
	case l := <-w.legs:
		return l
	case <-time.After(10 * time.Second):
		t.Fatalf("worker %s received no leg", w.srv.URL)
		return strictLeg{}
	}
}

func newStrictWorker(t *testing.T, keys *leg.Keys, role, answer string) *strictWorker {
	t.Helper()
	sw := &strictWorker{legs: make(chan strictLeg, 16)}
	pd := http.NewServeMux()
	pd.HandleFunc("GET /pd/status", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(pool.Status{Role: role})
	})
	pd.HandleFunc("GET /pd/info", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(pool.Info{Role: role, TransferAddr: "127.0.0.1:9", Model: "m"})
	})
	pd.HandleFunc("GET /debug/rooms", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"role":"`+role+`","rooms":[]}`)
	})
	mux := http.NewServeMux()
	mux.Handle("/pd/", keys.RequireCredential(pd))
	mux.Handle("/debug/", keys.RequireCredential(pd))
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"status":"ok"}`) })
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		li, err := keys.Verify(r.Method, r.URL.Path, r.Header, body)
		sw.legs <- strictLeg{li, err}
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
	pl, dl := p.next(t), d.next(t)
	if pl.err != nil || dl.err != nil {
		t.Errorf("the workers refused the legs: prefill %v, decode %v; want both signed", pl.err, dl.err)
	} else if pl.info.Leg != "prefill" || dl.info.Leg != "decode" || pl.info.Room != dl.info.Room ||
		dl.info.Prefill != "127.0.0.1:9" || pl.info.Prefill != "" {
		t.Errorf("signed legs %+v and %+v: want one room, decode naming the prefill address from /pd/info", pl.info, dl.info)
	}

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
	for _, path := range []string{"/health", "/ready"} {
		if status, _ := c.get(t, path); status != 200 {
			t.Errorf("GET %s = %d, want 200 without any credential", path, status)
		}
	}
}
