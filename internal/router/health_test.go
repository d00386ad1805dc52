package router_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"tandem/internal/router"
)

func TestHealthTakesADeadWorkerOutAndPutsItBack(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", answer(200, decodeAnswer))
	c := newCluster(t, []*fake{p}, []*fake{d}, nil)
	ctx := context.Background()
	steps := []struct {
		healthy    bool
		wantStatus int // router /ready after the round
	}{
		{false, 200}, // one failure: still in
		{false, 503}, // two in a row: out
		{false, 503},
		{true, 200}, // one success: back
		{false, 200},
		{true, 200}, // the failure streak restarts
		{false, 200},
		{false, 503},
	}
	for i, s := range steps {
		d.healthy.Store(s.healthy)
		c.rt.CheckNow(ctx)
		status, body := c.get(t, "/ready")
		if status != s.wantStatus {
			t.Fatalf("step %d (decode healthy %v): GET /ready = %d %s, want %d", i, s.healthy, status, body, s.wantStatus)
		}
		if status == 503 && !strings.Contains(body, "no healthy decode worker") {
			t.Errorf("step %d: GET /ready = %s, want the reason to name the decode role", i, body)
		}
		if hs, hb := c.get(t, "/health"); hs != 200 || (status == 503) != strings.Contains(hb, `"unavailable"`) {
			t.Errorf("step %d: GET /health = %d %s, want 200 (the router is alive), saying unavailable when /ready is 503", i, hs, hb)
		}
	}
	// Out: a request gets 503 naming the missing role; back in: it succeeds.
	status, body := c.post(t, "/v1/completions", `{"prompt":"x"}`)
	if msg, _, _ := errorDoc(t, body); status != 503 || !strings.Contains(msg, "decode") || strings.Contains(msg, d.url()) {
		t.Errorf("with the decode worker out: POST = %d %q, want 503 naming the decode role, not the worker", status, msg)
	}
	d.healthy.Store(true)
	c.rt.CheckNow(ctx)
	if status, body := c.post(t, "/v1/completions", `{"prompt":"x"}`); status != 200 || body != decodeAnswer {
		t.Errorf("after the decode worker came back: POST = %d %q, want 200 and decode's answer", status, body)
	}
}

func TestNoHealthyWorkers(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", answer(200, decodeAnswer))
	cases := []struct {
		name           string
		prefillUp      bool
		decodeUp       bool
		wantRole       string
		wantHealthText string
	}{
		{"no prefill", false, true, "prefill", "no healthy prefill worker"},
		{"no decode", true, false, "decode", "no healthy decode worker"},
		{"neither", false, false, "prefill", "no healthy prefill or decode worker"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p.healthy.Store(tc.prefillUp)
			d.healthy.Store(tc.decodeUp)
			c := newCluster(t, []*fake{p}, []*fake{d}, nil) // one round: a worker starts out until it passes one
			status, body := c.post(t, "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`)
			msg, typ, _ := errorDoc(t, body)
			if status != 503 || typ != "service_unavailable_error" || !strings.Contains(msg, "no healthy worker of role "+tc.wantRole) {
				t.Errorf("POST = %d %q (%s), want 503 naming role %s", status, msg, typ, tc.wantRole)
			}
			status, body = c.get(t, "/ready")
			if status != 503 || !strings.Contains(body, tc.wantHealthText) {
				t.Errorf("GET /ready = %d %s, want 503 with %q", status, body, tc.wantHealthText)
			}
		})
	}
}

func TestRoleMismatchKeepsWorkerOut(t *testing.T) {
	p := newFake(t, "decode", answer(200, prefillAnswer)) // a decode worker given as --prefill
	d := newFake(t, "decode", answer(200, decodeAnswer))
	var lb logBuffer
	c := newCluster(t, []*fake{p}, []*fake{d}, withLog(&lb))
	c.rt.CheckNow(context.Background())
	status, body := c.post(t, "/v1/completions", `{"prompt":"x"}`)
	if msg, _, _ := errorDoc(t, body); status != 503 || !strings.Contains(msg, "no healthy worker of role prefill") {
		t.Errorf("POST = %d %q, want 503: no healthy prefill worker", status, msg)
	}
	if got := lb.lines("says it is a decode worker", p.url()); len(got) == 0 {
		t.Errorf("the log does not say that %s is a decode worker:\n%s", p.url(), lb.String())
	}
}

