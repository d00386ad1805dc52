package cluster

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"tandem/internal/api/drain"
	"tandem/internal/engine/cores"
)

// Limits.
const (
	workersMax    = 64
	routersMax    = 16
	healthTimeout = 3 * time.Minute
	// stopMargin is added to a child's settle window and drain timeout
	// for StopTimeout's default.
	stopMargin = 10 * time.Second
	// hurryInterval is how often a stop of the whole cluster repeats
	// SIGTERM: the second signal a child sees ends its settle window.
	hurryInterval = 100 * time.Millisecond
)

// Options configures a cluster.
type Options struct {
	Binary     string   // the tandem executable
	Model      string   // GGUF path every worker loads
	Prefill    int      // prefill workers (>= 1)
	Decode     int      // decode workers (>= 1)
	Routers    int      // routers, all accepting on the router port (default 1)
	Host       string   // address everything binds (default 127.0.0.1)
	Port       int      // router port (0: any free port)
	WorkerArgs []string // extra flags for every worker (e.g. --threads 1)
	RouterArgs []string // extra flags for the router
	// RouterDiscovery, when set, is every router's --discovery (k8s,
	// dns:NAME[:PORT], file:PATH) instead of the --prefill and --decode
	// lists of the workers started here. BeforeRouters, when set, is
	// called once the workers answer /ready and before the routers start
	// (to write the endpoint file, for example); an error stops the
	// cluster.
	RouterDiscovery string
	BeforeRouters   func(workers []*Proc) error
	Token           string // cluster token (default: 32 random bytes, hex)
	Output          io.Writer
	// LogFormat is how children's output lines are written to Output:
	// "text" (default) prefixes each line with "[name] "; "json" adds a
	// "proc" member naming the child to each line that is a JSON object,
	// and wraps any other line in one ({"time","level","msg","proc"}), so
	// every line written is a JSON object.
	LogFormat string
	Logger    *slog.Logger
	// DrainSettle and DrainTimeout, when set, are every child's
	// --drain-settle and --drain-timeout (0: the children's defaults, 5 s
	// and 60 s; see internal/api/drain).
	DrainSettle, DrainTimeout time.Duration
	// StopTimeout is how long a child gets after SIGTERM before SIGKILL;
	// default: its settle window and drain timeout plus 10 s, so that a
	// drain is never cut.
	StopTimeout time.Duration
	// LendCores makes the workers share this host's cores by priority
	// through a core lease (internal/engine/cores): Start creates the
	// shared region for runtime.NumCPU() cores and passes it to every
	// worker (--core-lease fd:3 --core-lease-slot i). At most
	// cores.MaxSlots workers; with more, Start fails.
	LendCores bool
	// OnExit, when set, is called once for every exit of every child,
	// including a child started again by Restart or by supervision, from
	// the goroutine that waited for it. It must not block for long: Stop
	// waits for it.
	OnExit func(Exit)
	// Supervise restarts a child that exits on its own (a crash, a kill
	// from elsewhere) with the same address and flags, after a backoff
	// that starts at RestartBackoff (default 500ms), doubles with each
	// exit up to RestartBackoffMax (default 30s), and starts over once a
	// run has lasted StableAfter (default 1 minute). Exits that Stop or
	// Kill asked for are never restarted.
	Supervise         bool
	RestartBackoff    time.Duration
	RestartBackoffMax time.Duration
	StableAfter       time.Duration
	// OnRestart, when set, is called when supervision starts a child
	// again (n: its restarts so far, this one included) and once the
	// restarted child answers /ready (healthy true); same rules as OnExit.
	OnRestart func(name string, n int, healthy bool)
}

// Exit describes one exit of a child process.
type Exit struct {
	Name string // the process's name, e.g. "decode-0"
	Err  error  // what exec.Cmd.Wait returned: nil for a clean exit
	// Requested is true when Stop or Kill asked for the exit, false when
	// the process exited on its own (a crash, or a signal from elsewhere).
	Requested bool
}

// Proc is one child process.
type Proc struct {
	Name      string // "prefill-0", "decode-1", "router"
	Role      string // "prefill", "decode", "router"
	URL       string // http://host:port
	args      []string
	mu        sync.Mutex
	cmd       *exec.Cmd
	exited    chan struct{}
	exitErr   error
	requested bool // Stop or Kill signalled the current run
	started   time.Time
	restarts  int           // starts by supervision
	backoff   time.Duration // the delay before the next restart by supervision
}

