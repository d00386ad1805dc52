package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"tandem/internal/engine/cores"
)

// fakeEnv, when set in the environment, makes the test binary act as a
// tandem child (see fakeChild) instead of running the tests.
const fakeEnv = "TANDEM_CLUSTER_TEST_FAKE_CHILD"

// fakeFailEnv makes a fake child exit 4 at once.
const fakeFailEnv = "TANDEM_CLUSTER_TEST_FAKE_FAIL"

// fakeSettleEnv makes a fake child on SIGTERM wait for a second SIGTERM
// (or 30 s) before it exits 0, as a real one waits out its settle window.
const fakeSettleEnv = "TANDEM_CLUSTER_TEST_FAKE_SETTLE"

// fakeParentEnv makes the test binary start a cluster of fake children,
// print their PIDs on stdout, one per line, then "ready", and wait to be
// killed (TestParentDeathStopsChildren).
const fakeParentEnv = "TANDEM_CLUSTER_TEST_FAKE_PARENT"

func TestMain(m *testing.M) {
	if os.Getenv(fakeParentEnv) != "" {
		os.Exit(fakeParent())
	}
	if os.Getenv(fakeEnv) != "" {
		os.Exit(fakeChild(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func fakeParent() int {
	os.Setenv(fakeEnv, "1")
	os.Unsetenv(fakeParentEnv)
	bin, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c, err := Start(context.Background(), Options{Binary: bin, Model: "unused.gguf", Prefill: 1, Decode: 1, Supervise: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, p := range c.Procs() {
		p.mu.Lock()
		fmt.Println(p.cmd.Process.Pid)
		p.mu.Unlock()
	}
	fmt.Println("ready")
	select {}
}

// fakeChild stands in for `tandem prefill|decode|route`: it reads --host
// and --port (and a router's --listen-fd and --name), logs a few lines
// (slog JSON on stderr, a plain line and an empty JSON object on stdout),
// answers GET /health, /ready and /whoami (its --name) on its port and
// the shared socket, exits 3 on GET /exit and exits 0 on SIGTERM.
func fakeChild(args []string) int {
	if os.Getenv(fakeFailEnv) != "" {
		fmt.Fprintln(os.Stderr, "fake child: failing at start on purpose")
		return 4
	}
	var host, port, lease, slot, listenFD, name string
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--listen-fd":
			listenFD = args[i+1]
		case "--name":
			name = args[i+1]
		case "--host":
			host = args[i+1]
		case "--port":
			port = args[i+1]
		case "--core-lease":
			lease = args[i+1]
		case "--core-lease-slot":
			slot = args[i+1]
		}
	}
	if lease != "" { // what a worker does with it: map the region, take its slot
		r, err := cores.Open(lease)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fake child:", err)
			return 5
		}
		n, _ := strconv.Atoi(slot)
		l, err := r.Lease(n, cores.Options{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "fake child:", err)
			return 5
		}
		defer l.Close()
		fmt.Printf("core lease: slot %d of %d, %d cores\n", l.Slot(), r.Slots(), r.Cores())
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake child:", err)
		return 2
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	log.Info("listening", "addr", ln.Addr().String(), "role", args[0], "token_set", os.Getenv("TANDEM_CLUSTER_TOKEN") != "")
	fmt.Println("a plain line, not JSON")
	fmt.Println("{}")
	fmt.Println("[1, 2]")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("GET /whoami", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, name) })
	exit := make(chan int, 1)
	mux.HandleFunc("GET /exit", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush() // the answer goes out before the process exits
		exit <- 3
	})
	go func() { _ = http.Serve(ln, mux) }()
	if listenFD != "" {
		fd, _ := strconv.Atoi(listenFD)
		shared, err := net.FileListener(os.NewFile(uintptr(fd), "shared"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "fake child: --listen-fd:", err)
			return 2
		}
		go func() { _ = http.Serve(shared, mux) }()
	}
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGTERM)
	select {
	case <-sig:
		log.Info("stopping")
		if os.Getenv(fakeSettleEnv) != "" {
			select {
			case <-sig:
			case <-time.After(30 * time.Second):
			}
		}
		return 0
	case code := <-exit:
		log.Error("exiting on request", "code", code)
		return code
	}
}

