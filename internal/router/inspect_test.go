package router_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"tandem/internal/router"
)

// cannedCluster is a /debug/cluster document: the router with one live and
// one finished request, a prefill worker (its own document's shape, with
// fractional milliseconds) with one overdue room and one finished, and a
// decode worker that did not answer.
const cannedCluster = `{"processes":[
{"worker":"router","role":"router","rooms":[
 {"id":"0123456789abcdef0123456789abcdef","request_id":"req-1","state":"streaming","phase":"decode","reason":"","peer":"","prefill":"http://p:1","decode":"http://d:2","age_ms":1500,"deadline_in_ms":298500,"bytes":2048,"history":[]},
 {"id":"ffffffffffffffffffffffffffffffff","request_id":"req-0","state":"failed","phase":"","reason":"decode leg to http://d:2: engine failed (status 500)","peer":"","prefill":"http://p:1","decode":"http://d:2","age_ms":65000,"deadline_in_ms":null,"bytes":0,"history":[]}]},
{"worker":"http://p:1","role":"prefill","transfer_addr":"p:9","live":1,"rooms":[
 {"id":"0123456789abcdef0123456789abcdef","request_id":"req-1","state":"waiting_for_input","phase":"computing","peer":"d:7","age_ms":5200.5,"deadline_in_ms":-3200.25,"bytes":0,"history":[{"at_ms":0.5,"from":"none","to":"bootstrapping","phase":"awaiting_hello","event":"request"}]},
 {"id":"eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee","request_id":"req-9","state":"succeeded","phase":"done","peer":"d:7","age_ms":7300000,"bytes":1572864,"history":[]}]},
{"worker":"http://d:2","role":"decode","error":"get http://d:2/debug/rooms: connection refused","rooms":[]}
]}`

const cannedLive = `== router (router): 1 live, 1 finished
ROOM                              REQUEST  STATE/PHASE       AGE   PEER                      BYTES   FLAG
0123456789abcdef0123456789abcdef  req-1    streaming/decode  1.5s  http://p:1 -> http://d:2  2.0KiB

== http://p:1 (prefill): 1 live, 1 finished
ROOM                              REQUEST  STATE/PHASE                  AGE   PEER  BYTES  FLAG
0123456789abcdef0123456789abcdef  req-1    waiting_for_input/computing  5.2s  d:7   0B     OVERDUE 3.2s

== http://d:2 (decode): error: get http://d:2/debug/rooms: connection refused
`

const cannedAll = `== router (router): 1 live, 1 finished
ROOM                              REQUEST  STATE/PHASE                                                    AGE    PEER                      BYTES   FLAG
0123456789abcdef0123456789abcdef  req-1    streaming/decode                                               1.5s   http://p:1 -> http://d:2  2.0KiB
ffffffffffffffffffffffffffffffff  req-0    failed (decode leg to http://d:2: engine failed (status 500))  1m05s  http://p:1 -> http://d:2  0B

== http://p:1 (prefill): 1 live, 1 finished
ROOM                              REQUEST  STATE/PHASE                  AGE    PEER  BYTES   FLAG
0123456789abcdef0123456789abcdef  req-1    waiting_for_input/computing  5.2s   d:7   0B      OVERDUE 3.2s
eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee  req-9    succeeded/done               2h01m  d:7   1.5MiB

== http://d:2 (decode): error: get http://d:2/debug/rooms: connection refused
`

func serveDoc(t *testing.T, doc string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/debug/cluster" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, doc)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestInspectTables(t *testing.T) {
	url := serveDoc(t, cannedCluster)
	for _, tc := range []struct {
		all  bool
		want string
	}{{false, cannedLive}, {true, cannedAll}} {
		var out bytes.Buffer
		err := router.Inspect(context.Background(), http.DefaultClient, url, router.InspectOptions{Format: "text", All: tc.all}, &out)
		if !errors.Is(err, router.ErrOverdue) || !strings.Contains(err.Error(), "1 rooms") {
			t.Errorf("Inspect(all %v) error = %v, want 1 overdue room (ErrOverdue)", tc.all, err)
		}
		if out.String() != tc.want {
			t.Errorf("Inspect(all %v) printed\n%s\nwant\n%s", tc.all, out.String(), tc.want)
		}
	}
}