// Restarts returns how many times supervision has started p again.
func (p *Proc) Restarts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restarts
}

// Cluster is a running deployment.
type Cluster struct {
	o         Options
	region    *cores.Region // the core lease region (LendCores), else nil
	shared    *os.File      // the routers' listening socket, passed to each as fd 3
	routerURL string        // its address
	procs     []*Proc
	env       []string
	wg        sync.WaitGroup
	outMu     sync.Mutex // serializes writes to o.Output from the copiers

	stopMu   sync.Mutex
	stopping bool          // Stop has begun: nothing is launched any more
	stopped  chan struct{} // closed when Stop begins; ends restart waits
}

// Start launches the workers, waits for them, then the routers, and returns
// once every process answers /ready. On error, what was started is stopped.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if o.Prefill < 1 || o.Decode < 1 || o.Prefill+o.Decode > workersMax {
		return nil, fmt.Errorf("cluster: want 1..%d workers with at least one prefill and one decode, got %d prefill and %d decode", workersMax, o.Prefill, o.Decode)
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	switch o.LogFormat {
	case "":
		o.LogFormat = "text"
	case "text", "json":
	default:
		return nil, fmt.Errorf("cluster: log format %q is not supported: use text or json", o.LogFormat)
	}
	if o.Output == nil {
		o.Output = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Routers == 0 {
		o.Routers = 1
	}
	if o.Routers < 1 || o.Routers > routersMax {
		return nil, fmt.Errorf("cluster: want 1..%d routers, got %d", routersMax, o.Routers)
	}
	if o.DrainSettle < 0 || o.DrainTimeout < 0 {
		return nil, fmt.Errorf("cluster: drain settle %s and timeout %s must not be negative", o.DrainSettle, o.DrainTimeout)
	}
	if o.StopTimeout == 0 {
		o.StopTimeout = cmp.Or(o.DrainSettle, drain.DefaultSettle) + cmp.Or(o.DrainTimeout, drain.DefaultTimeout) + stopMargin
	}
	if o.RestartBackoff <= 0 {
		o.RestartBackoff = 500 * time.Millisecond
	}
	if o.RestartBackoffMax < o.RestartBackoff {
		o.RestartBackoffMax = max(30*time.Second, o.RestartBackoff)
	}
	if o.StableAfter <= 0 {
		o.StableAfter = time.Minute
	}
	if o.Token == "" {
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("cluster: make token: %w", err)
		}
		o.Token = hex.EncodeToString(b[:])
	}
	c := &Cluster{o: o, env: append(os.Environ(), "TANDEM_CLUSTER_TOKEN="+o.Token), stopped: make(chan struct{})}
	// The routers' socket is opened first and held for the cluster's
	// life: no worker's ephemeral port (its transfer listener) can take
	// it, and connections wait in its queue while no router accepts (one
	// restarting) instead of being refused.
	shared, addr, err := listenShared(net.JoinHostPort(o.Host, strconv.Itoa(o.Port)))
	if err != nil {
		return nil, fmt.Errorf("cluster: the router's port %d: %w (choose another with --port)", o.Port, err)
	}
	c.shared, c.routerURL = shared, "http://"+addr.String()
	if o.LendCores {
		if o.Prefill+o.Decode > cores.MaxSlots {
			c.Stop()
			return nil, fmt.Errorf("cluster: core lending serves at most %d workers on one host, got %d: turn it off (--lend-cores=false)", cores.MaxSlots, o.Prefill+o.Decode)
		}
		r, err := cores.Create(min(runtime.NumCPU(), cores.MaxCores), o.Prefill+o.Decode)
		if err != nil {
			c.Stop()
			return nil, fmt.Errorf("cluster: %w (turn lending off with --lend-cores=false)", err)
		}
		c.region = r
	}
	var drainArgs []string
	if o.DrainSettle > 0 {
		drainArgs = append(drainArgs, "--drain-settle", o.DrainSettle.String())
	}
	if o.DrainTimeout > 0 {
		drainArgs = append(drainArgs, "--drain-timeout", o.DrainTimeout.String())
	}
	var prefills, decodes []string
	// The routers' own ports are held until the routers start: meanwhile
	// the workers bind ephemeral ports (their transfer listeners), which
	// could otherwise be given one of them.
	routerPorts, releaseRouterPorts, err := reservePorts(o.Host, o.Routers)
	defer releaseRouterPorts()
	if err != nil {
		c.Stop()
		return nil, err
	}
	ports, err := FreePorts(o.Host, o.Prefill+o.Decode)
	if err != nil {
		c.Stop()
		return nil, err
	}
	for i, port := range ports {
		role, idx := "prefill", i
		if i >= o.Prefill {
			role, idx = "decode", i-o.Prefill
		}
		p := &Proc{Name: fmt.Sprintf("%s-%d", role, idx), Role: role, URL: "http://" + net.JoinHostPort(o.Host, strconv.Itoa(port))}
		p.args = append([]string{role, "--model", o.Model, "--host", o.Host, "--port", strconv.Itoa(port), "--transfer-host", o.Host}, drainArgs...)
		p.args = append(p.args, o.WorkerArgs...)
		if c.region != nil {
			p.args = append(p.args, "--core-lease", "fd:3", "--core-lease-slot", strconv.Itoa(i))
		}
		c.procs = append(c.procs, p)
		if role == "prefill" {
			prefills = append(prefills, p.URL)
		} else {
			decodes = append(decodes, p.URL)
		}
	}
	workers := slices.Clone(c.procs)
	for _, p := range workers {
		if err := c.launch(p); err != nil {
			c.Stop()
			return nil, err
		}
	}
	if err := c.waitReady(ctx, workers); err != nil {
		c.Stop()
		return nil, err
	}
	if o.BeforeRouters != nil {
		if err := o.BeforeRouters(slices.Clone(workers)); err != nil {
			c.Stop()
			return nil, fmt.Errorf("cluster: before the routers: %w", err)
		}
	}
	// Each router accepts on the shared socket (fd 3) and on a port of its
	// own, where it is probed and inspected alone.
	var routers []*Proc
	releaseRouterPorts()
	for i, port := range routerPorts {
		name := "router"
		if o.Routers > 1 {
			name = fmt.Sprintf("router-%d", i)
		}
		r := &Proc{Name: name, Role: "router", URL: "http://" + net.JoinHostPort(o.Host, strconv.Itoa(port))}
		r.args = append([]string{"route", "--host", o.Host, "--port", strconv.Itoa(port), "--listen-fd", "3", "--name", name}, drainArgs...)
		if o.RouterDiscovery != "" {
			r.args = append(r.args, "--discovery", o.RouterDiscovery)
		} else {
			for _, u := range prefills {
				r.args = append(r.args, "--prefill", u)
			}
			for _, u := range decodes {
				r.args = append(r.args, "--decode", u)
			}
		}
		r.args = append(r.args, o.RouterArgs...)
		c.procs = append(c.procs, r)
		routers = append(routers, r)
		if err := c.launch(r); err != nil {
			c.Stop()
			return nil, err
		}
	}
	if err := c.waitReady(ctx, routers); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// FreePort asks the kernel for a free TCP port on host. Another process
