package discovery

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"tandem/test/k8s/kubetest"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }

// The test's sizes.
const (
	workerPort   = 8200                   // every worker's HTTP port, each on its own loopback address
	loadRate     = 5                      // requests per second, open loop (a new worker is picked within 2 of them)
	genTokens    = 64                     // tokens each answer generates
	joinMax      = time.Second            // Pod Ready to the worker's first room
	startTimeout = 2 * time.Minute        // a process answering /ready
	stepTimeout  = 30 * time.Second       // a membership change seen by the router
	poll         = 20 * time.Millisecond  // how often the test looks
	settle       = 500 * time.Millisecond // every process's --drain-settle
	holdLoad     = 3 * time.Second        // load between the changes
)

// selector is the chart's discovery selector for a release named "tandem"
// (deploy/helm/tandem/templates/_helpers.tpl, tandem.discoverySelector);
// labels are what the chart puts on a worker Pod of role.
const selector = "app.kubernetes.io/name=tandem,app.kubernetes.io/instance=tandem,llm-d.ai/inferenceServing=true"

func labels(role string) map[string]string {
	return map[string]string{"app.kubernetes.io/name": "tandem", "app.kubernetes.io/instance": "tandem",
		"llm-d.ai/inferenceServing": "true", "llm-d.ai/role": role}
}

// proc is a tandem process the test started.
type proc struct {
	name, url string
	cmd       *exec.Cmd
	out       *lockedBuffer
	done      chan struct{}
	err       error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// buildTandem returns $TANDEM_BIN, or builds the tandem binary of this
// repository into dir, and synthesizes the tiny model there.
func buildTandem(t *testing.T, dir string) (bin, model string) {
	t.Helper()
	bin = os.Getenv("TANDEM_BIN")
	if bin == "" {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..", "..")
		bin = filepath.Join(dir, "tandem")
		cmd := exec.Command("go", "-C", root, "build", "-o", bin, "./cmd/tandem")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build ./cmd/tandem: %v\n%s", err, out)
		}
	}
	model = filepath.Join(dir, "tiny.gguf")
	if out, err := exec.Command(bin, "model", "synth", "--preset", "tiny", "--type", "q8_0", "-o", model).CombinedOutput(); err != nil {
		t.Fatalf("tandem model synth: %v\n%s", err, out)
	}
	return bin, model
}

// start runs tandem with args and the cluster token, waits until
// GET url/ready answers 200 (unless wait is false) and stops it (SIGTERM,
// then SIGKILL after 30 s) when the test ends.
func start(t *testing.T, bin, token, name, url string, wait bool, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, url: url, out: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), "TANDEM_CLUSTER_TOKEN="+token)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("%s output:\n%s", name, p.out.String())
		}
	})
	if wait {
		waitReady(t, p, startTimeout)
	}
	return p
}

// stop sends SIGTERM and waits for the exit (SIGKILL after 30 s).
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

func waitReady(t *testing.T, p *proc, limit time.Duration) {
	t.Helper()
	c := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(limit)
	for {
		select {
		case <-p.done:
			t.Fatalf("%s exited while starting: %v\n%s", p.name, p.err, p.out.String())
		default:
		}
		if resp, err := c.Get(p.url + "/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: /ready not 200 within %s\n%s", p.name, limit, p.out.String())
		}
		time.Sleep(poll)
	}
}

// metric sums the samples of name (whose labels contain match) in url's
// /metrics, and says whether any was there.
func metric(url, name, match string) (float64, bool, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url + "/metrics")
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	sum, found := 0.0, false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != '{' && line[len(name)] != ' ') {
			continue
		}
		if match != "" && !strings.Contains(line, match) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		sum, found = sum+v, true
	}
	return sum, found, sc.Err()
}

// roomsOn counts the rooms a worker has taken part in: the request events
// of its room machines (the other events include timers, ticks and peer
// keep-alives, which go on without any room).
func roomsOn(url string) float64 {
	n, _, _ := metric(url, "tandem_pd_events_total", `event="request"`)
	return n
}

// load is an open loop of completions at loadRate.
type load struct {
	stop         chan struct{}
	wg           sync.WaitGroup
	sent, failed atomic.Int64
	mu           sync.Mutex
	failures     []string
}

func startLoad(base string) *load {
	l := &load{stop: make(chan struct{})}
	c := &http.Client{Timeout: time.Minute}
	body := fmt.Sprintf(`{"prompt":"%s","max_tokens":%d,"ignore_eos":true,"temperature":0}`, strings.Repeat("the cat sat on the mat ", 40), genTokens)
	l.wg.Go(func() {
		tick := time.NewTicker(time.Second / time.Duration(loadRate))
		defer tick.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			l.sent.Add(1)
			l.wg.Go(func() {
				resp, err := c.Post(base+"/v1/completions", "application/json", strings.NewReader(body))
				why := ""
				switch {
				case err != nil:
					why = err.Error()
				default:
					b := new(strings.Builder)
					_, rerr := bufio.NewReader(resp.Body).WriteTo(b)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK || rerr != nil || !strings.Contains(b.String(), `"finish_reason":"length"`) {
						why = fmt.Sprintf("status %d, read %v: %.300s", resp.StatusCode, rerr, b.String())
					}
				}
				if why != "" {
					l.failed.Add(1)
					l.mu.Lock()
					l.failures = append(l.failures, why)
					l.mu.Unlock()
				}
			})
		}
	})
	return l
}

