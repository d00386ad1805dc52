package inspect_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"tandem/internal/inspect"
	"tandem/internal/pd/debugdoc"
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
		err := inspect.Inspect(context.Background(), http.DefaultClient, url, inspect.Options{Format: "text", All: tc.all}, &out)
		if !errors.Is(err, inspect.ErrOverdue) || !strings.Contains(err.Error(), "1 rooms") {
			t.Errorf("Inspect(all %v) error = %v, want 1 overdue room (ErrOverdue)", tc.all, err)
		}
		if out.String() != tc.want {
			t.Errorf("Inspect(all %v) printed\n%s\nwant\n%s", tc.all, out.String(), tc.want)
		}
	}
}

func TestInspectJSONAndExitStatus(t *testing.T) {
	var out bytes.Buffer
	err := inspect.Inspect(context.Background(), http.DefaultClient, serveDoc(t, cannedCluster), inspect.Options{Format: "json"}, &out)
	if !errors.Is(err, inspect.ErrOverdue) {
		t.Errorf("Inspect json error = %v, want ErrOverdue", err)
	}
	if !strings.Contains(out.String(), `"transfer_addr": "p:9"`) || !strings.HasPrefix(out.String(), "{\n  \"processes\"") {
		t.Errorf("Inspect json printed %.200s..., want the whole document indented, unknown members kept", out.String())
	}
	calm := strings.Replace(cannedCluster, `"deadline_in_ms":-3200.25`, `"deadline_in_ms":12.5`, 1)
	out.Reset()
	if err := inspect.Inspect(context.Background(), http.DefaultClient, serveDoc(t, calm), inspect.Options{Format: "text"}, &out); err != nil {
		t.Errorf("Inspect with no overdue room = %v, want nil (exit status 0)", err)
	}
	pastButDone := strings.Replace(cannedCluster, `"state":"waiting_for_input"`, `"state":"failed"`, 1)
	if err := inspect.Inspect(context.Background(), http.DefaultClient, serveDoc(t, pastButDone), inspect.Options{Format: "text"}, io.Discard); err != nil {
		t.Errorf("Inspect with a past deadline on a failed room = %v, want nil: terminal rooms are never overdue", err)
	}
	if err := inspect.Inspect(context.Background(), http.DefaultClient, serveDoc(t, cannedCluster), inspect.Options{Format: "yaml"}, io.Discard); err == nil {
		t.Errorf("Inspect format yaml = nil, want an error")
	}
	if err := inspect.Inspect(context.Background(), http.DefaultClient, serveDoc(t, `{"processes":`), inspect.Options{Format: "text"}, io.Discard); err == nil || errors.Is(err, inspect.ErrOverdue) {
		t.Errorf("Inspect of a cut document = %v, want a decode error", err)
	}
}