// could take it before the caller binds it; a child then fails to start,
// and Start reports it.
func FreePort(host string) (int, error) {
	ports, err := FreePorts(host, 1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// FreePorts is FreePort for n distinct ports: it holds each port's
// listener until it has all n, since a port closed at once can be handed
// out again by the next request (two workers of one cluster were once
// given the same port).
func FreePorts(host string, n int) ([]int, error) {
	ports, release, err := reservePorts(host, n)
	release()
	return ports, err
}

// reservePorts finds n distinct free ports on host and holds them until
// release is called (release must be called, also after an error).
func reservePorts(host string, n int) (ports []int, release func(), err error) {
	var lns []net.Listener
	release = func() {
		for _, ln := range lns {
			ln.Close()
		}
		lns = nil
	}
	for range n {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, release, fmt.Errorf("cluster: find a free port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, release, nil
}

// RouterURL returns the base URL of the routers' shared port: whichever
// router accepts a connection serves it.
func (c *Cluster) RouterURL() string { return c.routerURL }

// Procs returns every process, workers first (prefill, then decode), the
// routers last. A router's URL is its own port; RouterURL is the one they
// share.
func (c *Cluster) Procs() []*Proc { return c.procs }

// errStopping is launch's answer once Stop has begun.
var errStopping = errors.New("cluster: stopping")

func (c *Cluster) launch(p *Proc) error {
	cmd := exec.Command(c.o.Binary, p.args...)
	cmd.Env = c.env
	// Children get a process group of their own, so a Ctrl-C in the
	// terminal reaches only the parent, which stops them in order; and on
	// Linux they are sent SIGTERM (and drain) if the parent dies, even by
	// SIGKILL (childAttr).
	cmd.SysProcAttr = childAttr()
	switch {
	case c.region != nil && p.Role != "router": // workers get the core lease region as fd 3
		cmd.ExtraFiles = []*os.File{c.region.File()}
	case p.Role == "router": // routers the shared listening socket
		cmd.ExtraFiles = []*os.File{c.shared}
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("cluster: start %s: %w", p.Name, err)
	}
	cmd.Stderr = cmd.Stdout
	// The stop lock is held across the start, so Stop either sees this
	// child or keeps it from starting.
	c.stopMu.Lock()
	if c.stopping {
		c.stopMu.Unlock()
		out.Close()
		return errStopping
	}
	err = startChild(cmd)
	if err == nil {
		p.mu.Lock()
		p.cmd, p.exited, p.exitErr, p.requested, p.started = cmd, make(chan struct{}), nil, false, time.Now()
		p.mu.Unlock()
	}
	c.stopMu.Unlock()
	if err != nil {
		return fmt.Errorf("cluster: start %s: %w", p.Name, err)
	}
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), lineMax)
		for sc.Scan() {
			c.writeLine(p.Name, sc.Bytes())
		}
		if err := sc.Err(); err != nil {
			// A line over lineMax: keep draining so the child never
			// blocks on a full pipe.
			c.o.Logger.Warn("child output unreadable; discarding the rest", "name", p.Name, "err", err)
			_, _ = io.Copy(io.Discard, out)
		}
		err := cmd.Wait()
		p.mu.Lock()
		p.exitErr = err
		requested := p.requested
		p.mu.Unlock()
		close(exited)
		c.o.Logger.Info("process exited", "name", p.Name, "err", err, "requested", requested)
		if c.o.OnExit != nil {
			c.o.OnExit(Exit{Name: p.Name, Err: err, Requested: requested})
		}
		if c.o.Supervise && !requested {
			c.restartLater(p, err)
		}
	}()
	return nil
}

// restartLater starts p again after its backoff, unless Stop begins
// first; a start that fails is tried again after a longer one. Called by
// the goroutine that saw p exit on its own.
func (c *Cluster) restartLater(p *Proc, exitErr error) {
	p.mu.Lock()
	if p.backoff == 0 || time.Since(p.started) >= c.o.StableAfter {
		p.backoff = c.o.RestartBackoff // a first failure, or one after a long good run
	} else {
		p.backoff = min(2*p.backoff, c.o.RestartBackoffMax)
	}
	delay := p.backoff
	p.mu.Unlock()
	c.o.Logger.Warn("a cluster process exited on its own; restarting it", "name", p.Name, "err", exitErr, "in", delay)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for {
			select {
			case <-c.stopped:
				return
			case <-time.After(delay):
			}
			p.mu.Lock()
			p.restarts++
			n := p.restarts
			p.mu.Unlock()
			err := c.launch(p)
			if errors.Is(err, errStopping) {
				return
			}
			if err != nil {
				p.mu.Lock()
				p.backoff = min(2*p.backoff, c.o.RestartBackoffMax)
				delay = p.backoff
				p.mu.Unlock()
				c.o.Logger.Error("could not restart a cluster process; trying again", "name", p.Name, "err", err, "in", delay)
				continue
			}
			c.o.Logger.Info("restarted a cluster process", "name", p.Name, "restarts", n)
			if c.o.OnRestart != nil {
				c.o.OnRestart(p.Name, n, false)
			}
			c.watchReady(p, n)
			return
		}
	}()
}

