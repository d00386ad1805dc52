package router_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"tandem/internal/pd/debugdoc"
	"tandem/internal/router"
)

// withThreshold turns selective disaggregation on at n tokens.
func withThreshold(n int) func(*router.Options) {
	return func(o *router.Options) { o.PDThreshold = n }
}

// tokenIDs is a completions prompt of n token ids.
func tokenIDs(n int) string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "7"
	}
	return "[" + strings.Join(ids, ",") + "]"
}

// TestShortPromptRunsLocally: under the threshold, a request goes as one
// local leg (X-Tandem-Leg: local, no X-Tandem-Prefill, the client's body
// unchanged) to the decode worker and none to the prefill worker; the
// decision is counted and shown in /debug/rooms.
func TestShortPromptRunsLocally(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	pieces := strings.SplitAfter(chatStream, "\n\n")
	d := newFake(t, "decode", stream(pieces...))
	c := newCluster(t, []*fake{p}, []*fake{d}, withThreshold(256))
	client := `{"messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":5}`
	status, body := c.post(t, "/v1/chat/completions", client)
	if status != 200 || body != chatStream {
		t.Fatalf("POST = %d %q, want 200 and decode's stream byte for byte", status, body)
	}
	l := d.nextLeg(t)
	if l.hdr.Get(router.HeaderLeg) != "local" || l.hdr.Get(router.HeaderPrefill) != "" || string(l.body) != client {
		t.Errorf("decode worker got leg %q, prefill %q, body %s; want a local leg with the client's body and no prefill address",
			l.hdr.Get(router.HeaderLeg), l.hdr.Get(router.HeaderPrefill), l.body)
	}
	if !roomPattern.MatchString(l.hdr.Get(router.HeaderRoom)) || l.hdr.Get(router.HeaderRequestID) == "" {
		t.Errorf("local leg room %q, request id %q: want both", l.hdr.Get(router.HeaderRoom), l.hdr.Get(router.HeaderRequestID))
	}
	if n := len(p.got); n != 0 {
		t.Errorf("the prefill worker got %d legs, want none", n)
	}
	_, m := c.get(t, "/metrics")
	if v := metricValue(t, m, `tandem_router_pd_decisions_total{path="local",reason="short_prompt"}`); v != 1 {
		t.Errorf("local/short_prompt decisions = %v, want 1", v)
	}
	rooms := routerRooms(t, c)
	if len(rooms) != 1 || rooms[0].Decision == nil {
		t.Fatalf("router rooms = %+v, want one with a decision", rooms)
	}
	r := rooms[0]
	if dc := r.Decision; dc.Path != "local" || dc.Reason != "short_prompt" || dc.CountedBy != "byte_bound" || dc.Threshold != 256 ||
		dc.PromptTokens <= 0 || dc.PromptTokens >= 256 || r.Prefill != "" || r.Decode != d.url() || r.State != "succeeded" {
		t.Errorf("room = %+v, decision %+v; want a succeeded local room on the decode worker counted by its bytes", r, *dc)
	}
	if !hasEvent(r, "local_ok") {
		t.Errorf("room history %+v has no local_ok", r.History)
	}
}

// hasEvent reports whether a room's history has event ev.
func hasEvent(r debugdoc.Room, ev string) bool {
	for _, tr := range r.History {
		if tr.Event == ev {
			return true
		}
	}
	return false
}

