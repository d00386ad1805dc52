package e2e

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestChaosJudge checks the soak's classifier against canned answers, so a
// soak that passes means what it says: a truncated or doubled answer is
// bad, an error is clear only with an OpenAI error object, usage must add
// up.
func TestChaosJudge(t *testing.T) {
	const (
		sse   = "text/event-stream"
		jsonT = "application/json"
		usage = `"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}`
	)
	chunk := func(finish string) string {
		f := "null"
		if finish != "" {
			f = `"` + finish + `"`
		}
		return `data: {"choices":[{"index":0,"text":"x","finish_reason":` + f + "}]}\n\n"
	}
	usageChunk := "data: {\"choices\":[]," + usage + "}\n\n"
	done := "data: [DONE]\n\n"
	errEvent := "data: {\"error\":{\"message\":\"the decode leg failed\",\"type\":\"server_error\",\"code\":\"upstream_error\"}}\n\n"
	cases := []struct {
		name        string
		stream      bool
		maxTokens   int
		status      int
		contentType string
		body        string
		want        outcomeKind
		wantDetail  string // prefix of the detail, for clear errors
	}{
		{"whole answer", false, 3, 200, jsonT, `{"choices":[{"index":0,"text":"abc","finish_reason":"length"}],` + usage + `}`, outcomeCompleted, ""},
		{"whole answer stopped early", false, 8, 200, jsonT, `{"choices":[{"index":0,"text":"abc","finish_reason":"stop"}],` + usage + `}`, outcomeCompleted, ""},
		{"whole answer without finish reason", false, 3, 200, jsonT, `{"choices":[{"index":0,"text":"abc","finish_reason":null}],` + usage + `}`, outcomeBad, ""},
		{"whole answer without usage", false, 3, 200, jsonT, `{"choices":[{"index":0,"text":"abc","finish_reason":"length"}]}`, outcomeBad, ""},
		{"length but too few tokens", false, 4, 200, jsonT, `{"choices":[{"index":0,"text":"abc","finish_reason":"length"}],` + usage + `}`, outcomeBad, ""},
		{"more tokens than max_tokens", false, 2, 200, jsonT, `{"choices":[{"index":0,"text":"abc","finish_reason":"stop"}],` + usage + `}`, outcomeBad, ""},
		{"total does not add up", false, 3, 200, jsonT, `{"choices":[{"index":0,"finish_reason":"length"}],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":9}}`, outcomeBad, ""},
		{"truncated whole answer", false, 3, 200, jsonT, `{"choices":[{"index":0,"text":"ab`, outcomeBad, ""},
		{"200 carrying an error", false, 3, 200, jsonT, `{"error":{"message":"boom"}}`, outcomeBad, ""},
		{"502 with an error object", false, 3, 502, jsonT, `{"error":{"message":"The decode leg failed","type":"server_error","code":"upstream_error"}}`, outcomeClearError, "http 502 upstream_error"},
		{"502 without a message", false, 3, 502, jsonT, `{"error":{"message":"","type":"server_error"}}`, outcomeBad, ""},
		{"502 with text", false, 3, 502, "text/plain", "bad gateway", outcomeBad, ""},
		{"stream", true, 3, 200, sse, chunk("") + chunk("length") + usageChunk + done, outcomeCompleted, ""},
		{"stream without [DONE]", true, 3, 200, sse, chunk("") + chunk("length") + usageChunk, outcomeBad, ""},
		{"stream cut mid-answer", true, 3, 200, sse, chunk("") + chunk(""), outcomeBad, ""},
		{"stream without finish", true, 3, 200, sse, chunk("") + usageChunk + done, outcomeBad, ""},
		{"stream finishing twice", true, 3, 200, sse, chunk("length") + chunk("length") + usageChunk + done, outcomeBad, ""},
		{"stream without usage", true, 3, 200, sse, chunk("length") + done, outcomeBad, ""},
		{"stream ending in an error event", true, 3, 200, sse, chunk("") + errEvent, outcomeClearError, "sse error upstream_error"},
		{"error event then [DONE]", true, 3, 200, sse, chunk("") + errEvent + done, outcomeBad, ""},
		{"error event then data", true, 3, 200, sse, errEvent + chunk("length"), outcomeBad, ""},
		{"data after [DONE]", true, 3, 200, sse, chunk("length") + usageChunk + done + chunk(""), outcomeBad, ""},
		{"error event without a message", true, 3, 200, sse, "data: {\"error\":{\"type\":\"server_error\"}}\n\n", outcomeBad, ""},
		{"stream as JSON", true, 3, 200, jsonT, `{"choices":[]}`, outcomeBad, ""},
		{"streamed 504", true, 3, 504, jsonT, `{"error":{"message":"timed out","type":"server_error","code":"upstream_timeout"}}`, outcomeClearError, "http 504 upstream_timeout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", c.contentType)
				w.WriteHeader(c.status)
				w.Write([]byte(c.body))
			}))
			defer srv.Close()
			r := &chaosRequest{stream: c.stream, n: 1, maxTokens: c.maxTokens, keepAlive: true, body: []byte(`{}`)}
			cs := newChaosClients(1)
			defer cs.closeIdle()
			o := r.run(cs, srv.URL, 10*time.Second)
			if o.kind != c.want || !strings.HasPrefix(o.detail, c.wantDetail) {
				t.Errorf("run(%s) = %s %q, want %s %q", c.name, o.kind, o.detail, c.want, c.wantDetail)
			}
		})
	}
}