// syncBuffer is an io.Writer safe for the cluster's copiers and the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startFake starts a 1 prefill + 1 decode cluster of fake children.
func startFake(t *testing.T, o Options) *Cluster {
	t.Helper()
	t.Setenv(fakeEnv, "1")
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	o.Binary, o.Model, o.Prefill, o.Decode = bin, "unused.gguf", 1, 1
	if o.StopTimeout == 0 {
		o.StopTimeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// TestJSONLogFormat: with LogFormat "json" every line the cluster writes
// is a JSON object whose "proc" member names the child, whether the child
// wrote a JSON log line, an empty object, a JSON array or plain text.
func TestJSONLogFormat(t *testing.T) {
	var out syncBuffer
	c := startFake(t, Options{Output: &out, LogFormat: "json"})
	c.Stop()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	seen := map[string]map[string]int{} // proc -> msg -> count
	for i, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %d is not a JSON object: %v\n%s", i+1, err, l)
		}
		proc, ok := m["proc"].(string)
		if !ok {
			t.Fatalf("line %d has no string \"proc\" member: %s", i+1, l)
		}
		msg, _ := m["msg"].(string)
		if seen[proc] == nil {
			seen[proc] = map[string]int{}
		}
		seen[proc][msg]++
	}
	for _, p := range c.Procs() {
		for _, msg := range []string{"listening", "a plain line, not JSON", "[1, 2]", "", "stopping"} {
			if seen[p.Name][msg] != 1 {
				t.Errorf("%s: %d lines with msg %q, want 1 (all lines: %v)", p.Name, seen[p.Name][msg], msg, seen[p.Name])
			}
		}
	}
}

// TestTextLogFormat: the default format prefixes each line with [name].
func TestTextLogFormat(t *testing.T) {
	var out syncBuffer
	c := startFake(t, Options{Output: &out})
	c.Stop()
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	n := 0
	for sc.Scan() {
		n++
		ok := false
		for _, p := range c.Procs() {
			ok = ok || strings.HasPrefix(sc.Text(), "["+p.Name+"] ")
		}
		if !ok {
			t.Errorf("line %q has no [name] prefix", sc.Text())
		}
	}
	if n < 3*len(c.Procs()) {
		t.Errorf("%d lines, want at least %d:\n%s", n, 3*len(c.Procs()), out.String())
	}
}

