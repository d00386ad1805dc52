package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"tandem/internal/api/leg"
	"tandem/internal/pd/debugdoc"
)

// fakeRouter answers as a router of one prefill and one decode worker:
// /v1/models, /health with counts, /debug/cluster behind the cluster
// credential of token.
func fakeRouter(t *testing.T, token string) *httptest.Server {
	t.Helper()
	keys, err := leg.NewKeys([]byte(token))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `{"object":"list","data":[{"id":"tiny","object":"model","max_model_len":2048}]}`)
	})
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `{"status":"ok","prefill":{"healthy":1,"configured":1},"decode":{"healthy":0,"configured":1}}`)
	})
	mux.HandleFunc("GET /debug/cluster", leg.Guard(keys, func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(debugdoc.Cluster{Processes: []debugdoc.Rooms{
			{Role: "router", Rooms: []debugdoc.Room{}, Workers: []debugdoc.Worker{
				{URL: "http://127.0.0.1:9001", Role: "prefill", Healthy: true, Inflight: 2},
				{URL: "http://127.0.0.1:9002", Role: "decode", Healthy: false, Problem: "health probe failed"},
			}},
			{Worker: "http://127.0.0.1:9001", Role: "prefill", Live: 3, Rooms: []debugdoc.Room{}},
			{Worker: "http://127.0.0.1:9002", Role: "decode", Error: "connection refused", Rooms: []debugdoc.Room{}},
		}})
	}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestPs: ps reports the model, the counts by role and, with the token
// `tandem up` keeps for that address, every worker; without a token it
// says why the workers are missing.
func TestPs(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	t.Setenv("TANDEM_CLUSTER_TOKEN", "")
	srv := fakeRouter(t, "cluster-secret-0123456789abcdef")
	out := squeeze(run(t, "ps", srv.URL))
	if !strings.Contains(out, "MODEL tiny (max_model_len 2048)") || !strings.Contains(out, "DECODE 0 of 1 healthy") ||
		!strings.Contains(out, "workers: listing the workers needs the cluster token") {
		t.Fatalf("ps without a token:\n%s", out)
	}
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	if _, err := writeUpToken(host, port, "cluster-secret-0123456789abcdef"); err != nil {
		t.Fatal(err)
	}
	out = run(t, "ps", srv.URL+"/v1")
	t.Logf("tandem ps:\n%s", out)
	if !strings.Contains(squeeze(out), "URL "+srv.URL+" (router)") {
		t.Fatalf("ps header:\n%s", out)
	}
	lines := strings.Split(out, "\n")
	var rows []string
	for _, l := range lines {
		if strings.HasPrefix(l, "http://127.0.0.1:900") {
			rows = append(rows, strings.Join(strings.Fields(l), " "))
		}
	}
	if len(rows) != 2 || rows[0] != "http://127.0.0.1:9001 prefill yes 2 3" || rows[1] != "http://127.0.0.1:9002 decode no 0 ? health probe failed" {
		t.Fatalf("worker rows %q in:\n%s", rows, out)
	}
	var doc psDoc
	if err := json.Unmarshal([]byte(run(t, "ps", srv.URL, "--format", "json")), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Kind != "router" || len(doc.Models) != 1 || doc.Roles["prefill"].Healthy != 1 || len(doc.Workers) != 2 || *doc.Workers[0].LiveRooms != 3 {
		t.Fatalf("ps --format json: %+v", doc)
	}
	t.Setenv("TANDEM_CLUSTER_TOKEN", "another-secret-0123456789abcdef")
	if out := run(t, "ps", srv.URL); !strings.Contains(out, "is not this router's") {
		t.Fatalf("ps with a wrong token:\n%s", out)
	}
	root := newRoot()
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	root.SetArgs([]string{"ps", "http://127.0.0.1:1"})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "is a tandem serve or up running") {
		t.Fatalf("ps of nothing: %v", err)
	}
}

// fakeChat serves /v1/models and a streamed /v1/chat/completions that
// answers "reply N" (with some reasoning first), recording each request's
// messages; a message "fail" gets a 400.
type fakeChat struct {
	mu    sync.Mutex
	convs [][]chatMsg
}

func (f *fakeChat) server(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `{"data":[{"id":"tiny"}]}`)
	})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model    string    `json:"model"`
			Messages []chatMsg `json:"messages"`
			Stream   bool      `json:"stream"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		f.convs = append(f.convs, req.Messages)
		n := len(f.convs)
		f.mu.Unlock()
		if req.Messages[len(req.Messages)-1].Content == "fail" {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":{"message":"temperature must be in [0, 2], got 5.","type":"invalid_request_error"}}`)
			return
		}
		if req.Model != "tiny" || !req.Stream {
			t.Errorf("chat request model %q stream %v", req.Model, req.Stream)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, d := range []string{`{"reasoning_content":"hm"}`, `{"content":"reply"}`, fmt.Sprintf(`{"content":" %d"}`, n)} {
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":%s}]}\n\n", d)
		}
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestChatREPL: each turn sends the whole conversation (answers without
// their reasoning), a failed turn is dropped, /clear forgets, /exit ends.
func TestChatREPL(t *testing.T) {
	f := &fakeChat{}
	srv := f.server(t)
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetIn(strings.NewReader("hello\n\nsecond\nfail\n/nope\nthird\n/clear\nfresh\n/exit\nnever sent\n"))
	root.SetArgs([]string{"chat", "--url", srv.URL, "--system", "be brief"})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("chat: %v\n%s", err, out.String())
	}
	t.Logf("chat session:\n%s", out.String())
	want := [][]chatMsg{
		{{"system", "be brief"}, {"user", "hello"}},
		{{"system", "be brief"}, {"user", "hello"}, {"assistant", "reply 1"}, {"user", "second"}},
		{{"system", "be brief"}, {"user", "hello"}, {"assistant", "reply 1"}, {"user", "second"}, {"assistant", "reply 2"}, {"user", "fail"}},
		{{"system", "be brief"}, {"user", "hello"}, {"assistant", "reply 1"}, {"user", "second"}, {"assistant", "reply 2"}, {"user", "third"}},
		{{"system", "be brief"}, {"user", "fresh"}},
	}
	if fmt.Sprint(f.convs) != fmt.Sprint(want) {
		t.Fatalf("conversations sent:\n%v\nwant\n%v", f.convs, want)
	}
	o := out.String()
	for _, s := range []string{"chatting with tiny", "Thinking...\nhm\n...done thinking.\n\nreply 1\n", "error: 400 Bad Request: temperature must be in [0, 2], got 5.",
		"unknown command /nope", "(conversation cleared)"} {
		if !strings.Contains(o, s) {
			t.Errorf("chat output lacks %q:\n%s", s, o)
		}
	}
}

// squeeze collapses runs of spaces, so checks do not depend on column widths.
func squeeze(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}