// TestChaosJudgeTimeoutAndLeave: a server that never finishes pins the
// request (hard timeout); a client that leaves mid-stream is disconnected,
// not bad.
func TestChaosJudgeTimeoutAndLeave(t *testing.T) {
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; ; i++ {
			if _, err := w.Write([]byte("data: {\"choices\":[{\"index\":0,\"text\":\"x\",\"finish_reason\":null}]}\n\n")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}))
	defer srv.Close()
	defer close(stop)
	cs := newChaosClients(1)
	defer cs.closeIdle()
	cases := []struct {
		name string
		r    *chaosRequest
		want outcomeKind
	}{
		{"hangs", &chaosRequest{stream: true, n: 1, maxTokens: 4, keepAlive: true}, outcomePinned},
		{"leaves mid-answer", &chaosRequest{stream: true, n: 1, maxTokens: 4, keepAlive: true, leave: leaveMidAnswer, leaveAfter: 3}, outcomeDisconnected},
		{"leaves after a delay", &chaosRequest{stream: true, n: 1, maxTokens: 4, keepAlive: false, leave: leaveAfterDelay, leaveDelay: 50 * time.Millisecond}, outcomeDisconnected},
		{"leaves at the headers", &chaosRequest{stream: true, n: 1, maxTokens: 4, keepAlive: true, leave: leaveAtHeaders}, outcomeDisconnected},
	}
	for _, c := range cases {
		c.r.body = []byte(`{}`)
		if o := c.r.run(cs, srv.URL, 300*time.Millisecond); o.kind != c.want {
			t.Errorf("run(%s) = %s %q, want %s", c.name, o.kind, o.detail, c.want)
		}
	}
}

// TestParseProm reads the Prometheus text format the workers serve.
func TestParseProm(t *testing.T) {
	doc := `# HELP tandem_kv_pages_used KV cache pages in use.
# TYPE tandem_kv_pages_used gauge
tandem_kv_pages_used 3
tandem_pd_room_failures_total{reason="peer_lost"} 2
tandem_pd_room_failures_total{reason="deadline"} 1
tandem_pd_queue_rooms{queue="transfer"} 0
odd{a="x\"y",b="z"} 1.5e+01 1700000000
`
	ps, err := parseProm(strings.NewReader(doc))
	if err != nil {
		t.Fatalf("parseProm: %v", err)
	}
	if v, ok := ps.value("tandem_kv_pages_used"); !ok || v != 3 {
		t.Errorf("value(tandem_kv_pages_used) = %g, %v, want 3, true", v, ok)
	}
	if v, ok := ps.value("tandem_pd_room_failures_total", "reason", "deadline"); !ok || v != 1 {
		t.Errorf("value(failures, reason=deadline) = %g, %v, want 1, true", v, ok)
	}
	if _, ok := ps.value("tandem_pd_room_failures_total", "reason", "checksum"); ok {
		t.Errorf("value(failures, reason=checksum) found, want absent")
	}
	if v, ok := ps.value("odd", "a", `x"y`, "b", "z"); !ok || v != 15 {
		t.Errorf("value(odd) = %g, %v, want 15, true", v, ok)
	}
	if got := ps.byLabel("tandem_pd_room_failures_total", "reason"); len(got) != 2 || got["peer_lost"] != 2 {
		t.Errorf("byLabel(failures, reason) = %v, want peer_lost=2 deadline=1", got)
	}
	g, err := gaugesOf(ps)
	if err == nil {
		t.Errorf("gaugesOf without the running/waiting gauges = %v, want an error", g)
	}
	for _, bad := range []string{"name_only\n", `x{a="b} 1` + "\n", "x notanumber\n"} {
		if _, err := parseProm(strings.NewReader(bad)); err == nil {
			t.Errorf("parseProm(%q) = nil error, want one", bad)
		}
	}
}
