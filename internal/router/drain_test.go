package router_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"tandem/internal/api/drain"
	"tandem/internal/router"
	"tandem/internal/testenv"
)

// refuse is a gen that answers every leg with the draining answer.
func refuse(w http.ResponseWriter, _ *http.Request, _ []byte) { drain.Refuse(w) }

// TestDrainingWorkerLegGoesElsewhere: a worker that answers a leg with the
// draining answer (it drains and the router's probes have not seen it yet)
// costs the client nothing: the sample goes to another worker of that role
// under a new room, the refusal is neither relayed nor counted against the
// worker's breaker, and the worker gets no new leg until its /ready says
// it is back.
func TestDrainingWorkerLegGoesElsewhere(t *testing.T) {
	for _, role := range []string{"prefill", "decode"} {
		t.Run(role, func(t *testing.T) {
			p1 := newFake(t, "prefill", answer(200, prefillAnswer))
			p2 := newFake(t, "prefill", answer(200, prefillAnswer))
			d1 := newFake(t, "decode", answer(200, decodeAnswer))
			d2 := newFake(t, "decode", answer(200, decodeAnswer))
			drainer := map[string]*fake{"prefill": p1, "decode": d1}[role]
			drainer.gen = refuse
			c := newCluster(t, []*fake{p1, p2}, []*fake{d1, d2}, func(o *router.Options) { o.PDThreshold = 0; o.BreakerFailures = 1 })
			for i := range 6 {
				if status, body := c.post(t, "/v1/completions", `{"prompt":"x"}`); status != 200 || body != decodeAnswer {
					t.Fatalf("request %d with %s draining: %d %q, want 200 and decode's answer", i, role, status, body)
				}
			}
			if n := len(drainer.got); n != 1 {
				t.Errorf("the draining %s worker got %d legs, want 1: after its refusal it gets none", role, n)
			}
			out := metricsText(t, c)
			if !strings.Contains(out, `tandem_router_worker_draining_refusals_total{role="`+role+`",worker="`+drainer.url()+`"} 1`) {
				t.Errorf("the router's metrics do not count the one refusal:\n%s", grepLines(out, "draining"))
			}
			if !strings.Contains(out, `tandem_router_worker_breaker_state{role="`+role+`",worker="`+drainer.url()+`"} 0`) ||
				strings.Contains(out, `tandem_router_worker_errors_total{kind="status",role="`+role+`",worker="`+drainer.url()+`"}`) {
				t.Errorf("the refusal counted against the worker (breaker failures: 1): \n%s", grepLines(out, drainer.url()))
			}
			if !strings.Contains(out, `tandem_router_worker_draining{role="`+role+`",worker="`+drainer.url()+`"} 1`) {
				t.Errorf("the worker is not shown draining:\n%s", grepLines(out, "worker_draining"))
			}

			// Its /ready says ok (a restart on the same address): back in.
			drainer.gen = answer(200, map[string]string{"prefill": prefillAnswer, "decode": decodeAnswer}[role])
			c.rt.CheckNow(context.Background())
			for range 4 {
				c.post(t, "/v1/completions", `{"prompt":"x"}`)
			}
			if n := len(drainer.got); n < 2 {
				t.Errorf("after its /ready answered 200 the worker got %d legs in all, want new ones", n)
			}
		})
	}
}

// TestAllDrainingIs503: when every worker of a role drains, the client
// gets a 503 with code draining (retry later), not a 502; more draining
// workers than attemptsMax are all tried before that.
func TestAllDrainingIs503(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	var ds []*fake
	for range 4 {
		ds = append(ds, newFake(t, "decode", refuse))
	}
	c := newCluster(t, []*fake{p}, ds, func(o *router.Options) { o.PDThreshold = 0 })
	status, body := c.post(t, "/v1/completions", `{"prompt":"x"}`)
	msg, typ, code := errorDoc(t, body)
	if status != 503 || code != drain.Code || typ != "service_unavailable_error" {
		t.Errorf("every decode worker draining: %d %s/%s %q, want 503 service_unavailable_error/draining", status, typ, code, msg)
	}
	for i, d := range ds {
		if n := len(d.got); n != 1 {
			t.Errorf("decode worker %d got %d legs, want 1 each: all four tried, beyond the three attempts of failures", i, n)
		}
	}

	ds[3].gen = answer(200, decodeAnswer) // one comes back (its /ready never said draining)
	c.rt.CheckNow(context.Background())
	if status, body := c.post(t, "/v1/completions", `{"prompt":"x"}`); status != 200 {
		t.Errorf("with one decode worker back: %d %s, want 200", status, body)
	}
}