// TestLongPromptIsDisaggregated: at or above the threshold (token ids
// count exactly; text whose bytes bound it far above is not counted),
// both legs go out as before.
func TestLongPromptIsDisaggregated(t *testing.T) {
	for _, tc := range []struct{ name, client, countedBy string }{
		{"token ids", `{"prompt":` + tokenIDs(64) + `}`, "token_ids"},
		{"long text", `{"prompt":"` + strings.Repeat("word ", 200) + `"}`, "byte_bound"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newFake(t, "prefill", answer(200, prefillAnswer))
			d := newFake(t, "decode", answer(200, decodeAnswer))
			c := newCluster(t, []*fake{p}, []*fake{d}, withThreshold(64))
			if status, body := c.post(t, "/v1/completions", tc.client); status != 200 || body != decodeAnswer {
				t.Fatalf("POST = %d %s", status, body)
			}
			if pl, dl := p.nextLeg(t), d.nextLeg(t); pl.hdr.Get(router.HeaderLeg) != "prefill" || dl.hdr.Get(router.HeaderLeg) != "decode" {
				t.Errorf("legs %q and %q, want prefill and decode", pl.hdr.Get(router.HeaderLeg), dl.hdr.Get(router.HeaderLeg))
			}
			_, m := c.get(t, "/metrics")
			if v := metricValue(t, m, `tandem_router_pd_decisions_total{path="disaggregated",reason="long_prompt"}`); v != 1 {
				t.Errorf("disaggregated/long_prompt decisions = %v, want 1", v)
			}
			if dc := routerRooms(t, c)[0].Decision; dc == nil || dc.Path != "disaggregated" || dc.CountedBy != tc.countedBy {
				t.Errorf("decision %+v, want disaggregated counted by %s", dc, tc.countedBy)
			}
		})
	}
}

// TestAmbiguousPromptIsTokenized: text whose byte bound is over the
// threshold but under tokenizeBand times it is counted by a decode
// worker's /tokenize (the prompt alone, with the credential-bearing
// client), and the exact count decides; a failed count disaggregates.
func TestAmbiguousPromptIsTokenized(t *testing.T) {
	prompt := strings.Repeat("abcd ", 40) // 200 bytes: over 64, under 8*64
	for _, tc := range []struct {
		name         string
		count        int
		path, reason string
		by           string
	}{
		{"short by count", 50, "local", "short_prompt", "tokenize"},
		{"long by count", 64, "disaggregated", "long_prompt", "tokenize"},
		{"count fails", -1, "disaggregated", "count_failed", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newFake(t, "prefill", answer(200, prefillAnswer))
			d := newFake(t, "decode", answer(200, decodeAnswer))
			var asked string
			d.count = func(body []byte) int { asked = string(body); return tc.count }
			c := newCluster(t, []*fake{p}, []*fake{d}, withThreshold(64))
			if status, body := c.post(t, "/v1/completions", `{"model":"m","prompt":"`+prompt+`","max_tokens":3}`); status != 200 || body != decodeAnswer {
				t.Fatalf("POST = %d %s", status, body)
			}
			if want := `{"prompt":"` + prompt + `"}`; asked != want {
				t.Errorf("/tokenize body %s, want %s", asked, want)
			}
			if tl := d.nextLeg(t); tl.path != "/tokenize" {
				t.Errorf("the decode worker's first request is %s, want /tokenize", tl.path)
			}
			if l := d.nextLeg(t); l.hdr.Get(router.HeaderLeg) != map[string]string{"local": "local", "disaggregated": "decode"}[tc.path] {
				t.Errorf("decode leg %q for path %s", l.hdr.Get(router.HeaderLeg), tc.path)
			}
			_, m := c.get(t, "/metrics")
			if v := metricValue(t, m, fmt.Sprintf(`tandem_router_pd_decisions_total{path=%q,reason=%q}`, tc.path, tc.reason)); v != 1 {
				t.Errorf("%s/%s decisions = %v, want 1", tc.path, tc.reason, v)
			}
			if dc := routerRooms(t, c)[0].Decision; dc == nil || dc.CountedBy != tc.by || (tc.count >= 0 && dc.PromptTokens != tc.count) {
				t.Errorf("decision %+v, want counted by %q", dc, tc.by)
			}
		})
	}
}