// TestStartReportsEarlyExit: a child that exits before it is healthy
// makes Start fail at once, saying so, with nothing left running.
func TestStartReportsEarlyExit(t *testing.T) {
	t.Setenv(fakeEnv, "1")
	t.Setenv(fakeFailEnv, "1")
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var exits []Exit
	var mu sync.Mutex
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = Start(ctx, Options{Binary: bin, Model: "unused.gguf", Prefill: 1, Decode: 1,
		OnExit: func(e Exit) { mu.Lock(); exits = append(exits, e); mu.Unlock() }})
	if err == nil || !strings.Contains(err.Error(), "exited before it was ready") || !strings.Contains(err.Error(), "exit status 4") {
		t.Fatalf("Start = %v, want an error saying prefill-0 exited with status 4 before it was ready", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(exits) != 2 {
		t.Errorf("exits reported %+v, want both workers (the router never started)", exits)
	}
}

// TestWaitReadyTimesOut: with nothing listening, WaitReady returns
// when ctx ends, naming the last failure.
func TestWaitReadyTimesOut(t *testing.T) {
	port, err := FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = WaitReady(ctx, &http.Client{Timeout: time.Second}, fmt.Sprintf("http://127.0.0.1:%d", port), nil)
	if err == nil || errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "not ready") {
		t.Fatalf("WaitReady on a cancelled context = %v, want a not-ready error", err)
	}
}

func TestBadLogFormat(t *testing.T) {
	if _, err := Start(context.Background(), Options{Prefill: 1, Decode: 1, LogFormat: "xml"}); err == nil {
		t.Fatal("Start accepted log format xml")
	}
}

// TestOnExitSeesRestartedProcess: OnExit reports a Kill as requested, and
// a process started again by Restart that then exits on its own is seen,
// with its exit status, as not requested. Stop reports each child once.
func TestOnExitSeesRestartedProcess(t *testing.T) {
	exits := make(chan Exit, 16)
	c := startFake(t, Options{OnExit: func(e Exit) { exits <- e }})
	next := func() Exit {
		t.Helper()
		select {
		case e := <-exits:
			return e
		case <-time.After(time.Minute):
			t.Fatal("no exit reported within a minute")
			return Exit{}
		}
	}
	if err := c.Kill("decode-0"); err != nil {
		t.Fatal(err)
	}
	if e := next(); e.Name != "decode-0" || !e.Requested {
		t.Fatalf("after Kill: %+v, want decode-0 requested", e)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Restart(ctx, "decode-0"); err != nil {
		t.Fatal(err)
	}
	var url string
	for _, p := range c.Procs() {
		if p.Name == "decode-0" {
			url = p.URL
		}
	}
	// The child may exit before its answer is read (a reset): what is
	// checked is the exit it reports.
	if resp, err := http.Get(url + "/exit"); err == nil {
		resp.Body.Close()
	}
	e := next()
	if e.Name != "decode-0" || e.Requested || e.Err == nil || !strings.Contains(e.Err.Error(), "exit status 3") {
		t.Fatalf("restarted process exiting on its own: %+v, want decode-0, not requested, exit status 3", e)
	}
	c.Stop()
	got := map[string]bool{}
	for range len(c.Procs()) - 1 { // decode-0 is already down
		e := next()
		if !e.Requested {
			t.Errorf("Stop's exit of %s reported as not requested", e.Name)
		}
		got[e.Name] = true
	}
	if !got["prefill-0"] || !got["router"] {
		t.Errorf("Stop reported %v, want prefill-0 and router", got)
	}
	select {
	case e := <-exits:
		t.Errorf("extra exit reported: %+v", e)
	default:
	}
}

func TestJSONLine(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct{ in, want string }{
		{`{"level":"INFO","msg":"hi"}`, `{"proc":"p-0","level":"INFO","msg":"hi"}`},
		{` { } `, `{"proc":"p-0"}`},
		{`{"a":1`, `{"time":"2026-12-01T00:00:00Z","level":"WARN","msg":"{\"a\":1","proc":"p-0"}`},
		{`panic: boom`, `{"time":"2026-12-01T00:00:00Z","level":"WARN","msg":"panic: boom","proc":"p-0"}`},
		{``, `{"time":"2026-12-01T00:00:00Z","level":"WARN","msg":"","proc":"p-0"}`},
	} {
		if got := string(jsonLine("p-0", []byte(tc.in), now)); got != tc.want {
			t.Errorf("jsonLine(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestLendCoresPassesRegion: with LendCores every worker, and a restarted
// one again, gets the core lease region as fd 3 with its own slot, and the
// router gets none.
func TestLendCoresPassesRegion(t *testing.T) {
	var out syncBuffer
	c := startFake(t, Options{LendCores: true, Output: &out})
	if err := c.Kill("decode-0"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Restart(ctx, "decode-0"); err != nil {
		t.Fatal(err)
	}
	c.Stop() // every line copied
	n := min(runtime.NumCPU(), cores.MaxCores)
	got := out.String()
	if want := fmt.Sprintf("[prefill-0] core lease: slot 0 of 2, %d cores", n); strings.Count(got, want) != 1 {
		t.Errorf("output has %q %d times, want once:\n%s", want, strings.Count(got, want), got)
	}
	if want := fmt.Sprintf("[decode-0] core lease: slot 1 of 2, %d cores", n); strings.Count(got, want) != 2 {
		t.Errorf("output has %q %d times, want twice (start and restart):\n%s", want, strings.Count(got, want), got)
	}
	if strings.Contains(got, "[router] core lease") {
		t.Errorf("the router got the core lease:\n%s", got)
	}
}

// TestFreePortsDistinct: the ports Start gives its workers are distinct
// (each listener is held until all are picked; closing each at once let
// the kernel hand one port to two workers).
func TestFreePortsDistinct(t *testing.T) {
	ports, err := FreePorts("127.0.0.1", 64)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d given twice in %v", p, ports)
		}
		seen[p] = true
	}
}

// TestRouterPort: a router port given is held while the workers start and
// then is the router's; one already taken is refused before anything
// starts, naming the port.
func TestRouterPort(t *testing.T) {
	port, err := FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	c := startFake(t, Options{Port: port})
	if want := "http://127.0.0.1:" + strconv.Itoa(port); c.RouterURL() != want {
		t.Errorf("router at %s, want %s", c.RouterURL(), want)
	}
	c.Stop()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := ln.Addr().(*net.TCPAddr).Port
	t.Setenv(fakeEnv, "1")
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var exits int
	_, err = Start(context.Background(), Options{Binary: bin, Model: "unused.gguf", Prefill: 1, Decode: 1, Port: busy,
		OnExit: func(Exit) { exits++ }})
	if err == nil || !strings.Contains(err.Error(), "router's port "+strconv.Itoa(busy)) {
		t.Errorf("Start on a taken router port = %v, want an error naming it", err)
	}
	if exits != 0 {
		t.Errorf("%d processes started and exited; want none started", exits)
	}
}

// TestSuperviseRestarts: with Supervise a child that exits on its own is
// started again on the same address after its backoff, reported through
// OnRestart (started, then healthy) and counted; a second quick exit
// doubles the backoff; Stop ends supervision, and a child that Stop ends
// is not restarted.
func TestSuperviseRestarts(t *testing.T) {
	type ev struct {
		name    string
		n       int
		healthy bool
	}
	evs := make(chan ev, 16)
	c := startFake(t, Options{Supervise: true, RestartBackoff: 20 * time.Millisecond,
		OnRestart: func(name string, n int, healthy bool) { evs <- ev{name, n, healthy} }})
	var dec *Proc
	for _, p := range c.Procs() {
		if p.Name == "decode-0" {
			dec = p
		}
	}
	next := func() ev {
		t.Helper()
		select {
		case e := <-evs:
			return e
		case <-time.After(time.Minute):
			t.Fatal("no restart reported within a minute")
			return ev{}
		}
	}
	for round := 1; round <= 2; round++ {
		if resp, err := http.Get(dec.URL + "/exit"); err == nil {
			resp.Body.Close()
		}
		if e := next(); e != (ev{"decode-0", round, false}) {
			t.Fatalf("round %d: first report %+v, want decode-0 restart %d started", round, e, round)
		}
		if e := next(); e != (ev{"decode-0", round, true}) {
			t.Fatalf("round %d: second report %+v, want decode-0 restart %d healthy", round, e, round)
		}
		resp, err := http.Get(dec.URL + "/health")
		if err != nil {
			t.Fatalf("round %d: the restarted child does not answer on its address: %v", round, err)
		}
		resp.Body.Close()
	}
	if n := dec.Restarts(); n != 2 {
		t.Errorf("Restarts() = %d, want 2", n)
	}
	dec.mu.Lock()
	backoff := dec.backoff
	dec.mu.Unlock()
	if backoff != 40*time.Millisecond {
		t.Errorf("backoff after two quick exits = %v, want it doubled to 40ms", backoff)
	}
	c.Stop()
	select {
	case e := <-evs:
		t.Errorf("a restart after Stop: %+v", e)
	case <-time.After(200 * time.Millisecond): // ten backoffs: a restart would have come
	}
	for _, p := range c.Procs() {
		select {
		case <-p.exited:
		default:
			t.Errorf("%s still running after Stop", p.Name)
		}
	}
}

// TestChildrenHaveOwnProcessGroup: a Ctrl-C in the terminal (SIGINT to
// the foreground process group) must reach only the parent, which stops
// the children in order: each child leads a process group of its own.
func TestChildrenHaveOwnProcessGroup(t *testing.T) {
	c := startFake(t, Options{})
	for _, p := range c.Procs() {
		p.mu.Lock()
		pid := p.cmd.Process.Pid
		p.mu.Unlock()
		pgid, err := syscall.Getpgid(pid)
		if err != nil {
			t.Fatal(err)
		}
		if pgid != pid || pgid == syscall.Getpgrp() {
			t.Errorf("%s (pid %d) is in process group %d, want its own", p.Name, pid, pgid)
		}
	}
}
