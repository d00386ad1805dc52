//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"tandem/internal/cluster"
)

// The multi-host test's topology: four network namespaces made by the test.
// "hub" holds a bridge (br0); the router (rt), the prefill worker (pf) and
// the decode worker (dc) each have an eth0 on it, on 198.18.0.0/24, which
// carries HTTP (router to workers, and the test's own requests, which are
// dialled from inside rt). A second, direct veth pair (tx0 in pf and in dc,
// 198.18.1.0/24) carries only the KV transfer traffic: both workers
// advertise their transfer address on it. Setting pf's tx0 down therefore
// partitions prefill from decode and nothing else. Every address is in
// 198.18.0.0/15, the block reserved for network benchmark tests, and lives
// only inside the namespaces; nothing is added to the test's own namespace.
const (
	nsHubAddr    = "198.18.0.0/24"
	nsRouterIP   = "198.18.0.1"
	nsPrefillIP  = "198.18.0.2"
	nsDecodeIP   = "198.18.0.3"
	nsPrefillTx  = "198.18.1.2" // prefill's transfer address
	nsDecodeTx   = "198.18.1.3" // decode's transfer address
	nsHTTPPort   = "8000"       // every process, each in its own namespace
	nsTxPort     = "9000"       // both workers' transfer listeners
	nsCutLink    = "tx0"        // in pf: the prefill<->decode link
	nsBridgeName = "br0"
)

// The test's size and limits.
const (
	nsPartitions     = 3                      // link cuts
	nsPartitionFor   = 3 * time.Second        // how long each cut lasts
	nsHeartbeat      = 250 * time.Millisecond // workers' --heartbeat: a peer is lost after 2x this
	nsDialTimeout    = 5 * time.Second        // transfer's default DialTimeout (dial + handshake)
	nsClients        = 4                      // concurrent load clients
	nsMaxTokens      = 48                     // per request
	nsRequestTimeout = 30 * time.Second       // client limit per request
	nsStartTimeout   = time.Minute            // a process's /health
	nsSettleTimeout  = 30 * time.Second       // rooms terminal and pages back after a drain
	nsPoll           = 100 * time.Millisecond // between condition polls
	nsStopTimeout    = 10 * time.Second       // SIGTERM to exit, then SIGKILL
	nsCmdTimeout     = 10 * time.Second       // one `ip` command
	// nsRecoverBound is how soon after the link comes back a request must
	// succeed: a peer lost in the cut is forgotten within the peer timeout
	// (2 heartbeats), a request caught by the heal waits at most one
	// transfer dial, and a fresh request then needs a few seconds on a
	// loaded 2-core machine.
	nsRecoverBound = 2*(2*nsHeartbeat) + nsDialTimeout + 10*time.Second
)

// nsSeq makes namespace names unique within one test process (-count=N).
var nsSeq atomic.Int32

// netns is the test's set of namespaces.
type netns struct {
	prefix string // e.g. "tdm1234x1"; namespaces are prefix-hub, prefix-rt, ...
}

func (n *netns) name(role string) string { return n.prefix + "-" + role }

