package router_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"tandem/internal/api/leg"
	"tandem/internal/router"
)

// tokenizer serves a fake's /tokenize and /detokenize: it records the
// request on f.got and answers which worker and path it was, or the
// worker's 404 for model "nope".
func (f *fake) tokenizer(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.got <- legReq{path: r.URL.Path, body: body, hdr: r.Header.Clone()}
	if f.count != nil && r.URL.Path == "/tokenize" {
		if n := f.count(body); n >= 0 {
			writeJSONBody(w, http.StatusOK, fmt.Sprintf(`{"count":%d,"max_model_len":8192,"tokens":[]}`, n))
		} else {
			writeJSONBody(w, http.StatusInternalServerError, `{"error":{"message":"tokenizer broke","type":"server_error"}}`)
		}
		return
	}
	if strings.Contains(string(body), `"nope"`) {
		writeJSONBody(w, http.StatusNotFound, `{"error":{"message":"The model \"nope\" does not exist.","type":"invalid_request_error","param":"model","code":"model_not_found"}}`)
		return
	}
	writeJSONBody(w, http.StatusOK, fmt.Sprintf(`{"worker":%q,"path":%q}`, f.role, r.URL.Path))
}

// TestTokenizeIsProxied: /tokenize and /detokenize go to a decode worker
// (a prefill worker when no decode worker is healthy) with the body
// unchanged and the cluster credential, and the worker's answer, errors
// included, comes back as it was.
func TestTokenizeIsProxied(t *testing.T) {
	keys, err := leg.NewKeys([]byte("router-test-cluster-token-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", answer(200, decodeAnswer))
	c := newCluster(t, []*fake{p}, []*fake{d}, func(o *router.Options) { o.LegKeys = keys })
	for _, path := range []string{"/tokenize", "/detokenize"} {
		body := `{"model":"m","prompt":"Hello"}`
		status, got := c.post(t, path, body)
		if want := fmt.Sprintf(`{"worker":"decode","path":%q}`, path); status != 200 || got != want {
			t.Errorf("POST %s = %d %s, want 200 %s", path, status, got, want)
		}
		l := d.nextLeg(t)
		if string(l.body) != body || l.hdr.Get("Authorization") != keys.Credential() {
			t.Errorf("POST %s reached decode with body %q and Authorization %q, want %q and the cluster credential", path, l.body, l.hdr.Get("Authorization"), body)
		}
	}
	status, got := c.post(t, "/tokenize", `{"model":"nope","prompt":"x"}`)
	d.nextLeg(t)
	if status != 404 || !strings.Contains(got, "model_not_found") {
		t.Errorf("unknown model: %d %s, want the worker's 404", status, got)
	}
	if status, _ := c.get(t, "/tokenize"); status != http.StatusMethodNotAllowed {
		t.Errorf("GET /tokenize = %d, want 405", status)
	}

	d.healthy.Store(false)
	c.rt.CheckNow(t.Context())
	c.rt.CheckNow(t.Context())
	if status, got := c.post(t, "/tokenize", `{"prompt":"x"}`); status != 200 || !strings.Contains(got, `"prefill"`) {
		t.Errorf("decode down: POST /tokenize = %d %s, want the prefill worker's answer", status, got)
	}
	p.nextLeg(t)
	p.healthy.Store(false)
	c.rt.CheckNow(t.Context())
	c.rt.CheckNow(t.Context())
	if status, got := c.post(t, "/tokenize", `{"prompt":"x"}`); status != http.StatusServiceUnavailable || !strings.Contains(got, `"error"`) {
		t.Errorf("no worker: POST /tokenize = %d %s, want 503 in OpenAI's shape", status, got)
	}
}

// TestTokenizeNeedsAPIKey: with an API key, the tokenizer endpoints need it
// as /v1/* does.
func TestTokenizeNeedsAPIKey(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", answer(200, decodeAnswer))
	c := newCluster(t, []*fake{p}, []*fake{d}, func(o *router.Options) { o.APIKey = "sekret-123" })
	for _, path := range []string{"/tokenize", "/detokenize"} {
		if status, _ := c.post(t, path, `{"prompt":"x"}`); status != http.StatusUnauthorized {
			t.Errorf("POST %s without the key = %d, want 401", path, status)
		}
		resp, body := c.do(t, "POST", path, `{"prompt":"x"}`, map[string]string{"Authorization": "Bearer sekret-123"})
		if resp.StatusCode != 200 {
			t.Errorf("POST %s with the key = %d %s, want 200", path, resp.StatusCode, body)
		}
		d.nextLeg(t)
	}
}