// watchReady reports when a restarted p answers /ready again. If p exits
// first, its waiter has already scheduled the next restart.
func (c *Cluster) watchReady(p *Proc, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), healthTimeout)
	defer cancel()
	go func() {
		select {
		case <-c.stopped:
			cancel()
		case <-ctx.Done():
		}
	}()
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	client := &http.Client{Timeout: healthRequestTimeout}
	if err := WaitReady(ctx, client, p.URL, exited); err != nil {
		if !errors.Is(err, ErrExited) && ctx.Err() != nil && context.Cause(ctx) != context.Canceled {
			c.o.Logger.Warn("a restarted cluster process is not ready yet", "name", p.Name, "err", err)
		}
		return
	}
	c.o.Logger.Info("a restarted cluster process is ready", "name", p.Name, "restarts", n)
	if c.o.OnRestart != nil {
		c.o.OnRestart(p.Name, n, true)
	}
}

// lineMax is the longest child output line copied to Output.
const lineMax = 1 << 20

// writeLine writes one line of the named child's output to Output in the
// cluster's log format.
func (c *Cluster) writeLine(name string, line []byte) {
	var b []byte
	if c.o.LogFormat == "json" {
		b = jsonLine(name, line, time.Now())
	} else {
		b = fmt.Appendf(nil, "[%s] %s", name, line)
	}
	b = append(b, '\n')
	c.outMu.Lock()
	defer c.outMu.Unlock()
	_, _ = c.o.Output.Write(b)
}

