package e2e

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"tandem/internal/cluster"
)

// A drain whose deadline passes with a stream still running: a model slow
// enough on one thread that its stream outlasts the deadline.
const (
	deadlineDrain  = 2 * time.Second  // --drain-timeout
	deadlineTokens = 1500             // the stream's max_tokens: far more than the 110m model makes in deadlineDrain
	deadlineExit   = 30 * time.Second // SIGTERM to exit at most (the drain, its end, the process's teardown)
)

var (
	slowModelOnce sync.Once
	slowModel     string
	slowModelErr  error
)

// slowModelPath synthesizes the 110m preset once (about 140 MB in the work
// folder): on one thread it decodes tens of tokens a second.
func slowModelPath(t *testing.T) string {
	t.Helper()
	slowModelOnce.Do(func() {
		p := filepath.Join(workDir, "110m.gguf")
		out, err := exec.Command(binPath, "model", "synth", "--preset", "110m", "--type", "q8_0", "-o", p).CombinedOutput()
		if err != nil {
			slowModelErr = errors.New("tandem model synth --preset 110m: " + err.Error() + "\n" + string(out))
		}
		slowModel = p
	})
	if slowModelErr != nil {
		t.Fatal(slowModelErr)
	}
	return slowModel
}

// startStream sends a long streamed completion to base and returns its
// reader once the first token arrived.
func startStream(t *testing.T, base string) (*bufio.Reader, func()) {
	t.Helper()
	body := `{"prompt":"Once upon a time","max_tokens":` + strconv.Itoa(deadlineTokens) + `,"ignore_eos":true,"stream":true}`
	resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		t.Fatalf("stream: status %s", resp.Status)
	}
	rd := bufio.NewReader(resp.Body)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			resp.Body.Close()
			t.Fatalf("stream ended before its first token: %v", err)
		}
		if strings.Contains(line, `"text"`) {
			return rd, func() { resp.Body.Close() }
		}
	}
}

// streamEnd reads the rest of a stream and returns its data lines.
func streamEnd(rd *bufio.Reader) []string {
	var data []string
	for {
		line, err := rd.ReadString('\n')
		if d, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
			data = append(data, d)
		}
		if err != nil {
			return data
		}
	}
}

// TestDrainDeadlineServe: `tandem serve` told to stop while a stream runs
// past its --drain-timeout ends that stream with one error event (then
// [DONE], as serve ends every stream) at the deadline, logs it, and exits
// 0.
func TestDrainDeadlineServe(t *testing.T) {
	setup(t)
	model := slowModelPath(t)
	port := freePort(t)
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	var out lockedBuffer
	cmd := exec.Command(binPath, "serve", "--model", model, "--threads", "1", "--port", strconv.Itoa(port),
		"--drain-settle", "0s", "--drain-timeout", deadlineDrain.String())
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		if t.Failed() {
			t.Logf("tandem serve output:\n%s", out.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), healthTimeout)
	defer cancel()
	if err := cluster.WaitReady(ctx, &http.Client{Timeout: 2 * time.Second}, base, nil); err != nil {
		t.Fatal(err)
	}
	rd, closeStream := startStream(t, base)
	defer closeStream()

	t0 := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	data := streamEnd(rd)
	cut := time.Since(t0)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("tandem serve exited with %v after its drain deadline, want 0", err)
		}
	case <-time.After(deadlineExit):
		t.Fatalf("tandem serve did not exit within %s of SIGTERM", deadlineExit)
	}
	exit := time.Since(t0)
	n := len(data)
	if n < 2 || !strings.Contains(data[n-2], `"error"`) || data[n-1] != "[DONE]" {
		t.Errorf("the stream cut at the deadline ended with %q, want one error event, then [DONE]", data[max(0, n-3):])
	}
	if cut < deadlineDrain {
		t.Errorf("the stream was cut %s after SIGTERM, before the drain timeout %s", cut, deadlineDrain)
	}
	if !strings.Contains(out.String(), "ended_at_deadline=1") {
		t.Errorf("the log does not say that one request was ended at the deadline")
	}
	t.Logf("serve: stream cut %s after SIGTERM (--drain-settle 0s, --drain-timeout %s), exit 0 after %s", cut.Round(time.Millisecond),
		deadlineDrain, exit.Round(time.Millisecond))
}

// TestDrainDeadlineDecode: a decode worker told to stop while a
// disaggregated stream runs past its --drain-timeout ends it at the
// deadline: the client gets one error event through the router, the
// worker exits 0, every room on the prefill worker and the router has
// ended, the prefill worker holds no page, and the decode worker started
// again serves.
func TestDrainDeadlineDecode(t *testing.T) {
	setup(t)
	var out lockedBuffer
	cl := startCluster(t, &out, cluster.Options{Model: slowModelPath(t), Prefill: 1, Decode: 1,
		WorkerArgs: []string{"--threads", "1", "--prefix-cache=false", "--drain-settle=0s", "--drain-timeout=" + deadlineDrain.String()},
		RouterArgs: []string{"--pd-threshold", "0"}})
	ctx, cancel := context.WithTimeout(context.Background(), fleetStartTimeout)
	defer cancel()
	base := cl.RouterURL()
	rd, closeStream := startStream(t, base)
	defer closeStream()

	d, err := cl.Drain("decode-0")
	if err != nil {
		t.Errorf("decode-0: %v after %s, want exit 0", err, d)
	}
	data := streamEnd(rd)
	n := len(data)
	if n == 0 || !strings.Contains(data[n-1], `"error"`) || !strings.Contains(data[n-1], "decode") {
		t.Errorf("the stream cut at the decode worker's deadline ended with %q, want one error event naming the decode leg", data[max(0, n-2):])
	}
	if d < deadlineDrain || d > deadlineExit {
		t.Errorf("decode-0 took %s from SIGTERM to exit, want the drain timeout %s and at most %s", d, deadlineDrain, deadlineExit)
	}

	var prefill, decode *cluster.Proc
	for _, p := range cl.Procs() {
		switch p.Role {
		case "prefill":
			prefill = p
		case "decode":
			decode = p
		}
	}
	mc := &http.Client{Timeout: 10 * time.Second}
	waitFor(t, "every room on the prefill worker and the router ended, and no page held", func() bool {
		for _, u := range []string{prefill.URL, cl.Routers()[0].URL} {
			doc, err := roomTable(context.Background(), mc, u)
			if err != nil || doc.Live != 0 {
				return false
			}
		}
		g, err := readGauges(mc, []*cluster.Proc{prefill})
		return err == nil && g[prefill.Name].quiet()
	})
	if err := cl.Restart(ctx, "decode-0"); err != nil {
		t.Fatal(err)
	}
	if err := routersSee(ctx, cl, decode.URL); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"Once upon a time","max_tokens":4}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("a request after decode-0's restart: %s, want 200", resp.Status)
	}
	t.Logf("decode: SIGTERM to exit %s (--drain-settle 0s, --drain-timeout %s); the client's stream ended with %s", d.Round(time.Millisecond),
		deadlineDrain, clip(data[max(0, n-1)], 200))
}