// TestNoPrefillWorkerRunsLocally: with selective disaggregation on, a long
// prompt runs as a local leg when no prefill worker is in (reason
// no_prefill_worker); with it off (threshold 0) the request fails as
// before.
func TestNoPrefillWorkerRunsLocally(t *testing.T) {
	for _, th := range []int{16, 0} {
		p := newFake(t, "prefill", answer(200, prefillAnswer))
		p.healthy.Store(false)
		d := newFake(t, "decode", answer(200, decodeAnswer))
		c := newCluster(t, []*fake{p}, []*fake{d}, withThreshold(th))
		c.rt.CheckNow(context.Background()) // the second failed probe takes p out
		status, body := c.post(t, "/v1/completions", `{"prompt":`+tokenIDs(32)+`}`)
		if th == 0 {
			if status != 503 {
				t.Errorf("threshold 0, no prefill worker: %d %s, want 503", status, body)
			}
			continue
		}
		if status != 200 || body != decodeAnswer {
			t.Fatalf("no prefill worker: %d %s, want decode's answer", status, body)
		}
		if l := d.nextLeg(t); l.hdr.Get(router.HeaderLeg) != "local" {
			t.Errorf("leg %q, want local", l.hdr.Get(router.HeaderLeg))
		}
		_, m := c.get(t, "/metrics")
		if v := metricValue(t, m, `tandem_router_pd_decisions_total{path="local",reason="no_prefill_worker"}`); v != 1 {
			t.Errorf("local/no_prefill_worker decisions = %v, want 1", v)
		}
	}
}

// TestLocalLegRetriesLikeDecode: a local leg that fails before anything
// reached the client is retried on another decode worker (a local leg
// again, a new room); one cut after its first token is not; the failures
// feed the worker's breaker and name the local leg.
func TestLocalLegRetriesLikeDecode(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	bad := newFake(t, "decode", answer(500, `{"error":{"message":"engine failed","type":"server_error"}}`))
	good := newFake(t, "decode", answer(200, decodeAnswer))
	good.setStatus(5, 0) // bad is picked first
	c := newCluster(t, []*fake{p}, []*fake{bad, good}, func(o *router.Options) { o.PDThreshold = 256; o.BreakerFailures = 1; o.BreakerCooldown = time.Hour })
	if status, body := c.post(t, "/v1/completions", `{"prompt":"x"}`); status != 200 || body != decodeAnswer {
		t.Fatalf("POST = %d %s, want the second decode worker's answer", status, body)
	}
	first, second := bad.nextLeg(t), good.nextLeg(t)
	if first.hdr.Get(router.HeaderLeg) != "local" || second.hdr.Get(router.HeaderLeg) != "local" ||
		first.hdr.Get(router.HeaderRoom) == second.hdr.Get(router.HeaderRoom) {
		t.Errorf("legs %q (room %s) then %q (room %s), want two local legs under two rooms", first.hdr.Get(router.HeaderLeg),
			first.hdr.Get(router.HeaderRoom), second.hdr.Get(router.HeaderLeg), second.hdr.Get(router.HeaderRoom))
	}
	_, m := c.get(t, "/metrics")
	if v := metricValue(t, m, "tandem_router_retries_total"); v != 1 {
		t.Errorf("retries = %v, want 1", v)
	}
	if v := metricValue(t, m, `tandem_router_pd_decisions_total{path="local",reason="short_prompt"}`); v != 2 {
		t.Errorf("local decisions = %v, want 2 (one per attempt)", v)
	}
	if v := metricValue(t, m, fmt.Sprintf(`tandem_router_worker_breaker_state{role="decode",worker=%q}`, bad.url())); v != 2 {
		t.Errorf("the failing worker's breaker = %v, want 2 (open)", v)
	}
	rooms := routerRooms(t, c)
	if len(rooms) != 2 || rooms[1].State != "failed" || !strings.Contains(rooms[1].Reason, "local leg") {
		t.Errorf("rooms %+v, want the failed first attempt naming the local leg", rooms)
	}

	// Cut after the first token: one error event, no retry.
	cut := newFake(t, "decode", func(w http.ResponseWriter, r *http.Request, _ []byte) {
		writeEvents(w, "data: {\"choices\":[{\"index\":0,\"text\":\"a\"}]}\n\n")
		panic(http.ErrAbortHandler)
	})
	other := newFake(t, "decode", answer(200, decodeAnswer))
	other.setStatus(5, 0)
	c2 := newCluster(t, []*fake{p}, []*fake{cut, other}, withThreshold(256))
	status, body := c2.post(t, "/v1/completions", `{"prompt":"x","stream":true}`)
	if msg, _, _ := errorDoc(t, body[strings.LastIndex(body, "data: "):]); status != 200 || len(other.got) != 0 || !strings.Contains(msg, "local leg") {
		t.Errorf("cut local stream: %d %q, %d legs to the other worker; want one error event naming the local leg and no retry", status, body, len(other.got))
	}
}

