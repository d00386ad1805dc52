package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"tandem/internal/inspect"
	"tandem/internal/pd/debugdoc"
)

// vllmDashboardNames are the metric names vLLM's Grafana dashboard
// (examples/observability/prometheus_grafana/grafana.json) queries; each
// must be on a server's and a worker's /metrics with a model_name label so
// the dashboard works unchanged.
var vllmDashboardNames = []string{
	"vllm:e2e_request_latency_seconds_bucket", "vllm:inter_token_latency_seconds_bucket",
	"vllm:time_to_first_token_seconds_bucket", "vllm:num_requests_running", "vllm:num_requests_waiting",
	"vllm:kv_cache_usage_perc", "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
	"vllm:request_prompt_tokens_bucket", "vllm:request_generation_tokens_bucket", "vllm:request_success_total",
	"vllm:request_queue_time_seconds_bucket", "vllm:request_prefill_time_seconds_bucket",
	"vllm:request_decode_time_seconds_bucket", "vllm:request_max_num_generation_tokens_bucket",
}

// routerVLLMNames are the cluster-level series the router exports under
// vLLM's names (its requests, and sums over its workers' status).
var routerVLLMNames = []string{
	"vllm:e2e_request_latency_seconds_bucket", "vllm:time_to_first_token_seconds_bucket",
	"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
	"vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:request_prompt_tokens_bucket",
	"vllm:request_generation_tokens_bucket", "vllm:request_success_total",
	"tandem_router_rooms_total", "tandem_router_workers", "tandem_router_worker_kv_usage",
}

