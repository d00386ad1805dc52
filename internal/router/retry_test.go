package router_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

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

func TestNoRetryOnceALegWasSent(t *testing.T) {
	p := newFake(t, "prefill", answer(502, `{"error":{"message":"transfer failed"}}`))
	p2 := newFake(t, "prefill", answer(200, prefillAnswer))
	p2.setStatus(5, 0)
	d := newFake(t, "decode", nil)
	d.gen = func(w http.ResponseWriter, r *http.Request, _ []byte) { d.waitCancel(r) }
	c := newCluster(t, []*fake{p, p2}, []*fake{d}, nil)
	status, body := c.post(t, "/v1/completions", `{"prompt":"x"}`)
	if status != 502 || len(p2.got) != 0 {
		t.Errorf("prefill failed after it got the room: %d %s, second prefill got %d legs; want 502 and no retry", status, body, len(p2.got))
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
