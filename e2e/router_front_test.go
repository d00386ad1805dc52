package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"tandem/internal/cluster"
	"tandem/internal/inspect"
)

// startRouterCluster starts 1 prefill and 2 decode workers and a router
// with routerArgs on the tiny model; the cluster stops when the test ends
// and its output is logged if the test failed.
func startRouterCluster(t *testing.T, routerArgs ...string) *cluster.Cluster {
	t.Helper()
	var out lockedBuffer
	return startCluster(t, &out, cluster.Options{Model: modelPath, Prefill: 1, Decode: 2,
		WorkerArgs: []string{"--threads", "1"}, RouterArgs: append([]string{"--pd-threshold", "0"}, routerArgs...)})
}

// startCluster starts a cluster of the test binary with the e2e cluster
// token, its output in out; it stops when the test ends, and its output
// (the last chaosLogTailBytes) is logged if the test failed.
func startCluster(t *testing.T, out *lockedBuffer, o cluster.Options) *cluster.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o.Binary, o.Token, o.Output = binPath, e2eClusterToken, out
	cl, err := cluster.Start(ctx, o)
	if err != nil {
		t.Fatalf("start the cluster: %v\n%s", err, out.String())
	}
	t.Cleanup(func() {
		cl.Stop()
		if t.Failed() {
			s := out.String()
			if len(s) > chaosLogTailBytes {
				s = "...\n" + s[len(s)-chaosLogTailBytes:]
			}
			t.Logf("cluster output:\n%s", s)
		}
	})
	return cl
}

func procURL(t *testing.T, cl *cluster.Cluster, name string) string {
	t.Helper()
	for _, p := range cl.Procs() {
		if p.Name == name {
			return p.URL
		}
	}
	t.Fatalf("no process %s", name)
	return ""
}

// routerPost posts body to the router with headers and returns the answer.
func routerPost(t *testing.T, c *http.Client, url, body string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: read: %v", url, err)
	}
	return resp, string(b)
}

// TestRouterKilledDecodeWorkerIsRetried: with health checks too rare to
// notice (an hour apart), a decode worker killed under the router costs
// no client request: its refused legs are retried on the other decode
// worker, and its circuit breaker opens after at most 3 of them.
func TestRouterKilledDecodeWorkerIsRetried(t *testing.T) {
	setup(t)
	cl := startRouterCluster(t, "--health-interval", "1h", "--breaker-cooldown", "1h") // no probe leg during the test
	base := cl.RouterURL()
	dead := procURL(t, cl, "decode-0")
	if err := cl.Kill("decode-0"); err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Timeout: time.Minute}
	const requests = 12
	for i := range requests {
		stream := i%2 == 1
		body := `{"prompt":"Once upon a time","max_tokens":4,"temperature":0,"stream":` + map[bool]string{false: "false", true: "true"}[stream] + `}`
		resp, text := routerPost(t, c, base+"/v1/completions", body, nil)
		if resp.StatusCode != 200 || strings.Contains(text, `"error"`) {
			t.Errorf("request %d (stream %v) with decode-0 dead: %d %.300s, want a whole answer", i, stream, resp.StatusCode, text)
		}
	}
	ps, err := fetchMetrics(context.Background(), c, base)
	if err != nil {
		t.Fatal(err)
	}
	legs, _ := ps.value("tandem_router_worker_requests_total", "worker", dead, "role", "decode")
	state, _ := ps.value("tandem_router_worker_breaker_state", "worker", dead, "role", "decode")
	retries, _ := ps.value("tandem_router_retries_total")
	if legs < 1 || legs > 3 || state != 2 || retries != legs {
		t.Errorf("dead decode worker: %v legs, breaker state %v, %v retries; want 1 to 3 legs, state 2 (open), one retry per leg", legs, state, retries)
	}
}

// TestRouterFrontDoor: the API key guards /v1/ only; a client's
// X-Request-Id is echoed and reaches both workers' room tables; an allowed
// origin gets its CORS header.
func TestRouterFrontDoor(t *testing.T) {
	setup(t)
	cl := startRouterCluster(t, "--api-key", "e2e-key-1234", "--allowed-origins", "https://app.example")
	base := cl.RouterURL()
	c := &http.Client{Timeout: time.Minute}
	body := `{"prompt":"Once upon a time","max_tokens":2,"temperature":0}`
	if resp, text := routerPost(t, c, base+"/v1/completions", body, nil); resp.StatusCode != 401 || !strings.Contains(text, "invalid_api_key") {
		t.Errorf("POST without the key = %d %s, want 401 invalid_api_key", resp.StatusCode, text)
	}
	resp, text := routerPost(t, c, base+"/v1/completions", body, map[string]string{"Authorization": "Bearer e2e-key-1234",
		"X-Request-Id": "e2e-trace-7", "Origin": "https://app.example"})
	if resp.StatusCode != 200 || resp.Header.Get("X-Request-Id") != "e2e-trace-7" || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Fatalf("POST with the key = %d %s (X-Request-Id %q, ACAO %q), want 200 with the id and the origin echoed", resp.StatusCode, text,
			resp.Header.Get("X-Request-Id"), resp.Header.Get("Access-Control-Allow-Origin"))
	}
	dc := &http.Client{Timeout: time.Minute, Transport: e2eKeys(t).Transport(nil)} // /debug needs the cluster credential
	raw, err := inspect.FetchCluster(context.Background(), dc, base)
	if err != nil {
		t.Fatal(err)
	}
	cd, err := inspect.ParseCluster(raw)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, p := range cd.Processes {
		for _, r := range p.Rooms {
			if r.RequestID == "e2e-trace-7" {
				seen[p.Role] = true
			}
		}
	}
	if !seen["router"] || !seen["prefill"] || !seen["decode"] {
		b, _ := json.Marshal(cd)
		t.Errorf("request id e2e-trace-7 seen in the room tables of %v, want router, prefill and decode: %.2000s", seen, b)
	}
	if resp, err := c.Get(base + "/health"); err != nil || resp.StatusCode != 200 {
		t.Errorf("GET /health without the key = %v, %v; want 200", resp, err)
	} else {
		resp.Body.Close()
	}
}