// ip runs `ip args...` and returns its combined output on error.
func ip(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), nsCmdTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// makeNetns builds the topology, skipping the test when this machine
// cannot (not root, no ip command, no namespace or veth support). Every
// namespace is deleted when the test ends, which also deletes the veths
// and the bridge inside them.
func makeNetns(t *testing.T) *netns {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("netns: needs root to create network namespaces; run the e2e tests as root (CI does)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skipf("netns: the ip command (iproute2) is not installed: %v", err)
	}
	n := &netns{prefix: fmt.Sprintf("tdm%dx%d", os.Getpid(), nsSeq.Add(1))}
	for _, role := range []string{"hub", "rt", "pf", "dc"} {
		ns := n.name(role)
		if err := ip("netns", "add", ns); err != nil {
			t.Skipf("netns: cannot create a network namespace here: %v", err)
		}
		t.Cleanup(func() {
			if err := ip("netns", "del", ns); err != nil {
				t.Errorf("netns cleanup: %v", err)
			}
		})
	}
	hub := n.name("hub")
	steps := [][]string{
		{"-n", hub, "link", "add", nsBridgeName, "type", "bridge"},
		{"-n", hub, "link", "set", nsBridgeName, "up"},
	}
	for role, addr := range map[string]string{"rt": nsRouterIP, "pf": nsPrefillIP, "dc": nsDecodeIP} {
		ns, port := n.name(role), "v-"+role
		steps = append(steps,
			[]string{"-n", ns, "link", "set", "lo", "up"},
			[]string{"-n", hub, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{"-n", hub, "link", "set", port, "master", nsBridgeName, "up"},
			[]string{"-n", ns, "addr", "add", addr + "/24", "dev", "eth0"},
			[]string{"-n", ns, "link", "set", "eth0", "up"})
	}
	steps = append(steps,
		[]string{"-n", n.name("pf"), "link", "add", nsCutLink, "type", "veth", "peer", "name", nsCutLink, "netns", n.name("dc")},
		[]string{"-n", n.name("pf"), "addr", "add", nsPrefillTx + "/24", "dev", nsCutLink},
		[]string{"-n", n.name("dc"), "addr", "add", nsDecodeTx + "/24", "dev", nsCutLink},
		[]string{"-n", n.name("pf"), "link", "set", nsCutLink, "up"},
		[]string{"-n", n.name("dc"), "link", "set", nsCutLink, "up"})
	for _, s := range steps {
		if err := ip(s...); err != nil {
			t.Skipf("netns: cannot build the test topology (%s in the hub): %v", nsHubAddr, err)
		}
	}
	return n
}

// setLink sets the prefill namespace's transfer link up or down.
func (n *netns) setLink(t *testing.T, up bool) {
	t.Helper()
	state := "down"
	if up {
		state = "up"
	}
	if err := ip("-n", n.name("pf"), "link", "set", nsCutLink, state); err != nil {
		t.Fatal(err)
	}
}

// dialer returns a DialContext that makes its sockets inside namespace ns:
// a goroutine locks itself to a thread, moves the thread into ns, dials and
// exits without unlocking, so the runtime throws the thread away rather
// than reuse one that is in another namespace. A socket stays in the
// namespace it was made in, whatever thread uses it later.
func (n *netns) dialer(role string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	path := "/var/run/netns/" + n.name(role)
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		type result struct {
			c   net.Conn
			err error
		}
		ch := make(chan result, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: see above
			f, err := os.Open(path)
			if err != nil {
				ch <- result{nil, fmt.Errorf("open namespace %s: %w", path, err)}
				return
			}
			defer f.Close()
			if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
				ch <- result{nil, fmt.Errorf("setns %s: %w", path, err)}
				return
			}
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			ch <- result{c, err}
		}()
		r := <-ch
		return r.c, r.err
	}
}

// nsProc is one tandem process started inside a namespace.
type nsProc struct {
	name string
	url  string
	out  *lockedBuffer
	done chan struct{}
	err  error // set before done is closed
}

// startInNetns runs `ip netns exec NS tandem args...` (ip execs tandem, so
// the child is tandem itself) with the cluster token in its environment,
// and stops it when the test ends.
func startInNetns(t *testing.T, n *netns, role, name, url, token string, args ...string) *nsProc {
	t.Helper()
	p := &nsProc{name: name, url: url, out: &lockedBuffer{}, done: make(chan struct{})}
	cmd := exec.Command("ip", append([]string{"netns", "exec", n.name(role), binPath}, args...)...)
	cmd.Env = append(os.Environ(), "TANDEM_CLUSTER_TOKEN="+token)
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
			t.Errorf("%s exited before the test ended: %v", name, p.err)
		default:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(nsStopTimeout):
				t.Errorf("%s did not exit within %v of SIGTERM; killing it", name, nsStopTimeout)
				_ = cmd.Process.Kill()
				<-p.done
			}
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, p.out.String())
		}
	})
	return p
}

// waitHealthy waits until p's /health answers 200.
func waitHealthy(t *testing.T, c *http.Client, p *nsProc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), nsStartTimeout)
	defer cancel()
	if err := cluster.WaitReady(ctx, c, p.url, p.done); errors.Is(err, cluster.ErrExited) {
		t.Fatalf("%s exited while starting: %v\n%s", p.name, p.err, p.out.String())
	} else if err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
}

// nsOutcome is how one request ended: "ok", or the HTTP status and the
// OpenAI error code/type, or the transport error.
func nsOutcome(status int, body []byte, stream bool, err error) string {
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return "client timeout"
		}
		return "transport error: " + err.Error()
	}
	if status == http.StatusOK {
		if !stream {
			var d struct {
				Choices []struct {
					Text string `json:"text"`
				} `json:"choices"`
			}
			if json.Unmarshal(body, &d) != nil || len(d.Choices) != 1 {
				return "200 with a malformed body"
			}
			return "ok"
		}
		done, errEvent := false, ""
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, 1<<22)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			if line == "[DONE]" {
				done = true
				continue
			}
			if strings.Contains(line, `"error"`) {
				errEvent = errorCode(line)
			}
		}
		switch {
		case errEvent != "":
			return "200 stream error event: " + errEvent
		case !done:
			return "200 stream without [DONE]"
		}
		return "ok"
	}
	return fmt.Sprintf("%d %s", status, errorCode(string(body)))
}