// jsonLine returns line as a JSON object with a "proc" member set to name.
// A line that is a JSON object gets the member inserted first; any other
// line (a panic trace, a usage message) becomes the "msg" of a new object
// at level WARN, stamped with now.
func jsonLine(name string, line []byte, now time.Time) []byte {
	proc, _ := json.Marshal(name)
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) >= 2 && trimmed[0] == '{' {
		var probe map[string]json.RawMessage
		if json.Unmarshal(trimmed, &probe) == nil {
			b := append([]byte(`{"proc":`), proc...)
			rest := bytes.TrimSpace(trimmed[1:])
			if rest[0] != '}' {
				b = append(b, ',')
			}
			return append(b, rest...)
		}
	}
	b, _ := json.Marshal(struct {
		Time  string `json:"time"`
		Level string `json:"level"`
		Msg   string `json:"msg"`
		Proc  string `json:"proc"`
	}{now.Format(time.RFC3339Nano), "WARN", string(line), name})
	return b
}

func (c *Cluster) waitReady(ctx context.Context, ps []*Proc) error {
	client := &http.Client{Timeout: healthRequestTimeout}
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	for _, p := range ps {
		p.mu.Lock()
		exited := p.exited
		p.mu.Unlock()
		if err := WaitReady(ctx, client, p.URL, exited); err != nil {
			p.mu.Lock()
			exitErr := p.exitErr
			p.mu.Unlock()
			if errors.Is(err, ErrExited) {
				return fmt.Errorf("cluster: %s exited before it was ready: %v", p.Name, exitErr)
			}
			return fmt.Errorf("cluster: %s: %w", p.Name, err)
		}
	}
	return nil
}

// Readiness polling.
const (
	healthPoll           = 100 * time.Millisecond // between GET /ready attempts
	healthRequestTimeout = 2 * time.Second        // the client timeout Start uses for each attempt
)

// ErrExited is what WaitReady returns when the process exited first.
var ErrExited = errors.New("the process exited")

// WaitReady polls GET base+"/ready" with c every 100 ms until it answers
// 200. It returns ErrExited when exited is closed first (nil: never), and
// an error naming the last failure when ctx ends first; give ctx a
// deadline.
func WaitReady(ctx context.Context, c *http.Client, base string, exited <-chan struct{}) error {
	last := errors.New("no answer yet")
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/ready", nil)
		if err != nil {
			return fmt.Errorf("readiness check of %s: %w", base, err)
		}
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		if ctx.Err() == nil {
			last = err
		}
		select {
		case <-exited:
			return ErrExited
		case <-ctx.Done():
			return fmt.Errorf("not ready at %s/ready (%w; last: %v)", base, context.Cause(ctx), last)
		case <-time.After(healthPoll):
		}
	}
}

// Kill sends SIGKILL to the named process (for failure tests) and waits
// for it to exit.
func (c *Cluster) Kill(name string) error {
	p := c.find(name)
	if p == nil {
		return fmt.Errorf("cluster: no process %q", name)
	}
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.requested = true
	p.mu.Unlock()
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("cluster: kill %s: %w", name, err)
	}
	<-exited
	return nil
}