// TestClientAbortCancelsTheLocalLeg: a client that goes away cancels its
// local leg on the decode worker.
func TestClientAbortCancelsTheLocalLeg(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", nil)
	d.gen = func(w http.ResponseWriter, r *http.Request, _ []byte) {
		writeEvents(w, "data: {\"choices\":[{\"index\":0,\"text\":\"a\"}]}\n\n")
		d.waitCancel(r)
	}
	c := newCluster(t, []*fake{p}, []*fake{d}, withThreshold(256))
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.srv.URL+"/v1/completions", strings.NewReader(`{"prompt":"x","stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	io.ReadAtLeast(resp.Body, buf, 1) // the first event is out
	cancel()
	resp.Body.Close()
	room := d.expectCancel(t)
	if l := d.nextLeg(t); l.hdr.Get(router.HeaderRoom) != room || l.hdr.Get(router.HeaderLeg) != "local" {
		t.Errorf("cancelled room %s, leg %+v; want the local leg's", room, l.hdr)
	}
	if n := len(p.got); n != 0 {
		t.Errorf("prefill got %d legs", n)
	}
}

// TestNegativeThresholdIsRefused: a negative threshold is a
// configuration error.
func TestNegativeThresholdIsRefused(t *testing.T) {
	_, err := router.New(router.Options{Prefill: []string{"http://a:1"}, Decode: []string{"http://b:1"}, PDThreshold: -1})
	if err == nil || !strings.Contains(err.Error(), "threshold") {
		t.Errorf("New with PDThreshold -1: %v, want an error naming the threshold", err)
	}
}

// TestPrefillPickedByQueuedTokens: through /pd/status, the router sends a
// prompt to the prefill worker with fewer queued prefill tokens, though it
// reports more requests.
func TestPrefillPickedByQueuedTokens(t *testing.T) {
	busy := newFake(t, "prefill", answer(200, prefillAnswer))
	idle := newFake(t, "prefill", answer(200, prefillAnswer))
	n1, n2 := 4000, 100
	busy.status.Running, busy.status.PrefillQueueTokens = 1, &n1 // one long prompt computing
	idle.status.Waiting, idle.status.Running, idle.status.PrefillQueueTokens = 3, 2, &n2
	d := newFake(t, "decode", answer(200, decodeAnswer))
	c := newCluster(t, []*fake{busy, idle}, []*fake{d}, nil)
	if status, body := c.post(t, "/v1/completions", `{"prompt":`+tokenIDs(40)+`}`); status != 200 {
		t.Fatalf("POST = %d %s", status, body)
	}
	idle.nextLeg(t)
	if n := len(busy.got); n != 0 {
		t.Errorf("the worker with 4000 queued tokens got %d legs, want none", n)
	}
	_, body := c.get(t, "/debug/rooms")
	if !strings.Contains(body, `"prefill_queue_tokens":4000`) {
		t.Errorf("/debug/rooms workers do not show the reported queue: %s", body)
	}
}

// TestTTFTPhases: the prefill worker's timing header and the decode
// worker's timing comment (before [DONE]) become the request's phases in /debug/rooms and
// tandem_router_ttft_phase_seconds, beside the router's own time to first
// token; neither reaches the client.
func TestTTFTPhases(t *testing.T) {
	p := newFake(t, "prefill", func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("X-Tandem-Timing", "queue_ms=5.000, prefill_ms=20.000, transfer_ms=1.500")
		writeJSONBody(w, 200, prefillAnswer)
	})
	pieces := strings.SplitAfter(chatStream, "\n\n")
	d := newFake(t, "decode", func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		timed := append(append(pieces[:len(pieces)-2:len(pieces)-2], ": x-tandem-timing first_decode_ms=0.250\n\n"), pieces[len(pieces)-2:]...)
		writeEvents(w, timed...)
	})
	c := newCluster(t, []*fake{p}, []*fake{d}, nil)
	resp, err := http.Post(c.srv.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != chatStream || resp.Header.Get("X-Tandem-Timing") != "" {
		t.Fatalf("client got %q with timing header %q; want decode's stream without the timing comment", body, resp.Header.Get("X-Tandem-Timing"))
	}
	rooms := routerRooms(t, c)
	if len(rooms) != 1 || rooms[0].Phases == nil {
		t.Fatalf("rooms %+v, want one with phases", rooms)
	}
	ph := rooms[0].Phases
	if ph.QueueMS == nil || *ph.QueueMS != 5 || ph.PrefillMS == nil || *ph.PrefillMS != 20 || ph.TransferMS == nil || *ph.TransferMS != 1.5 ||
		ph.FirstDecodeMS == nil || *ph.FirstDecodeMS != 0.25 || ph.TTFTMS == nil || *ph.TTFTMS <= 0 {
		t.Errorf("phases %+v, want queue 5, prefill 20, transfer 1.5, first decode 0.25 and a TTFT", *ph)
	}
	_, m := c.get(t, "/metrics")
	for _, phase := range []string{"queue", "prefill", "transfer", "first_decode"} {
		if v := metricValue(t, m, fmt.Sprintf(`tandem_router_ttft_phase_seconds_count{phase=%q}`, phase)); v != 1 {
			t.Errorf("phase %s observed %v times, want 1", phase, v)
		}
	}
	if v := metricValue(t, m, `tandem_router_ttft_phase_seconds_sum{phase="prefill"}`); v != 0.02 {
		t.Errorf("prefill phase sum %v, want 0.02", v)
	}
	if v := metricValue(t, m, `tandem_router_time_to_first_token_seconds_count{endpoint="chat"}`); v != 1 {
		t.Errorf("TTFT observed %v times, want 1", v)
	}
}

// TestEachEventGoesOutAtOnce: the router forwards each of decode's events
// (one per engine step) to the client as its own chunk before the next
// exists: the fake writes event i+1 only once the client has read event
// i, so a router that held or merged events would never finish.
func TestEachEventGoesOutAtOnce(t *testing.T) {
	const steps = 8
	read := make(chan int)
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for i := range steps {
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"text\":\"t%d\"}]}\n\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-read:
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Second):
				return // the client never saw event i: it fails below
			}
		}
		io.WriteString(w, "data: [DONE]\n\n")
	})
	for _, th := range []int{0, 256} { // disaggregated, then a local leg
		c := newCluster(t, []*fake{p}, []*fake{d}, withThreshold(th))
		resp, err := http.Post(c.srv.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x","stream":true}`))
		if err != nil {
			t.Fatal(err)
		}
		rd := bufio.NewReader(resp.Body)
		for i := range steps {
			line, err := rd.ReadString('\n')
			if err != nil || !strings.Contains(line, fmt.Sprintf(`"t%d"`, i)) {
				t.Fatalf("threshold %d: event %d: %q, %v; want its own chunk before the next step", th, i, line, err)
			}
			rd.ReadString('\n') // the blank line ending the event
			read <- i
		}
		if rest, _ := io.ReadAll(rd); string(rest) != "data: [DONE]\n\n" {
			t.Errorf("threshold %d: after the steps: %q", th, rest)
		}
		resp.Body.Close()
	}
}

