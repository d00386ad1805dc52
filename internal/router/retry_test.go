package router_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"tandem/internal/pd/debugdoc"
	"tandem/internal/router"
)

func TestRetryOnAnotherPairWhenNoWorkerSawTheRoom(t *testing.T) {
	p1 := newFake(t, "prefill", answer(200, prefillAnswer))
	p2 := newFake(t, "prefill", answer(200, prefillAnswer))
	d1 := newFake(t, "decode", answer(200, decodeAnswer))
	d2 := newFake(t, "decode", answer(200, decodeAnswer))
	p2.setStatus(5, 0) // the first attempt picks p1 and d1
	d2.setStatus(5, 0)
	c := newCluster(t, []*fake{p1, p2}, []*fake{d1, d2}, nil)
	p1.srv.Close() // both die after the health round: their dials fail, nothing is sent
	d1.srv.Close()
	status, body := c.post(t, "/v1/completions", `{"prompt":"x"}`)
	if status != 200 || body != decodeAnswer {
		t.Fatalf("POST with p1 and d1 dead = %d %s, want 200 from the second pair", status, body)
	}
	p2.nextLeg(t)
	d2.nextLeg(t)
	_, metrics := c.get(t, "/metrics")
	if !strings.Contains(metrics, "tandem_router_retries_total 1") {
		t.Errorf("/metrics does not count one retry")
	}
	rooms := routerRooms(t, c)
	if len(rooms) != 2 || rooms[0].State != "succeeded" || rooms[1].State != "failed" || !strings.Contains(rooms[1].Reason, "may be retried") || rooms[0].ID == rooms[1].ID {
		t.Errorf("router rooms = %+v, want the retry done under a new room and the first attempt failed as retryable", rooms)
	}
}

// TestRetryAfterAFailureBeforeAnyToken: a decode leg that fails after
// both workers got the room, but before anything reached the client, is
// retried on another pair under a new room; the first attempt's prefill
// leg is cancelled.
func TestRetryAfterAFailureBeforeAnyToken(t *testing.T) {
	decodeGot := make(chan struct{})
	p1 := newFake(t, "prefill", nil)
	p1.gen = func(w http.ResponseWriter, r *http.Request, _ []byte) { p1.waitCancel(r) }
	p2 := newFake(t, "prefill", answer(200, prefillAnswer))
	p2.setStatus(5, 0)
	d1 := newFake(t, "decode", func(w http.ResponseWriter, r *http.Request, _ []byte) {
		<-decodeGot
		writeJSONBody(w, 500, `{"error":{"message":"engine failed","type":"server_error"}}`)
	})
	d2 := newFake(t, "decode", answer(200, decodeAnswer))
	d2.setStatus(5, 0)
	c := newCluster(t, []*fake{p1, p2}, []*fake{d1, d2}, nil)
	go func() { p1.nextLeg(t); close(decodeGot) }() // d1 fails once p1 has the room
	status, body := c.post(t, "/v1/completions", `{"prompt":"x"}`)
	if status != 200 || body != decodeAnswer {
		t.Fatalf("POST = %d %s, want 200 and the second pair's answer", status, body)
	}
	first := p1.expectCancel(t)
	if l := p2.nextLeg(t); l.hdr.Get(router.HeaderRoom) == first {
		t.Errorf("the retry reused room %s", first)
	}
	d2.nextLeg(t)
	_, m := c.get(t, "/metrics")
	if !strings.Contains(m, "tandem_router_retries_total 1") {
		t.Errorf("/metrics does not count one retry")
	}
	rooms := routerRooms(t, c)
	if len(rooms) != 2 || rooms[0].State != "succeeded" || rooms[1].State != "failed" || rooms[1].ID != first || !strings.Contains(rooms[1].Reason, "may be retried") {
		t.Errorf("router rooms = %+v, want the retry succeeded and the first attempt failed as retryable", rooms)
	}
}

// TestNoRetry: a client's fault, a failure after the client got part of
// the answer, and a timeout are not retried.
func TestNoRetry(t *testing.T) {
	first := "data: {\"choices\":[{\"index\":0,\"text\":\"a\"}]}\n\n"
	for _, tc := range []struct {
		name       string
		gen        func(w http.ResponseWriter, r *http.Request, _ []byte)
		client     string
		wantStatus int
		opts       func(*router.Options)
	}{
		{"worker says 400", answer(400, `{"error":{"message":"bad max_tokens","type":"invalid_request_error"}}`), `{"prompt":"x"}`, 400, nil},
		{"cut after the first token", func(w http.ResponseWriter, r *http.Request, _ []byte) {
			writeEvents(w, first)
			panic(http.ErrAbortHandler)
		}, `{"prompt":"x","stream":true}`, 200, nil},
		{"leg timeout", func(w http.ResponseWriter, r *http.Request, _ []byte) { <-r.Context().Done() }, `{"prompt":"x"}`, 504,
			func(o *router.Options) { o.LegTimeout = 100 * time.Millisecond }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newFake(t, "prefill", answer(200, prefillAnswer))
			p2 := newFake(t, "prefill", answer(200, prefillAnswer))
			p2.setStatus(5, 0)
			d := newFake(t, "decode", tc.gen)
			d2 := newFake(t, "decode", answer(200, decodeAnswer))
			d2.setStatus(5, 0)
			c := newCluster(t, []*fake{p, p2}, []*fake{d, d2}, tc.opts)
			status, body := c.post(t, "/v1/completions", tc.client)
			if status != tc.wantStatus || len(d2.got) != 0 || len(p2.got) != 0 {
				t.Errorf("client got %d %s, second pair got %d+%d legs; want %d and no retry", status, body, len(p2.got), len(d2.got), tc.wantStatus)
			}
		})
	}
}

