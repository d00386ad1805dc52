package router_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"tandem/internal/router"
)

// do sends a request with headers to the router.
func (c *cluster) do(t *testing.T, method, path, body string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, c.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestAPIKey(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", answer(200, decodeAnswer))
	c := newCluster(t, []*fake{p}, []*fake{d}, func(o *router.Options) { o.APIKey = "sekret-123" })
	gen := `{"prompt":"x"}`
	for _, tc := range []struct {
		method, path, auth string
		want               int
	}{
		{"POST", "/v1/completions", "", 401},
		{"POST", "/v1/completions", "Bearer wrong", 401},
		{"POST", "/v1/completions", "Basic sekret-123", 401},
		{"POST", "/v1/completions", "Bearer sekret-123", 200},
		{"POST", "/v1/completions", "bearer sekret-123", 200},
		{"GET", "/v1/models", "", 401},
		{"GET", "/v1/models", "Bearer sekret-123", 200},
		{"GET", "/v1/nothing", "", 401},
		{"GET", "/health", "", 200},
		{"GET", "/metrics", "", 200},
		{"GET", "/debug/rooms", "", 200},
	} {
		hdr := map[string]string{"Content-Type": "application/json"}
		if tc.auth != "" {
			hdr["Authorization"] = tc.auth
		}
		resp, body := c.do(t, tc.method, tc.path, gen, hdr)
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s with %q = %d %s, want %d", tc.method, tc.path, tc.auth, resp.StatusCode, body, tc.want)
			continue
		}
		if tc.want == 401 {
			_, typ, code := errorDoc(t, body)
			if typ != "invalid_request_error" || code != "invalid_api_key" || resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("401 body %s (WWW-Authenticate %q), want OpenAI's invalid_api_key shape", body, resp.Header.Get("WWW-Authenticate"))
			}
		}
	}
	if n := len(d.got); n != 2 { // decode answers only after its leg arrived; prefill may still be on its way
		t.Errorf("the decode worker got %d legs, want 2 (the two authorized generations)", n)
	}
}

func TestCORS(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", answer(200, decodeAnswer))
	preflight := map[string]string{"Origin": "https://app.example", "Access-Control-Request-Method": "POST",
		"Access-Control-Request-Headers": "authorization, content-type"}

	t.Run("default: none", func(t *testing.T) {
		c := newCluster(t, []*fake{p}, []*fake{d}, nil)
		resp, _ := c.do(t, "OPTIONS", "/v1/completions", "", preflight)
		if resp.StatusCode != 405 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight without --allowed-origins = %d, ACAO %q; want 405 and no CORS headers", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
		}
		resp, _ = c.do(t, "POST", "/v1/completions", `{"prompt":"x"}`, map[string]string{"Origin": "https://app.example"})
		if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("POST without --allowed-origins = %d, ACAO %q; want 200, no CORS header", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
		}
	})

	t.Run("allowed", func(t *testing.T) {
		c := newCluster(t, []*fake{p}, []*fake{d}, func(o *router.Options) {
			o.AllowedOrigins = []string{"https://app.example"}
			o.APIKey = "k" // a preflight carries no key and still passes
		})
		resp, body := c.do(t, "OPTIONS", "/v1/completions", "", preflight)
		h := resp.Header
		if resp.StatusCode != 204 || h.Get("Access-Control-Allow-Origin") != "https://app.example" ||
			!strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") ||
			!strings.Contains(strings.ToLower(h.Get("Access-Control-Allow-Headers")), "authorization") ||
			h.Get("Access-Control-Max-Age") == "" || !strings.Contains(h.Get("Vary"), "Origin") {
			t.Errorf("preflight = %d %s %v, want 204 with the Access-Control-* headers", resp.StatusCode, body, h)
		}
		resp, body = c.do(t, "POST", "/v1/completions", `{"prompt":"x"}`, map[string]string{"Origin": "https://app.example", "Authorization": "Bearer k"})
		if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" ||
			!strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "X-Request-Id") {
			t.Errorf("POST from an allowed origin = %d %s %v, want 200 with Access-Control-Allow-Origin", resp.StatusCode, body, resp.Header)
		}
		resp, _ = c.do(t, "POST", "/v1/completions", `{"prompt":"x"}`, map[string]string{"Origin": "https://evil.example", "Authorization": "Bearer k"})
		if resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("POST from another origin got Access-Control-Allow-Origin %q, want none", resp.Header.Get("Access-Control-Allow-Origin"))
		}
		resp, _ = c.do(t, "OPTIONS", "/v1/completions", "", map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
		if resp.StatusCode == 204 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight from another origin = %d, ACAO %q; want no CORS answer", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
		}
	})

	t.Run("bad origin option", func(t *testing.T) {
		_, err := router.New(router.Options{Prefill: []string{"p:1"}, Decode: []string{"d:1"}, AllowedOrigins: []string{"app.example/x"}})
		if err == nil || !strings.Contains(err.Error(), "allowed origin") {
			t.Errorf("New with origin app.example/x = %v, want an error naming the allowed origin", err)
		}
	})
}

func TestRequestID(t *testing.T) {
	prefillGot := make(chan struct{})
	p := newFake(t, "prefill", nil)
	p.gen = func(w http.ResponseWriter, r *http.Request, _ []byte) {
		close(prefillGot)
		p.waitCancel(r)
	}
	d := newFake(t, "decode", func(w http.ResponseWriter, r *http.Request, _ []byte) {
		<-prefillGot // fail once prefill holds its leg, so that both workers saw the request id
		writeJSONBody(w, 502, `{"error":{"message":"boom"}}`)
	})
	var lb logBuffer
	c := newCluster(t, []*fake{p}, []*fake{d}, withLog(&lb))

	resp, _ := c.do(t, "POST", "/v1/completions", `{"prompt":"x"}`, map[string]string{"X-Request-Id": "client-42"})
	if got := resp.Header.Get("X-Request-Id"); got != "client-42" {
		t.Errorf("X-Request-Id echoed %q, want the client's client-42", got)
	}
	pl, dl := p.nextLeg(t), d.nextLeg(t)
	if pl.hdr.Get(router.HeaderRequestID) != "client-42" || dl.hdr.Get(router.HeaderRequestID) != "client-42" {
		t.Errorf("legs carry request ids %q and %q, want client-42 on both", pl.hdr.Get(router.HeaderRequestID), dl.hdr.Get(router.HeaderRequestID))
	}
	if rooms := routerRooms(t, c); len(rooms) != 1 || rooms[0].RequestID != "client-42" {
		t.Errorf("router rooms = %+v, want one with request id client-42", rooms)
	}
	if lines := lb.lines("sample failed"); len(lines) != 1 || !strings.Contains(lines[0], "request=client-42") {
		t.Errorf("log lines of the failed request = %q, want one carrying request=client-42", lines)
	}

	for _, bad := range []string{"", "has space", strings.Repeat("x", 129), "tab\there"} {
		hdr := map[string]string{}
		if bad != "" {
			hdr["X-Request-Id"] = bad
		}
		resp, _ := c.do(t, "GET", "/health", "", hdr)
		got := resp.Header.Get("X-Request-Id")
		if got == bad || !strings.HasPrefix(got, "req-") || len(got) != 28 {
			t.Errorf("X-Request-Id %q: answered %q, want a fresh req-... id instead", bad, got)
		}
	}
}