// errorCode returns an OpenAI error document's code, or its type.
func errorCode(doc string) string {
	var e struct {
		Error struct {
			Type string  `json:"type"`
			Code *string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(doc), &e) != nil {
		return "unparsed error body"
	}
	if e.Error.Code != nil && *e.Error.Code != "" {
		return *e.Error.Code
	}
	return e.Error.Type
}

// nsLoad sends completions from nsClients goroutines while it runs.
type nsLoad struct {
	c      *http.Client
	url    string
	mu     sync.Mutex
	counts map[string]int // outcome -> requests
	sent   int
	// okAfter is closed by the first request that started at or after
	// watchFrom and succeeded.
	watchFrom time.Time
	okAfter   chan time.Time
	inflight  atomic.Int32
}

func (l *nsLoad) one(ctx context.Context, i int) {
	stream := i%2 == 1
	body, _ := json.Marshal(map[string]any{"prompt": fmt.Sprintf("Once upon a time, request %d went", i),
		"max_tokens": nsMaxTokens, "temperature": 0, "ignore_eos": true, "stream": stream})
	start := time.Now()
	l.inflight.Add(1)
	defer l.inflight.Add(-1)
	var status int
	var b []byte
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.url+"/v1/completions", bytes.NewReader(body))
	if err == nil {
		req.Header.Set("Content-Type", "application/json")
		var resp *http.Response
		if resp, err = l.c.Do(req); err == nil {
			status = resp.StatusCode
			b, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
	}
	o := nsOutcome(status, b, stream, err)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent++
	l.counts[o]++
	if o == "ok" && l.okAfter != nil && !start.Before(l.watchFrom) {
		l.okAfter <- time.Now()
		l.okAfter = nil
	}
}

// run sends requests from nsClients goroutines until stop is closed, then
// waits for those in flight.
func (l *nsLoad) run(stop <-chan struct{}, seq *atomic.Int64) {
	var wg sync.WaitGroup
	for range nsClients {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), nsRequestTimeout)
				l.one(ctx, int(seq.Add(1)))
				cancel()
			}
		})
	}
	wg.Wait()
}

// watch returns a channel that gets the time of the first success of a
// request started from now on.
func (l *nsLoad) watch() <-chan time.Time {
	ch := make(chan time.Time, 1)
	l.mu.Lock()
	l.watchFrom, l.okAfter = time.Now(), ch
	l.mu.Unlock()
	return ch
}