// requireSeries fails the test unless base's /metrics has a sample of each
// name, with a model_name label for the vllm: ones.
func requireSeries(t *testing.T, c *http.Client, name, base string, names []string) {
	t.Helper()
	resp, err := c.Get(base + "/metrics")
	if err != nil {
		t.Fatalf("%s: get /metrics: %v", name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, n := range names {
		vllm := strings.HasPrefix(n, "vllm:")
		found := false
		for l := range strings.Lines(string(b)) {
			if strings.HasPrefix(l, n+"{") && (!vllm || strings.Contains(l, `model_name="`)) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s: /metrics has no %s series (vllm: ones with a model_name label)", name, n)
		}
	}
}

// lintMetrics runs promlint (the linter behind `promtool check metrics`)
// over base's /metrics and reports every problem as a test error.
func lintMetrics(t *testing.T, c *http.Client, name, base string) {
	t.Helper()
	resp, err := c.Get(base + "/metrics")
	if err != nil {
		t.Fatalf("%s: get /metrics: %v", name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: get /metrics: %v %s", name, err, resp.Status)
	}
	problems, err := promlint.New(bytes.NewReader(b)).Lint()
	if err != nil {
		t.Fatalf("%s: /metrics does not parse as the Prometheus text format: %v", name, err)
	}
	for _, p := range problems {
		// vLLM's metric names (vllm:..., exported beside Tandem's for
		// dashboards built for vLLM) have a colon, which promlint flags
		// though Prometheus allows it; that one problem is theirs by design.
		if strings.HasPrefix(p.Metric, "vllm:") && p.Text == "metric names should not contain ':'" {
			continue
		}
		t.Errorf("%s: promtool check metrics: %s: %s", name, p.Metric, p.Text)
	}
	if n := bytes.Count(b, []byte("# TYPE ")); n < 5 {
		t.Errorf("%s: /metrics has only %d metric families; is it the real exposition?", name, n)
	}
}

// postCompletion sends one small completion and fails the test unless it
// gets 200, so the request counters and histograms have series.
func postCompletion(t *testing.T, c *http.Client, base string) {
	t.Helper()
	body := `{"prompt":"Once upon a time","max_tokens":4,"temperature":0}`
	resp, err := c.Post(base+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s/v1/completions: %v", base, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s/v1/completions: %s: %s", base, resp.Status, b)
	}
}

// TestMetricsLint: the /metrics of `tandem serve`, and of the router, the
// prefill and the decode worker of `tandem up`, pass promlint, after a
// completion has given every labelled metric a series; serve and each
// worker have every name vLLM's Grafana dashboard queries, and the router
// the cluster-level series.
func TestMetricsLint(t *testing.T) {
	setup(t)
	c := &http.Client{Timeout: time.Minute}
	t.Run("serve", func(t *testing.T) {
		base := startServe(t, modelPath)
		postCompletion(t, c, base)
		lintMetrics(t, c, "tandem serve", base)
		requireSeries(t, c, "tandem serve", base, vllmDashboardNames)
	})
	t.Run("up", func(t *testing.T) {
		base := startUp(t, modelPath)
		postCompletion(t, c, base)
		lintMetrics(t, c, "router", base)
		for _, w := range clusterWorkers(t, c, base) {
			lintMetrics(t, c, w.Role+" "+w.Worker, w.Worker)
			requireSeries(t, c, w.Role+" "+w.Worker, w.Worker, vllmDashboardNames)
		}
		// The router learns each worker's status by polling it.
		waitFor(t, "the router's worker gauges", func() bool {
			resp, err := c.Get(base + "/metrics")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return bytes.Contains(b, []byte("tandem_router_worker_kv_usage{"))
		})
		requireSeries(t, c, "router", base, routerVLLMNames)
	})
}

// clusterWorkers returns the workers listed in the router's /debug/cluster
// (Worker is each one's base URL); it fails the test unless there is at
// least one prefill and one decode worker.
func clusterWorkers(t *testing.T, c *http.Client, base string) []debugdoc.Rooms {
	t.Helper()
	b, err := debugGet(context.Background(), c, base+"/debug/cluster")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := inspect.ParseCluster(b)
	if err != nil {
		t.Fatal(err)
	}
	var ws []debugdoc.Rooms
	roles := map[string]int{}
	for _, p := range cl.Processes {
		if p.Role == "prefill" || p.Role == "decode" {
			ws = append(ws, p)
			roles[p.Role]++
		}
	}
	if roles["prefill"] == 0 || roles["decode"] == 0 {
		t.Fatalf("/debug/cluster lists %v workers, want a prefill and a decode one:\n%s", roles, b)
	}
	return ws
}

// TestUpJSONLogs: `tandem up --log-format json` writes only JSON objects
// on stderr, from start to stop, each with a "proc" member naming the
// process that wrote it, and up itself, prefill-0, decode-0 and the router
// are all heard from.
func TestUpJSONLogs(t *testing.T) {
	setup(t)
	port := freePort(t)
	var stdout, stderr lockedBuffer
	// Registered first, so it runs after startProcessOut's cleanup has
	// stopped up: the shutdown lines are checked too.
	t.Cleanup(func() { checkJSONLines(t, stderr.String(), "up", "prefill-0", "decode-0", "router") })
	base := startProcessOut(t, port, &stdout, &stderr, "up", "--model", modelPath, "--port", strconv.Itoa(port),
		"--threads", "1", "--log-format", "json")
	postCompletion(t, &http.Client{Timeout: time.Minute}, base)
	// The router answers /health a little before up announces it.
	waitFor(t, "up's announcement on stdout", func() bool { return strings.Contains(stdout.String(), "tandem is up: "+base) })
}

// checkJSONLines fails the test unless every line of out is a JSON object
// with a string "proc" member, and each of want wrote at least one line.
func checkJSONLines(t *testing.T, out string, want ...string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	procs := map[string]int{}
	for i, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Errorf("stderr line %d is not a JSON object: %v\n%s", i+1, err, l)
			continue
		}
		p, ok := m["proc"].(string)
		if !ok {
			t.Errorf("stderr line %d has no string \"proc\" member: %s", i+1, l)
		}
		procs[p]++
	}
	for _, w := range want {
		if procs[w] == 0 {
			t.Errorf("no line from %s; lines by proc: %v", w, procs)
		}
	}
	t.Logf("%d JSON lines by proc: %v", len(lines), procs)
}
