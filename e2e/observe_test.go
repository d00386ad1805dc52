package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"tandem/internal/cluster"
)

// observedCluster starts one prefill, two decode workers and a router
// (no supervision: a killed worker stays dead) with every request
// disaggregated, and a closed-loop streaming load of conc clients until the
// test ends.
func observedCluster(t *testing.T, out *lockedBuffer, conc int) *cluster.Cluster {
	t.Helper()
	cl := startCluster(t, out, cluster.Options{Model: modelPath, Prefill: 1, Decode: 2,
		WorkerArgs: []string{"--threads", "1"},
		RouterArgs: []string{"--pd-threshold", "0"}})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	c := &http.Client{Timeout: time.Minute}
	for i := range conc {
		wg.Go(func() {
			for ctx.Err() == nil {
				body := fmt.Sprintf(`{"prompt":"Once upon a time %d","max_tokens":300,"ignore_eos":true,"stream":true}`, i)
				req, _ := http.NewRequestWithContext(ctx, "POST", cl.RouterURL()+"/v1/completions", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				resp, err := c.Do(req)
				if err != nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				var sink bytes.Buffer
				sink.ReadFrom(resp.Body)
				resp.Body.Close()
			}
		})
	}
	return cl
}

// TestPrometheusRules: the rules in deploy/prometheus pass `promtool check
// rules` and their unit tests (`promtool test rules`); the Helm chart's
// copy is the same file; the Grafana dashboards are JSON whose queries name
// only series Tandem exports or the rules record.
func TestPrometheusRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (Debian: apt-get install prometheus); .ci/run installs it")
	}
	root := repoRoot(t)
	dir := filepath.Join(root, "deploy", "prometheus")
	for _, args := range [][]string{{"check", "rules", "tandem-rules.yaml"}, {"test", "rules", "tandem-rules_test.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	src, err := os.ReadFile(filepath.Join(dir, "tandem-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	chart, err := os.ReadFile(filepath.Join(root, "deploy", "helm", "tandem", "files", "tandem-rules.yaml"))
	if err != nil || !bytes.Equal(src, chart) {
		t.Errorf("deploy/helm/tandem/files/tandem-rules.yaml differs from deploy/prometheus/tandem-rules.yaml (%v): copy it", err)
	}
	recorded := map[string]bool{}
	for _, m := range regexp.MustCompile(`record: (\S+)`).FindAllStringSubmatch(string(src), -1) {
		recorded[m[1]] = true
	}
	exported := exportedNames(t, root)
	name := regexp.MustCompile(`(?:vllm:|tandem:|tandem_)[a-zA-Z0-9_:]+`)
	for _, f := range []string{"tandem-overview.json", "tandem-pd.json"} {
		b, err := os.ReadFile(filepath.Join(root, "deploy", "grafana", f))
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Panels []struct {
				Title   string `json:"title"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(b, &d); err != nil || len(d.Panels) < 8 {
			t.Fatalf("%s: %v (%d panels)", f, err, len(d.Panels))
		}
		for _, p := range d.Panels {
			for _, tg := range p.Targets {
				for _, n := range name.FindAllString(tg.Expr, -1) {
					base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
					if !recorded[n] && !exported[base] && !exported[n] {
						t.Errorf("%s: panel %q queries %s, which nothing exports or records", f, p.Title, n)
					}
				}
			}
		}
	}
}

// exportedNames collects the metric names Tandem's Go code registers (the
// quoted names beginning with vllm: or tandem_).
func exportedNames(t *testing.T, root string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	re := regexp.MustCompile(`"((?:vllm:|tandem_)[a-z0-9_:]+)"`)
	filepath.WalkDir(filepath.Join(root, "internal"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, _ := os.ReadFile(p)
		for _, m := range re.FindAllSubmatch(b, -1) {
			names[string(m[1])] = true
		}
		return nil
	})
	return names
}

// TestPrometheusAlertOnKill runs a real Prometheus (Debian's prometheus)
// scraping a running cluster every second with deploy/prometheus's rules
// (their `for` cut to alertFor), kills a decode worker under load, and
// sees TandemWorkerDown fire for it within the rule's `for` after the
// router took the worker out.
func TestPrometheusAlertOnKill(t *testing.T) {
	setup(t)
	skipShort(t)
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus is not installed (Debian: apt-get install prometheus); .ci/run installs it")
	}
	const alertFor = 5 * time.Second
	var out lockedBuffer
	cl := observedCluster(t, &out, 2)
	dir := t.TempDir()
	rules, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "prometheus", "tandem-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rules = regexp.MustCompile(`(?m)^(\s+for:) \S+$`).ReplaceAll(rules, []byte("${1} 5s"))
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, p := range cl.Procs() {
		targets = append(targets, fmt.Sprintf("%q", strings.TrimPrefix(p.URL, "http://")))
	}
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: [rules.yaml]\n"+
		"scrape_configs:\n  - job_name: tandem\n    static_configs:\n      - targets: [%s]\n", strings.Join(targets, ", "))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	promURL := fmt.Sprintf("http://127.0.0.1:%d", port)
	var promOut lockedBuffer
	cmd := exec.Command(prom, "--config.file", filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path", filepath.Join(dir, "data"),
		"--web.listen-address", fmt.Sprintf("127.0.0.1:%d", port))
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &promOut, &promOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus output:\n%s", promOut.String())
		}
	})
	c := &http.Client{Timeout: 5 * time.Second}
	query := func(path string, v any) error {
		resp, err := c.Get(promURL + path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(v)
	}
	type alert struct {
		Labels   map[string]string `json:"labels"`
		State    string            `json:"state"`
		ActiveAt time.Time         `json:"activeAt"`
	}
	var alerts struct {
		Data struct {
			Alerts []alert `json:"alerts"`
		} `json:"data"`
	}
	// Every target scraped and up before the kill.
	waitFor(t, "Prometheus scraping every process", func() bool {
		var r struct {
			Data struct {
				Result []json.RawMessage `json:"result"`
			} `json:"data"`
		}
		return query("/api/v1/query?query=up%3D%3D1", &r) == nil && len(r.Data.Result) == len(targets)
	})
	victim := procURL(t, cl, "decode-1")
	kill := time.Now()
	if err := cl.Kill("decode-1"); err != nil {
		t.Fatal(err)
	}
	var firing alert
	testenvDeadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(testenvDeadline) && firing.State == "" {
		if query("/api/v1/alerts", &alerts) == nil {
			for _, a := range alerts.Data.Alerts {
				if a.Labels["alertname"] == "TandemWorkerDown" && a.Labels["worker"] == victim && a.State == "firing" {
					firing = a
				}
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	if firing.State == "" {
		t.Fatalf("TandemWorkerDown for %s did not fire within 90 s of the kill; alerts: %+v", victim, alerts.Data.Alerts)
	}
	firedAfter := time.Since(kill)
	pendingAfter := firing.ActiveAt.Sub(kill)
	t.Logf("decode-1 killed; TandemWorkerDown pending %.1f s after the kill (the router's health checks took it out), firing %.1f s after it (for: %s)",
		pendingAfter.Seconds(), firedAfter.Seconds(), alertFor)
	// Firing comes once the `for` has passed since pending, give or take
	// an evaluation interval and this poll.
	if d := firedAfter - pendingAfter; d < alertFor || d > alertFor+3*time.Second {
		t.Errorf("fired %.1f s after it went pending, want the rule's for (%s) plus at most 3 s", d.Seconds(), alertFor)
	}
	if pendingAfter > 20*time.Second {
		t.Errorf("the alert went pending %.1f s after the kill: the router or the scrape is slow to see a dead worker", pendingAfter.Seconds())
	}
}