func (l *load) finish() {
	close(l.stop)
	l.wg.Wait()
}

// freePort returns a free TCP port on 127.0.0.1.
func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestRouterFollowsPods: the router of the chart's arguments, on the test
// API server, scales with the worker Pods under load: 1P1D, then 2P2D
// (Pods created, then made Ready: each new worker must take a room within
// joinMax of it), then 1P1D again (prefill-1's Pod terminating with a grace
// period, as a scale-in does, then stopped and deleted as the kubelet
// would; decode-1's deleted at once): the removed workers leave rotation,
// finish their legs and get no new room, no request fails, and every
// worker's KV pages come back.
func TestRouterFollowsPods(t *testing.T) {
	env := kubetest.Shared(t, kubetest.Options{})
	ns := env.Namespace(t, "discovery-scale", nil)
	dir := t.TempDir()
	bin, model := buildTandem(t, dir)
	var tok [32]byte
	rand.Read(tok[:])
	token := hex.EncodeToString(tok[:])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	type worker struct {
		name, role, ip string
		p              *proc
	}
	workers := []*worker{{name: "prefill-0", role: "prefill", ip: "127.0.0.2"}, {name: "decode-0", role: "decode", ip: "127.0.0.3"},
		{name: "prefill-1", role: "prefill", ip: "127.0.0.4"}, {name: "decode-1", role: "decode", ip: "127.0.0.5"}}
	for _, w := range workers {
		url := "http://" + net.JoinHostPort(w.ip, strconv.Itoa(workerPort))
		w.p = start(t, bin, token, w.name, url, false, w.role, "--model", model, "--host", w.ip, "--port", strconv.Itoa(workerPort),
			"--transfer-host", w.ip, "--threads", "1", "--prefix-cache=false", "--drain-settle", settle.String())
	}
	for _, w := range workers {
		waitReady(t, w.p, startTimeout)
	}
	pod := func(w *worker) kubetest.Pod {
		return kubetest.Pod{Namespace: ns, Name: w.name, Labels: labels(w.role),
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: workerPort}}}
	}
	ready := func(w *worker) time.Time {
		if _, err := env.SetPodReady(ctx, ns, w.name, w.ip, true); err != nil {
			t.Fatalf("make %s Ready: %v", w.name, err)
		}
		return time.Now()
	}
	for _, w := range workers[:2] {
		if _, err := env.CreatePod(ctx, pod(w)); err != nil {
			t.Fatalf("create %s: %v", w.name, err)
		}
		ready(w)
	}

	// The router: the chart's router arguments, a kubeconfig for the test
	// API server instead of the in-cluster service account.
	port := freePort(t)
	rurl := "http://127.0.0.1:" + strconv.Itoa(port)
	start(t, bin, token, "router", rurl, true, "route", "--discovery=k8s", "--discovery-namespace="+ns,
		"--discovery-selector="+selector, "--kubeconfig", env.Kubeconfig, "--host=127.0.0.1", "--port="+strconv.Itoa(port),
		"--pd-threshold=0", "--drain-settle", settle.String())
	l := startLoad(rurl)
	time.Sleep(holdLoad)

	// Scale out: Pods created (Pending, not Ready: no room), then Ready.
	var report strings.Builder
	defer func() { t.Log("\n=== SCALE BY THE KUBERNETES API 1P1D -> 2P2D -> 1P1D\n" + report.String()) }()
	for _, w := range workers[2:] {
		if _, err := env.CreatePod(ctx, pod(w)); err != nil {
			t.Fatalf("create %s: %v", w.name, err)
		}
	}
	time.Sleep(time.Second)
	for _, w := range workers[2:] {
		if n := roomsOn(w.p.url); n != 0 {
			t.Errorf("%s took part in %g rooms while its Pod was not Ready", w.name, n)
		}
	}
	readyAt := map[string]time.Time{}
	for _, w := range workers[2:] {
		readyAt[w.name] = ready(w)
	}
	for _, w := range workers[2:] {
		for roomsOn(w.p.url) == 0 {
			if time.Since(readyAt[w.name]) > stepTimeout {
				t.Fatalf("%s took no room within %s of its Pod turning Ready", w.name, stepTimeout)
			}
			time.Sleep(poll)
		}
		took := time.Since(readyAt[w.name])
		fmt.Fprintf(&report, "%s: Pod Ready -> first room %s\n", w.name, took.Round(time.Millisecond))
		if took > joinMax {
			t.Errorf("%s took its first room %s after its Pod turned Ready, want within %s", w.name, took.Round(time.Millisecond), joinMax)
		}
	}
	time.Sleep(holdLoad)

	// Scale in. prefill-1's Pod terminates with a grace period, as a
	// scale-in does: the router must take it out of rotation at once (not
	// Ready: reason terminating) while its legs finish; then the test does
	// what the kubelet does, SIGTERM to the worker (it drains and exits 0),
	// then deletes the Pod, and the router must drop it. decode-1's Pod is
	// deleted at once: the router must drop it once its legs ended. Neither
	// may take a room after that.
	removedAt := time.Now()
	if _, err := env.TerminatePod(ctx, ns, "prefill-1", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := env.DeletePod(ctx, ns, "decode-1"); err != nil {
		t.Fatal(err)
	}
	p1, d1 := workers[2], workers[3]
	// waitRouter polls the router's /metrics until cond holds.
	waitRouter := func(what string, since time.Time, cond func() bool) time.Duration {
		t.Helper()
		for !cond() {
			if time.Since(since) > stepTimeout {
				t.Fatalf("the router: %s not within %s", what, stepTimeout)
			}
			time.Sleep(poll)
		}
		return time.Since(since)
	}
	listed := func(w *worker) bool {
		_, ok, err := metric(rurl, "tandem_router_worker_healthy", `worker="`+w.p.url+`"`)
		return err != nil || ok
	}
	inflight := func(w *worker) float64 {
		n, _, err := metric(rurl, "tandem_router_worker_inflight", `worker="`+w.p.url+`"`)
		if err != nil {
			return -1
		}
		return n
	}
	took := waitRouter("decode-1 dropped after its Pod was deleted", removedAt, func() bool { return !listed(d1) })
	fmt.Fprintf(&report, "%s: Pod deleted -> dropped by the router (its legs ended) %s\n", d1.name, took.Round(time.Millisecond))
	took = waitRouter("prefill-1 out of rotation after its Pod turned terminating", removedAt, func() bool {
		n, _, err := metric(rurl, "tandem_router_membership_changes_total", `change="unready",role="prefill"`)
		return err == nil && n >= 1
	})
	took2 := waitRouter("prefill-1's legs ended", removedAt, func() bool { return inflight(p1) == 0 })
	fmt.Fprintf(&report, "%s: Pod terminating -> out of rotation %s, its legs ended %s\n", p1.name,
		took.Round(time.Millisecond), took2.Round(time.Millisecond))
	rooms := map[string]float64{p1.name: roomsOn(p1.p.url), d1.name: roomsOn(d1.p.url)}
	time.Sleep(holdLoad)
	for _, w := range workers[2:] {
		if n := roomsOn(w.p.url); n != rooms[w.name] {
			t.Errorf("%s took %g more rooms after the router took it out", w.name, n-rooms[w.name])
		}
		if n, ok, err := metric(w.p.url, "tandem_kv_pages_used", ""); err != nil || !ok || n != 0 {
			t.Errorf("%s: %g KV pages in use after it drained (found %v, err %v)", w.name, n, ok, err)
		}
	}
	// What the kubelet does: SIGTERM to the terminating Pod's container,
	// then, once it exited, the Pod deleted.
	for _, w := range workers[2:] {
		stopAt := time.Now()
		w.p.stop()
		fmt.Fprintf(&report, "%s: SIGTERM -> exit %s (drain settle %s)\n", w.name, time.Since(stopAt).Round(time.Millisecond), settle)
		if w.p.err != nil {
			t.Errorf("%s: exit %v after SIGTERM, want 0", w.name, w.p.err)
		}
	}
	deletedAt := time.Now()
	if err := env.DeletePod(ctx, ns, p1.name); err != nil {
		t.Fatal(err)
	}
	took = waitRouter("prefill-1 dropped after its Pod was deleted", deletedAt, func() bool { return !listed(p1) })
	fmt.Fprintf(&report, "%s: Pod deleted -> dropped by the router %s\n", p1.name, took.Round(time.Millisecond))
	time.Sleep(holdLoad)
	l.finish()

	// Every page back on the workers still serving.
	for _, w := range workers[:2] {
		deadline := time.Now().Add(stepTimeout)
		for {
			n, ok, err := metric(w.p.url, "tandem_kv_pages_used", "")
			if err == nil && ok && n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s: %g KV pages still in use after the load (err %v)", w.name, n, err)
				break
			}
			time.Sleep(poll)
		}
	}
	l.mu.Lock()
	for i, f := range l.failures {
		if i == 10 {
			break
		}
		t.Errorf("request failed: %s", f)
	}
	l.mu.Unlock()
	fmt.Fprintf(&report, "requests: %d sent at %d/s, %d failed\n", l.sent.Load(), loadRate, l.failed.Load())
}