// TestAnsweredThenClosedIsSucceeded: a client that closes its connection
// as soon as it has read [DONE] got the whole answer: its room is recorded
// succeeded, not failed with client_abort (the decode leg was still being
// drained when the client left).
func TestAnsweredThenClosedIsSucceeded(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", func(w http.ResponseWriter, r *http.Request, _ []byte) {
		writeEvents(w, "data: {\"choices\":[{\"index\":0,\"text\":\"a\"}]}\n\n", "data: [DONE]\n\n")
		<-r.Context().Done() // the response stays open: the router drains it until it gives up or the request ends
	})
	c := newCluster(t, []*fake{p}, []*fake{d}, nil)
	resp, err := http.Post(c.srv.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(resp.Body)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended before [DONE]: %v", err)
		}
		if strings.HasPrefix(line, "data: [DONE]") {
			break
		}
	}
	resp.Body.Close()
	var rooms []debugdoc.Room
	deadline := time.Now().Add(10 * time.Second)
	for rooms = routerRooms(t, c); len(rooms) != 1 || !rooms[0].Terminal(); rooms = routerRooms(t, c) {
		if time.Now().After(deadline) {
			t.Fatalf("the room never ended: %+v", rooms)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if rooms[0].State != "succeeded" {
		t.Errorf("room %s (%s), want succeeded: the client had the whole answer", rooms[0].State, rooms[0].Reason)
	}
}

func tokensp(n int) *int { return &n }

// withSpill turns selective disaggregation on at threshold tokens, with
// long prompts spilling to a decode worker at ratio.
func withSpill(threshold int, ratio float64) func(*router.Options) {
	return func(o *router.Options) { o.PDThreshold, o.PDSpill = threshold, ratio }
}

// TestLongPromptSpillsWhenPrefillIsBusy: a long prompt runs as a local leg
// on the decode worker when the prefill worker's queued tokens (plus the
// prompt) are at least PDSpill times the decode worker's (plus the
// prompt); each spilled prompt counts on the decode worker's queue until
// its next report, so the spills stop once the decode worker would be as
// far behind; with the prefill worker's queue short, or PDSpill 0, or a
// decode worker that reports no queue, long prompts are disaggregated.
// Decisions are counted under reason prefill_busy and show the weighed
// queues in /debug/rooms.
func TestLongPromptSpillsWhenPrefillIsBusy(t *testing.T) {
	setup := func(t *testing.T, prefillQueue int, decodeQueue *int, ratio float64) (*fake, *fake, *cluster) {
		p := newFake(t, "prefill", answer(200, prefillAnswer))
		d := newFake(t, "decode", answer(200, decodeAnswer))
		p.status.PrefillQueueTokens = &prefillQueue
		d.status.PrefillQueueTokens = decodeQueue
		return p, d, newCluster(t, []*fake{p}, []*fake{d}, withSpill(64, ratio))
	}
	long := `{"prompt":` + tokenIDs(200) + `,"max_tokens":2}`
	legs := func(t *testing.T, c *cluster, p, d *fake, n int) []string {
		t.Helper()
		var got []string
		for range n {
			if status, body := c.post(t, "/v1/completions", long); status != 200 || body != decodeAnswer {
				t.Fatalf("POST = %d %s", status, body)
			}
			l := d.nextLeg(t)
			got = append(got, l.hdr.Get(router.HeaderLeg))
			if l.hdr.Get(router.HeaderLeg) == "decode" {
				p.nextLeg(t)
			}
		}
		return got
	}
	t.Run("busy", func(t *testing.T) {
		zero := 0
		p, d, c := setup(t, 1000, &zero, 2)
		// Qp+n = 1200 against 2·(Qd+n): Qd = 0, 200, 400 spill (400, 800,
		// 1200 <= 1200); Qd = 600 does not (1600).
		got := legs(t, c, p, d, 4)
		if want := []string{"local", "local", "local", "decode"}; strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("legs to the decode worker %v, want %v", got, want)
		}
		_, m := c.get(t, "/metrics")
		if v := metricValue(t, m, `tandem_router_pd_decisions_total{path="local",reason="prefill_busy"}`); v != 3 {
			t.Errorf("local/prefill_busy decisions = %v, want 3", v)
		}
		if v := metricValue(t, m, `tandem_router_pd_decisions_total{path="disaggregated",reason="long_prompt"}`); v != 1 {
			t.Errorf("disaggregated/long_prompt decisions = %v, want 1", v)
		}
		var spilled, kept int
		for _, r := range routerRooms(t, c) {
			dc := r.Decision
			if dc == nil || dc.PrefillQueueTokens == nil || dc.LocalQueueTokens == nil {
				t.Fatalf("room %+v: want a decision with the weighed queues", r)
			}
			switch {
			case dc.Path == "local" && dc.Reason == "prefill_busy" && r.Prefill == "" && *dc.PrefillQueueTokens == 1000:
				spilled++
			case dc.Path == "disaggregated" && dc.Reason == "long_prompt" && *dc.LocalQueueTokens == 600:
				kept++
			default:
				t.Errorf("room %+v, decision %+v", r, *dc)
			}
		}
		if spilled != 3 || kept != 1 {
			t.Errorf("rooms: %d spilled, %d disaggregated; want 3 and 1", spilled, kept)
		}
	})
	for _, tc := range []struct {
		name    string
		queue   int
		decode  *int
		ratio   float64
		wantLeg string
	}{
		{"prefill queue short", 100, tokensp(0), 2, "decode"}, // 300 < 2·200
		{"spill off", 100000, tokensp(0), 0, "decode"},
		{"decode queue unknown", 100000, nil, 2, "decode"},
		{"ratio 1, equal queues", 500, tokensp(500), 1, "local"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, d, c := setup(t, tc.queue, tc.decode, tc.ratio)
			if got := legs(t, c, p, d, 1); got[0] != tc.wantLeg {
				t.Errorf("leg to the decode worker %q, want %q", got[0], tc.wantLeg)
			}
		})
	}
	// A short prompt is local by its length, whatever the queues.
	zero := 0
	p, d, c := setup(t, 100000, &zero, 2)
	if status, body := c.post(t, "/v1/completions", `{"prompt":`+tokenIDs(10)+`}`); status != 200 || body != decodeAnswer {
		t.Fatalf("POST = %d %s", status, body)
	}
	if l := d.nextLeg(t); l.hdr.Get(router.HeaderLeg) != "local" || len(p.got) != 0 {
		t.Errorf("short prompt: leg %q, %d prefill legs", l.hdr.Get(router.HeaderLeg), len(p.got))
	}
	if dc := routerRooms(t, c)[0].Decision; dc.Reason != "short_prompt" || dc.PrefillQueueTokens != nil {
		t.Errorf("short prompt decision %+v, want short_prompt without weighed queues", *dc)
	}
}

// TestSpillRatioIsChecked: a negative, sub-1 or infinite PDSpill is
// refused with an error naming it.
func TestSpillRatioIsChecked(t *testing.T) {
	for _, r := range []float64{-1, 0.5, math.Inf(1), math.NaN()} {
		o := router.Options{Prefill: []string{"http://p"}, Decode: []string{"http://d"}, PDThreshold: 64, PDSpill: r}
		if _, err := router.New(o); err == nil || !strings.Contains(err.Error(), "spill ratio") {
			t.Errorf("New with PDSpill %v: %v, want an error naming the spill ratio", r, err)
		}
	}
}