func TestParseClusterKeepsOtherProcessesWhenOneIsOdd(t *testing.T) {
	cl, err := inspect.ParseCluster([]byte(`{"processes":[{"worker":"a","role":"prefill","rooms":[{"id":"x","age_ms":"soon"}]},{"worker":"b","role":"decode","rooms":[]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(cl.Processes) != 2 || cl.Processes[0].Error == "" || cl.Processes[0].Worker != "a" || cl.Processes[1].Error != "" {
		t.Errorf("ParseCluster = %+v, want a with an error and b fine", cl.Processes)
	}
}

// TestInspectAllowsTheWatchdogGrace: a room less than the worker
// watchdog's grace (1 s) past its deadline is not flagged: the worker's
// timer may not have run yet, and it fails the room itself within the
// grace.
func TestInspectAllowsTheWatchdogGrace(t *testing.T) {
	justLate := strings.Replace(cannedCluster, `"deadline_in_ms":-3200.25`, `"deadline_in_ms":-500`, 1)
	var out bytes.Buffer
	if err := inspect.Inspect(context.Background(), http.DefaultClient, serveDoc(t, justLate), inspect.Options{Format: "text"}, &out); err != nil {
		t.Errorf("Inspect with a room 500 ms past its deadline = %v, want nil: the watchdog allows 1 s", err)
	}
	if strings.Contains(out.String(), "OVERDUE") {
		t.Errorf("Inspect flagged a room within the watchdog's grace:\n%s", out.String())
	}
}

// TestInspectListsWorkersInTrouble: the router's entry lists workers that
// are out, draining or whose circuit breaker is not closed; healthy ones
// are not.
func TestInspectListsWorkersInTrouble(t *testing.T) {
	doc := `{"processes":[{"worker":"router","role":"router","transfer_addr":"","live":0,"rooms":[],"workers":[` +
		`{"url":"http://p:1","role":"prefill","healthy":true,"breaker":"closed","failures":0,"inflight":0},` +
		`{"url":"http://d:2","role":"decode","healthy":true,"breaker":"open","failures":3,"inflight":0},` +
		`{"url":"http://d:3","role":"decode","healthy":false,"problem":"get http://d:3/ready: connection refused","breaker":"closed","failures":0,"inflight":0},` +
		`{"url":"http://d:4","role":"decode","healthy":true,"draining":true,"breaker":"closed","failures":0,"inflight":2}]}]}`
	var out bytes.Buffer
	if err := inspect.Inspect(context.Background(), http.DefaultClient, serveDoc(t, doc), inspect.Options{Format: "text"}, &out); err != nil {
		t.Fatal(err)
	}
	want := "== router (router): 0 live, 0 finished\n" +
		"worker http://d:2 (decode): breaker open\n" +
		"worker http://d:3 (decode): out (get http://d:3/ready: connection refused), breaker closed\n" +
		"worker http://d:4 (decode): draining (no new rooms; its rooms finish), breaker closed\n" +
		"(no live rooms)\n"
	if out.String() != want {
		t.Errorf("Inspect printed\n%s\nwant\n%s", out.String(), want)
	}
}

// TestMembershipTable: a router entry with a membership source lists every
// worker with its role, address, name, source, since, readiness in its
// source and state, and says when the source fails.
func TestMembershipTable(t *testing.T) {
	since := time.Now().Add(-3 * time.Second).UTC().Format(time.RFC3339Nano)
	c := &debugdoc.Cluster{Processes: []debugdoc.Rooms{{Worker: "router", Role: "router",
		Membership: &debugdoc.Membership{Source: "k8s", Spec: "k8s namespace=ns selector=app=tandem", Synced: true, Changes: 5,
			Errors: 1, Failing: true, LastError: "watch pods: connection refused", Ignored: []string{"ns/odd: no role label"}},
		Workers: []debugdoc.Worker{
			{URL: "http://10.0.0.7:8200", Role: "decode", Healthy: true, Breaker: "closed", Name: "ns/decode-0", Source: "k8s", Since: since, Listed: true, Inflight: 2},
			{URL: "http://10.0.0.8:8200", Role: "decode", Healthy: true, Breaker: "closed", Name: "ns/decode-1", Source: "k8s", Since: since, ListReason: "terminating"},
			{URL: "http://10.0.0.9:8100", Role: "prefill", Healthy: true, Breaker: "closed", Name: "ns/prefill-0", Source: "k8s", Since: since, Left: true, Inflight: 1, Restarts: 1},
		}}}}
	var b bytes.Buffer
	if err := inspect.WriteTables(&b, c, false); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"membership: k8s (k8s namespace=ns selector=app=tandem), 5 changes, 1 errors, FAILING (keeps its last membership): watch pods: connection refused",
		"ignored ns/odd: no role label",
		"ROLE", "SOURCE", "SINCE", "READY",
		"decode   http://10.0.0.7:8200  ns/decode-0   k8s",
		"no (terminating)",
		"left (finishing its legs)",
		"(3.0s ago)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
