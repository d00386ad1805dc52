package router_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"tandem/internal/inspect"
	"tandem/internal/router"
)

func TestDebugRoomsAndCluster(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	decodeStream := []string{"data: {\"choices\":[{\"index\":0,\"text\":\"a\"}]}\n\n", "data: [DONE]\n\n"}
	d := newFake(t, "decode", stream(decodeStream...))
	p.rooms = `{"role":"prefill","transfer_addr":"p:9","live":1,"rooms":[{"id":"0123456789abcdef0123456789abcdef","request_id":"req-1","state":"bootstrapping","phase":"awaiting_alloc","peer":"d:7","age_ms":900,"deadline_in_ms":-1100,"bytes":0,"history":[]}]}`
	c := newCluster(t, []*fake{p}, []*fake{d}, nil)
	if status, body := c.post(t, "/v1/completions", `{"prompt":"x","stream":true}`); status != 200 {
		t.Fatalf("POST = %d %s", status, body)
	}
	rooms := routerRooms(t, c)
	if len(rooms) != 1 {
		t.Fatalf("router rooms = %+v, want one", rooms)
	}
	r := rooms[0]
	var events []string
	for _, h := range r.History {
		events = append(events, h.Event)
	}
	if !roomPattern.MatchString(r.ID) || r.State != "succeeded" || r.Prefill != p.url() || r.Decode != d.url() || r.Bytes != int64(len(strings.Join(decodeStream, ""))) || r.DeadlineInMS != nil {
		t.Errorf("router room = %+v, want succeeded, both workers named, decode's bytes counted, no deadline", r)
	}
	got := strings.Join(events, ",")
	if !strings.HasPrefix(got, "dispatched,") || !strings.Contains(got, "prefill_ok") || !strings.Contains(got, "decode_ok") ||
		!strings.Contains(got, "first_bytes") || !strings.HasSuffix(got, ",done") {
		t.Errorf("router room history = %s, want dispatched ... prefill_ok, first_bytes, decode_ok ... done", got)
	}

	_, body := c.get(t, "/debug/cluster")
	cl, err := inspect.ParseCluster([]byte(body))
	if err != nil {
		t.Fatalf("/debug/cluster %s: %v", body, err)
	}
	if len(cl.Processes) != 3 {
		t.Fatalf("/debug/cluster has %d processes, want router, prefill, decode: %s", len(cl.Processes), body)
	}
	rp, pp, dp := cl.Processes[0], cl.Processes[1], cl.Processes[2]
	if rp.Role != "router" || len(rp.Rooms) != 1 {
		t.Errorf("cluster router entry = %+v", rp)
	}
	if pp.Worker != p.url() || pp.Role != "prefill" || len(pp.Rooms) != 1 || !pp.Rooms[0].Overdue() || !strings.Contains(body, `"transfer_addr":"p:9"`) {
		t.Errorf("cluster prefill entry = %+v, want its own document with its URL added", pp)
	}
	if dp.Worker != d.url() || dp.Role != "decode" || !strings.Contains(dp.Error, "status 404") {
		t.Errorf("cluster decode entry = %+v, want an error entry for its 404", dp)
	}
	var out bytes.Buffer
	err = inspect.Inspect(context.Background(), http.DefaultClient, strings.TrimPrefix(c.srv.URL, "http://"), inspect.Options{Format: "text"}, &out)
	if !errors.Is(err, inspect.ErrOverdue) || !strings.Contains(out.String(), "OVERDUE 1.1s") {
		t.Errorf("Inspect(router) = %v, printed\n%s\nwant the prefill room flagged OVERDUE 1.1s", err, out.String())
	}
}

func TestMetricsCountLegsAndErrors(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", nil)
	var fail atomic.Bool
	fail.Store(true)
	d.gen = func(w http.ResponseWriter, r *http.Request, _ []byte) {
		if fail.Load() {
			writeJSONBody(w, 500, `{"error":{"message":"boom"}}`)
			return
		}
		writeEvents(w, "data: {\"choices\":[{\"index\":0,\"text\":\"a\"}]}\n\n", "data: [DONE]\n\n")
	}
	c := newCluster(t, []*fake{p}, []*fake{d}, nil)
	c.post(t, "/v1/completions", `{"prompt":"x","stream":true}`)
	fail.Store(false)
	c.post(t, "/v1/completions", `{"prompt":"x","stream":true}`)
	_, m := c.get(t, "/metrics")
	for _, want := range []string{
		`tandem_router_worker_requests_total{role="decode",worker="` + d.url() + `"} 2`,
		`tandem_router_worker_errors_total{kind="status",role="decode",worker="` + d.url() + `"} 1`,
		`tandem_router_worker_healthy{role="prefill",worker="` + p.url() + `"} 1`,
		`tandem_router_worker_inflight{role="decode",worker="` + d.url() + `"} 0`,
		`tandem_router_requests_total{endpoint="completions",status="200"} 1`,
		`tandem_router_requests_total{endpoint="completions",status="502"} 1`,
		`tandem_router_time_to_first_token_seconds_count{endpoint="completions"} 1`,
		`tandem_router_e2e_request_latency_seconds_count{endpoint="completions"} 1`,
		`tandem_router_worker_leg_seconds_count{role="decode",worker="` + d.url() + `"} 2`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestDebugRoomsShowsALiveRoom(t *testing.T) {
	p := newFake(t, "prefill", nil)
	p.gen = func(w http.ResponseWriter, r *http.Request, _ []byte) { p.waitCancel(r) }
	d := newFake(t, "decode", nil)
	d.gen = func(w http.ResponseWriter, r *http.Request, _ []byte) { d.waitCancel(r) }
	c := newCluster(t, []*fake{p}, []*fake{d}, func(o *router.Options) { o.LegTimeout = time.Minute })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.srv.URL+"/v1/completions", strings.NewReader(`{"prompt":"x"}`))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	pl, dl := p.nextLeg(t), d.nextLeg(t)
	rooms := routerRooms(t, c)
	if len(rooms) != 1 {
		t.Fatalf("router rooms while a request is in flight = %+v, want one", rooms)
	}
	r := rooms[0]
	if r.ID != pl.hdr.Get(router.HeaderRoom) || r.RequestID != dl.hdr.Get(router.HeaderRequestID) || r.State != "dispatched" ||
		r.Phase != "prefill+decode" || r.DeadlineInMS == nil || *r.DeadlineInMS <= 0 || *r.DeadlineInMS > 60000 || r.Overdue() {
		t.Errorf("live router room = %+v, want the legs' room and request, dispatched, both legs open, deadline within the leg timeout", r)
	}
	cancel()
	<-done
	p.expectCancel(t)
	d.expectCancel(t)
}