func TestLeastLoadedWorkerIsPicked(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	busy := newFake(t, "decode", answer(200, decodeAnswer))
	idle := newFake(t, "decode", answer(200, decodeAnswer))
	busy.setStatus(3, 8)
	idle.setStatus(1, 2)
	c := newCluster(t, []*fake{p}, []*fake{busy, idle}, nil)
	for i := range 4 {
		if status, body := c.post(t, "/v1/completions", `{"prompt":"x"}`); status != 200 {
			t.Fatalf("request %d: %d %s", i, status, body)
		}
	}
	if len(busy.got) != 0 || len(idle.got) != 4 {
		t.Errorf("legs: busy worker (load 11) got %d, idle worker (load 3) got %d; want 0 and 4", len(busy.got), len(idle.got))
	}
	// The loads swap: the next round's report moves requests over.
	busy.setStatus(0, 0)
	c.rt.CheckNow(context.Background())
	if status, _ := c.post(t, "/v1/completions", `{"prompt":"x"}`); status != 200 || len(busy.got) != 1 {
		t.Errorf("after busy reported load 0: it got %d legs, want 1", len(busy.got))
	}
}

func TestModelsAreProxiedFromDecode(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", answer(200, decodeAnswer))
	c := newCluster(t, []*fake{p}, []*fake{d}, nil)
	status, body := c.get(t, "/v1/models")
	if status != 200 || !strings.Contains(body, `"m-decode"`) {
		t.Errorf("GET /v1/models = %d %s, want the decode worker's list", status, body)
	}
}

// TestModelIDWithEscapedSlash: /v1/models/{id} reaches the worker with
// the path as the client escaped it, so an id like org/model (%2F) is one
// segment there too.
func TestModelIDWithEscapedSlash(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", answer(200, decodeAnswer))
	c := newCluster(t, []*fake{p}, []*fake{d}, nil)
	status, body := c.get(t, "/v1/models/org%2Fmodel")
	if status != 200 || !strings.Contains(body, `"id":"org/model"`) {
		t.Errorf("GET /v1/models/org%%2Fmodel = %d %s, want 200 with id org/model", status, body)
	}
}

func TestBadRequests(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", answer(200, decodeAnswer))
	c := newCluster(t, []*fake{p}, []*fake{d}, func(o *router.Options) { o.MaxBodyBytes = 100 })
	cases := []struct {
		method, path, body string
		wantStatus         int
		wantParam          string
	}{
		{"POST", "/v1/completions", `not json`, 400, ""},
		{"POST", "/v1/completions", `[1,2]`, 400, ""},
		{"POST", "/v1/completions", `{"prompt":"x","n":9}`, 400, "n"},
		{"POST", "/v1/completions", `{"prompt":"x","n":1.5}`, 400, "n"},
		{"POST", "/v1/completions", `{"prompt":"x","seed":"7"}`, 400, "seed"},
		{"POST", "/v1/completions", `{"prompt":"x","stream":"yes"}`, 400, "stream"},
		{"POST", "/v1/completions", `{"prompt":"` + strings.Repeat("x", 200) + `"}`, 413, ""},
		{"GET", "/v1/completions", ``, 405, ""},
		{"GET", "/nowhere", ``, 404, ""},
	}
	for _, tc := range cases {
		req, _ := http.NewRequest(tc.method, c.srv.URL+tc.path, strings.NewReader(tc.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Error struct {
				Param *string `json:"param"`
			} `json:"error"`
		}
		err = json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		param := ""
		if doc.Error.Param != nil {
			param = *doc.Error.Param
		}
		if resp.StatusCode != tc.wantStatus || err != nil || param != tc.wantParam {
			t.Errorf("%s %s %.40q = %d param %q (%v), want %d param %q", tc.method, tc.path, tc.body, resp.StatusCode, param, err, tc.wantStatus, tc.wantParam)
		}
	}
	if len(p.got)+len(d.got) != 0 {
		t.Errorf("bad requests reached the workers: %d prefill legs, %d decode legs", len(p.got), len(d.got))
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	cases := []struct {
		name string
		o    router.Options
		want string
	}{
		{"no prefill", router.Options{Decode: []string{"http://d:1"}}, "no --prefill worker"},
		{"no decode", router.Options{Prefill: []string{"http://p:1"}}, "no --decode worker"},
		{"twice", router.Options{Prefill: []string{"p:1", "http://p:1/"}, Decode: []string{"d:1"}}, "given twice"},
		{"both roles", router.Options{Prefill: []string{"w:1"}, Decode: []string{"http://w:1"}}, "both as a prefill and as a decode"},
		{"scheme", router.Options{Prefill: []string{"ftp://p:1"}, Decode: []string{"d:1"}}, "http(s)://host:port"},
		{"negative", router.Options{Prefill: []string{"p:1"}, Decode: []string{"d:1"}, LegTimeout: -1}, "leg timeout is negative"},
	}
	for _, tc := range cases {
		_, err := router.New(tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%s) = %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}