// TestDrainingByProbe: a worker whose /ready answers 503 draining is out
// at once (one probe) and the router's /ready says so when no worker of a
// role is left; its legs in flight are not touched.
func TestDrainingByProbe(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", answer(200, decodeAnswer))
	c := newCluster(t, []*fake{p}, []*fake{d}, func(o *router.Options) { o.PDThreshold = 0 })
	d.draining.Store(true)
	c.rt.CheckNow(context.Background())
	if status, body := c.get(t, "/ready"); status != 503 || !strings.Contains(body, "no healthy decode worker") {
		t.Errorf("router /ready with its one decode worker draining = %d %s, want 503 naming decode", status, body)
	}
	if status, _ := c.get(t, "/health"); status != 200 {
		t.Errorf("router /health = %d, want 200 (alive)", status)
	}
	status, body := c.post(t, "/v1/completions", `{"prompt":"x"}`)
	if _, _, code := errorDoc(t, body); status != 503 || len(d.got) != 0 {
		t.Errorf("request with the decode worker draining: %d (code %s), %d legs to it; want 503 and no leg", status, code, len(d.got))
	}
}

// TestRouterDrain: the router's own drain. From its start /ready answers
// 503 while requests are still served, each answer with Connection: close;
// once the settle window passed (here cut short by Hurry), new requests
// get the draining answer; a stream in flight runs on, and when the
// drain's deadline passes EndRequests ends it with one error event and
// cancels its legs.
func TestRouterDrain(t *testing.T) {
	const token = "data: {\"choices\":[{\"index\":0,\"text\":\"a\"}]}\n\n"
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", nil)
	d.gen = func(w http.ResponseWriter, r *http.Request, body []byte) {
		if !strings.Contains(string(body), "hold") {
			writeEvents(w, token, "data: [DONE]\n\n")
			return
		}
		writeEvents(w, token)
		d.waitCancel(r)
	}
	c := newCluster(t, []*fake{p}, []*fake{d}, func(o *router.Options) { o.PDThreshold = 0; o.Name = "router-7" })

	resp, err := http.Post(c.srv.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"hold","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if got := resp.Header.Get(router.HeaderRouter); got != "router-7" {
		t.Errorf("answer's %s = %q, want the router's name", router.HeaderRouter, got)
	}
	rd := bufio.NewReader(resp.Body)
	if line, _ := rd.ReadString('\n'); !strings.Contains(line, `"a"`) {
		t.Fatalf("first event %q, want the first token", line)
	}

	hurry := make(chan struct{})
	refusing := make(chan struct{})
	done := make(chan drain.Result, 1)
	go func() {
		done <- c.rt.Gate().Drain(drain.Config{Settle: time.Hour, Timeout: time.Hour, Hurry: hurry, Refusing: func() { close(refusing) }})
	}()
	waitFor(t, func() bool { return c.rt.Gate().Phase() == drain.Settling })
	if status, body := c.get(t, "/ready"); status != 503 || !strings.Contains(body, `"draining"`) {
		t.Errorf("router /ready while settling = %d %s, want 503 draining", status, body)
	}
	if status, _ := c.get(t, "/health"); status != 200 {
		t.Errorf("router /health while settling = %d, want 200", status)
	}
	r2, err := http.Post(c.srv.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := io.ReadAll(r2.Body)
	r2.Body.Close()
	if r2.StatusCode != 200 || !strings.Contains(string(b2), "[DONE]") || !r2.Close { // Close: the answer said Connection: close
		t.Errorf("a request while settling got %d %q (close %v), want it served whole, with Connection: close", r2.StatusCode, b2, r2.Close)
	}

	close(hurry)
	<-refusing
	status, body := c.post(t, "/v1/completions", `{"prompt":"x"}`)
	if _, _, code := errorDoc(t, body); status != 503 || code != drain.Code {
		t.Errorf("a request after the settle window got %d %s, want 503 draining", status, body)
	}
	select {
	case res := <-done:
		t.Fatalf("the drain ended (%+v) with a stream in flight", res)
	case <-time.After(50 * time.Millisecond):
	}

	c.rt.EndRequests() // the drain's deadline passed
	rest, _ := io.ReadAll(rd)
	if msg, _, code := errorDoc(t, strings.TrimSpace(string(rest))); code != drain.Code || !strings.Contains(msg, "drain timeout") {
		t.Errorf("the stream in flight ended with %q, want one error event naming the drain timeout (code draining)", rest)
	}
	d.expectCancel(t)
	if res := <-done; res.Left != 0 {
		t.Errorf("drain = %+v, want nothing left once the stream ended", res)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, 10*time.Second, "the condition", cond)
}

// metricsText returns the router's /metrics.
func metricsText(t *testing.T, c *cluster) string {
	t.Helper()
	_, body := c.get(t, "/metrics")
	return body
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