// Restart starts a killed, drained or exited process again with the same
// address and flags (a router: the same shared socket too), and waits
// until it is ready.
func (c *Cluster) Restart(ctx context.Context, name string) error {
	p := c.find(name)
	if p == nil {
		return fmt.Errorf("cluster: no process %q", name)
	}
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	select {
	case <-exited:
	default:
		return fmt.Errorf("cluster: %s is still running; kill it first", name)
	}
	if err := c.launch(p); err != nil {
		return err
	}
	return c.waitReady(ctx, []*Proc{p})
}

func (c *Cluster) find(name string) *Proc {
	for _, p := range c.procs {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Drain stops the named process as an orchestrator does one process of a
// fleet: one SIGTERM, so that it drains in full (settle window, then its
// held work within its drain timeout; see internal/api/drain), and waits
// for it to exit, up to StopTimeout, then SIGKILL. It returns how long the
// process took from the signal to its exit, and its exit error (nil for
// exit 0). Supervision does not restart it; Restart does.
func (c *Cluster) Drain(name string) (time.Duration, error) {
	p := c.find(name)
	if p == nil {
		return 0, fmt.Errorf("cluster: no process %q", name)
	}
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.requested = true
	p.mu.Unlock()
	select {
	case <-exited:
		return 0, fmt.Errorf("cluster: %s is not running", name)
	default:
	}
	t0 := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return 0, fmt.Errorf("cluster: signal %s: %w", name, err)
	}
	select {
	case <-exited:
	case <-time.After(c.o.StopTimeout):
		_ = cmd.Process.Kill()
		<-exited
		return time.Since(t0), fmt.Errorf("cluster: %s did not exit within %s of SIGTERM; killed it", name, c.o.StopTimeout)
	}
	d := time.Since(t0)
	p.mu.Lock()
	defer p.mu.Unlock()
	return d, p.exitErr
}

// Routers returns the routers.
func (c *Cluster) Routers() []*Proc {
	var rs []*Proc
	for _, p := range c.procs {
		if p.Role == "router" {
			rs = append(rs, p)
		}
	}
	return rs
}

// Stop ends the cluster in two waves: the routers, which stop taking
// requests and finish the streams they carry, then every worker at once.
// Each process gets SIGTERM, and again every hurryInterval: its first
// starts its drain, a later one ends its settle window, which has nobody
// to wait for once the whole cluster stops (no router is left to notice a
// worker's readiness, and the routers' shared socket closes with the
// cluster), while the work it holds still has its drain timeout. What has
// not exited StopTimeout after the first signal gets SIGKILL. Restarts by
// supervision end first. Stop waits for every output copier and closes
// the routers' socket; calling it again does nothing more.
func (c *Cluster) Stop() {
	c.stopMu.Lock()
	if !c.stopping {
		c.stopping = true
		close(c.stopped)
	}
	c.stopMu.Unlock()
	var routers, workers []*Proc
	for _, p := range c.procs {
		if p.Role == "router" {
			routers = append(routers, p)
		} else {
			workers = append(workers, p)
		}
	}
	c.stopAll(routers)
	c.stopAll(workers)
	c.wg.Wait()
	if c.region != nil {
		_ = c.region.Close()
		c.region = nil
	}
	if c.shared != nil {
		_ = c.shared.Close()
		c.shared = nil
	}
}

// stopAll sends SIGTERM to every running process of ps, repeating it every
// hurryInterval, waits for each up to StopTimeout and SIGKILLs what is
// left.
func (c *Cluster) stopAll(ps []*Proc) {
	var wg sync.WaitGroup
	for _, p := range ps {
		p.mu.Lock()
		cmd, exited := p.cmd, p.exited
		if cmd != nil {
			p.requested = true
		}
		p.mu.Unlock()
		if cmd == nil {
			continue
		}
		select {
		case <-exited:
			continue
		default:
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		wg.Go(func() {
			deadline := time.NewTimer(c.o.StopTimeout)
			defer deadline.Stop()
			hurry := time.NewTicker(hurryInterval)
			defer hurry.Stop()
			for {
				select {
				case <-exited:
					return
				case <-hurry.C:
					_ = cmd.Process.Signal(syscall.SIGTERM)
				case <-deadline.C:
					_ = cmd.Process.Kill()
					<-exited
					return
				}
			}
		})
	}
	wg.Wait()
}