// TestNetnsPartition runs the router, a prefill and a decode worker each in
// its own network namespace (so each has its own address, as on three
// hosts; workers bind 0.0.0.0 and advertise their transfer address), sends
// completions, then under load cuts the prefill<->decode link nsPartitions
// times for nsPartitionFor each. After every heal a request must succeed
// within nsRecoverBound; then, with the load drained, every room on every
// process must be terminal and every worker's KV pages free. It logs the
// requests by outcome, the rooms failed by reason and the recovery times.
func TestNetnsPartition(t *testing.T) {
	skipShort(t)
	n := makeNetns(t) // skips where namespaces cannot be made, before the build
	setup(t)
	token := e2eClusterToken
	client := &http.Client{Transport: &http.Transport{DialContext: n.dialer("rt"), MaxIdleConnsPerHost: 2 * nsClients}}
	t.Cleanup(client.CloseIdleConnections)
	workerArgs := func(role, txIP string) []string {
		return []string{role, "--model", modelPath, "--host", "0.0.0.0", "--port", nsHTTPPort,
			"--transfer-host", "0.0.0.0", "--transfer-port", nsTxPort, "--transfer-advertise", net.JoinHostPort(txIP, nsTxPort),
			"--threads", "1", "--prefix-cache=false", "--heartbeat", nsHeartbeat.String()}
	}
	url := func(ip string) string { return "http://" + net.JoinHostPort(ip, nsHTTPPort) }
	pf := startInNetns(t, n, "pf", "prefill", url(nsPrefillIP), token, workerArgs("prefill", nsPrefillTx)...)
	dc := startInNetns(t, n, "dc", "decode", url(nsDecodeIP), token, workerArgs("decode", nsDecodeTx)...)
	waitHealthy(t, client, pf)
	waitHealthy(t, client, dc)
	rt := startInNetns(t, n, "rt", "router", url(nsRouterIP), token, "route", "--host", nsRouterIP, "--port", nsHTTPPort,
		"--prefill", pf.url, "--decode", dc.url,
		"--pd-threshold", "0") // every request through the prefill worker and the cut link, short prompts too
	waitHealthy(t, client, rt)
	workers := []*nsProc{pf, dc}

	load := &nsLoad{c: client, url: rt.url, counts: map[string]int{}}
	var seq atomic.Int64
	for i := range 4 { // the cluster works before anything is cut
		ctx, cancel := context.WithTimeout(context.Background(), nsRequestTimeout)
		load.one(ctx, int(seq.Add(1)))
		cancel()
		if load.counts["ok"] != i+1 {
			t.Fatalf("before any partition, request %d failed: %v", i, load.counts)
		}
	}

	// settle waits until every room on every process is terminal and every
	// worker's KV pages are back, with no load running.
	settle := func(when string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), nsSettleTimeout)
		defer cancel()
		var last error
		for {
			if last = quiet(ctx, client, rt, workers); last == nil {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s: the cluster did not settle within %v: %v", when, nsSettleTimeout, last)
			case <-time.After(nsPoll):
			}
		}
	}
	settle("before the partitions")

	var recoveries []time.Duration
	for i := range nsPartitions {
		stop := make(chan struct{})
		loadDone := make(chan struct{})
		go func() {
			load.run(stop, &seq)
			close(loadDone)
		}()
		waitFor(t, "requests in flight before the cut", func() bool { return load.inflight.Load() > 0 })
		n.setLink(t, false)
		time.Sleep(nsPartitionFor) // the fault's duration, not a wait for an outcome
		n.setLink(t, true)
		healed := time.Now()
		okCh := load.watch()
		select {
		case at := <-okCh:
			recoveries = append(recoveries, at.Sub(healed))
		case <-time.After(nsRecoverBound):
			close(stop)
			<-loadDone
			t.Fatalf("partition %d: no request started after the heal succeeded within %v; outcomes so far %v", i+1, nsRecoverBound, load.counts)
		}
		close(stop)
		<-loadDone
		settle(fmt.Sprintf("after partition %d", i+1))
	}
	// The end: a last round of requests all succeed.
	before := load.counts["ok"]
	for range 4 {
		ctx, cancel := context.WithTimeout(context.Background(), nsRequestTimeout)
		load.one(ctx, int(seq.Add(1)))
		cancel()
	}
	if got := load.counts["ok"] - before; got != 4 {
		t.Errorf("after the last heal, %d of 4 requests succeeded; outcomes %v", got, load.counts)
	}
	settle("at the end")

	// Figures.
	t.Logf("partitions applied: %d x %v on prefill's %s (prefill<->decode transfer link only)", nsPartitions, nsPartitionFor, nsCutLink)
	t.Logf("requests sent: %d", load.sent)
	keys := make([]string, 0, len(load.counts))
	for k := range load.counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("  %-40s %d", k, load.counts[k])
	}
	t.Logf("time from heal to the first success of a request started after it: %v (bound %v)", recoveries, nsRecoverBound)
	for _, w := range workers {
		ps, err := fetchMetrics(context.Background(), client, w.url)
		if err != nil {
			t.Errorf("%s metrics: %v", w.name, err)
			continue
		}
		ok := first(ps.value("tandem_pd_room_successes_total"))
		t.Logf("%s rooms: succeeded %v, failed by reason %v", w.name, ok, ps.byLabel("tandem_pd_room_failures_total", "reason"))
		if ok == 0 {
			t.Errorf("%s: no room succeeded, so no request crossed the transfer link this test cuts", w.name)
		}
	}
	if load.counts["ok"] == load.sent {
		t.Logf("note: no request failed; the cuts landed between transfers")
	}
}

func first(v float64, _ bool) float64 { return v }

// quiet returns nil when every room in the router's and every worker's
// /debug/rooms is terminal and every worker has no KV page in use and no
// sequence queued or running; otherwise what is still held.
func quiet(ctx context.Context, c *http.Client, rt *nsProc, workers []*nsProc) error {
	var held []string
	for _, p := range append([]*nsProc{rt}, workers...) {
		tab, err := roomTable(ctx, c, p.url)
		if err != nil {
			return err
		}
		for _, r := range tab.Rooms {
			if !r.Terminal() {
				held = append(held, fmt.Sprintf("%s room %s %s/%s", p.name, r.ID, r.State, r.Phase))
			}
		}
	}
	for _, w := range workers {
		ps, err := fetchMetrics(ctx, c, w.url)
		if err != nil {
			return err
		}
		g, err := gaugesOf(ps)
		if err != nil {
			return fmt.Errorf("%s: %w", w.name, err)
		}
		if !g.quiet() {
			held = append(held, fmt.Sprintf("%s pages %v running %v waiting %v queues %v", w.name, g.pagesUsed, g.running, g.waiting, g.queues))
		}
	}
	if len(held) > 0 {
		return fmt.Errorf("still held: %s", strings.Join(held, "; "))
	}
	return nil
}