// TestRetriesAreBounded: a sample is sent to at most three pairs.
func TestRetriesAreBounded(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	var ds []*fake
	for range 4 {
		ds = append(ds, newFake(t, "decode", answer(500, `{"error":{"message":"engine failed"}}`)))
	}
	c := newCluster(t, []*fake{p}, ds, nil)
	status, body := c.post(t, "/v1/completions", `{"prompt":"x"}`)
	legs := 0
	for _, d := range ds {
		legs += len(d.got)
	}
	if msg, _, _ := errorDoc(t, body); status != 502 || legs != 3 || !strings.Contains(msg, "engine failed") {
		t.Errorf("every decode worker fails: client got %d %q after %d decode legs, want 502 with the worker's message after 3", status, msg, legs)
	}
	_, m := c.get(t, "/metrics")
	if !strings.Contains(m, "tandem_router_retries_total 2") {
		t.Errorf("/metrics does not count two retries")
	}
}

func TestRetryWhenTheTransferAddressCannotBeLearned(t *testing.T) {
	p1 := newFake(t, "prefill", answer(200, prefillAnswer))
	p2 := newFake(t, "prefill", answer(200, prefillAnswer))
	p1.infoOK.Store(false) // healthy, but /pd/info fails
	p2.setStatus(5, 0)     // p1 looks better
	d := newFake(t, "decode", answer(200, decodeAnswer))
	c := newCluster(t, []*fake{p1, p2}, []*fake{d}, nil)
	if status, body := c.post(t, "/v1/completions", `{"prompt":"x"}`); status != 200 {
		t.Fatalf("POST = %d %s, want 200 through p2", status, body)
	}
	p2.nextLeg(t)
	if len(p1.got) != 0 {
		t.Errorf("p1, which has no transfer address, got %d legs, want 0", len(p1.got))
	}
	if dl := d.nextLeg(t); dl.hdr.Get(router.HeaderPrefill) != p2.transferAddr() {
		t.Errorf("decode leg names prefill %q, want p2's %q", dl.hdr.Get(router.HeaderPrefill), p2.transferAddr())
	}
}

func TestPrefillFailureAfterDecodeAnsweredKeepsTheAnswer(t *testing.T) {
	clientGotFirst, prefillFailed := make(chan struct{}), make(chan struct{})
	p := newFake(t, "prefill", func(w http.ResponseWriter, r *http.Request, _ []byte) {
		<-clientGotFirst
		writeJSONBody(w, 502, `{"error":{"message":"late failure"}}`)
		close(prefillFailed)
	})
	first := "data: {\"choices\":[{\"index\":0,\"text\":\"a\"}]}\n\n"
	d := newFake(t, "decode", func(w http.ResponseWriter, r *http.Request, _ []byte) {
		writeEvents(w, first)
		<-prefillFailed
		io.WriteString(w, "data: [DONE]\n\n")
	})
	c := newCluster(t, []*fake{p}, []*fake{d}, nil)
	resp, err := http.Post(c.srv.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got := make([]byte, len(first))
	if _, err := io.ReadFull(resp.Body, got); err != nil || string(got) != first {
		t.Fatalf("first event = %q, %v; want %q", got, err, first)
	}
	close(clientGotFirst)
	rest, _ := io.ReadAll(resp.Body)
	if string(rest) != "data: [DONE]\n\n" {
		t.Errorf("after a prefill failure that followed decode's first event, the stream went on with %q, want decode's [DONE]", rest)
	}
}

// routerRooms reads the router's /debug/rooms.
func routerRooms(t *testing.T, c *cluster) []debugdoc.Room {
	t.Helper()
	status, body := c.get(t, "/debug/rooms")
	var p debugdoc.Rooms
	if err := json.Unmarshal([]byte(body), &p); status != 200 || err != nil {
		t.Fatalf("GET /debug/rooms = %d %s (%v)", status, body, err)
	}
	if p.Role != "router" || p.Worker != "router" {
		t.Errorf("/debug/rooms names %q role %q, want router, router", p.Worker, p.Role)
	}
	return p.Rooms
}