func TestInspectJSONAndExitStatus(t *testing.T) {
	var out bytes.Buffer
	err := router.Inspect(context.Background(), http.DefaultClient, serveDoc(t, cannedCluster), router.InspectOptions{Format: "json"}, &out)
	if !errors.Is(err, router.ErrOverdue) {
		t.Errorf("Inspect json error = %v, want ErrOverdue", err)
	}
	if !strings.Contains(out.String(), `"transfer_addr": "p:9"`) || !strings.HasPrefix(out.String(), "{\n  \"processes\"") {
		t.Errorf("Inspect json printed %.200s..., want the whole document indented, unknown members kept", out.String())
	}
	calm := strings.Replace(cannedCluster, `"deadline_in_ms":-3200.25`, `"deadline_in_ms":12.5`, 1)
	out.Reset()
	if err := router.Inspect(context.Background(), http.DefaultClient, serveDoc(t, calm), router.InspectOptions{Format: "text"}, &out); err != nil {
		t.Errorf("Inspect with no overdue room = %v, want nil (exit status 0)", err)
	}
	pastButDone := strings.Replace(cannedCluster, `"state":"waiting_for_input"`, `"state":"failed"`, 1)
	if err := router.Inspect(context.Background(), http.DefaultClient, serveDoc(t, pastButDone), router.InspectOptions{Format: "text"}, io.Discard); err != nil {
		t.Errorf("Inspect with a past deadline on a failed room = %v, want nil: terminal rooms are never overdue", err)
	}
	if err := router.Inspect(context.Background(), http.DefaultClient, serveDoc(t, cannedCluster), router.InspectOptions{Format: "yaml"}, io.Discard); err == nil {
		t.Errorf("Inspect format yaml = nil, want an error")
	}
	if err := router.Inspect(context.Background(), http.DefaultClient, serveDoc(t, `{"processes":`), router.InspectOptions{Format: "text"}, io.Discard); err == nil || errors.Is(err, router.ErrOverdue) {
		t.Errorf("Inspect of a cut document = %v, want a decode error", err)
	}
}

func TestParseClusterKeepsOtherProcessesWhenOneIsOdd(t *testing.T) {
	cl, err := router.ParseCluster([]byte(`{"processes":[{"worker":"a","role":"prefill","rooms":[{"id":"x","age_ms":"soon"}]},{"worker":"b","role":"decode","rooms":[]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(cl.Processes) != 2 || cl.Processes[0].Error == "" || cl.Processes[0].Worker != "a" || cl.Processes[1].Error != "" {
		t.Errorf("ParseCluster = %+v, want a with an error and b fine", cl.Processes)
	}
}

func TestDebugRoomsAndCluster(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	decodeStream := []string{"data: {\"choices\":[{\"index\":0,\"text\":\"a\"}]}\n\n", "data: [DONE]\n\n"}
	d := newFake(t, "decode", stream(decodeStream...))
	p.rooms = `{"role":"prefill","transfer_addr":"p:9","live":1,"rooms":[{"id":"0123456789abcdef0123456789abcdef","request_id":"req-1","state":"bootstrapping","phase":"awaiting_alloc","peer":"d:7","age_ms":900,"deadline_in_ms":-100,"bytes":0,"history":[]}]}`
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
	if !roomPattern.MatchString(r.ID) || r.State != "done" || r.Prefill != p.url() || r.Decode != d.url() || r.Bytes != int64(len(strings.Join(decodeStream, ""))) || r.DeadlineInMS != nil {
		t.Errorf("router room = %+v, want done, both workers named, decode's bytes counted, no deadline", r)
	}
	got := strings.Join(events, ",")
	if !strings.HasPrefix(got, "dispatched,") || !strings.Contains(got, "prefill_ok") || !strings.Contains(got, "decode_ok") ||
		!strings.Contains(got, "first_bytes") || !strings.HasSuffix(got, ",done") {
		t.Errorf("router room history = %s, want dispatched ... prefill_ok, first_bytes, decode_ok ... done", got)
	}

	_, body := c.get(t, "/debug/cluster")
	cl, err := router.ParseCluster([]byte(body))
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
	err = router.Inspect(context.Background(), http.DefaultClient, strings.TrimPrefix(c.srv.URL, "http://"), router.InspectOptions{Format: "text"}, &out)
	if !errors.Is(err, router.ErrOverdue) || !strings.Contains(out.String(), "OVERDUE 100ms") {
		t.Errorf("Inspect(router) = %v, printed\n%s\nwant the prefill room flagged OVERDUE 100ms", err, out.String())
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
