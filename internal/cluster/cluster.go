package cluster

import (
	"bufio"
	"bytes"
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
	"strconv"
	"sync"
	"syscall"
	"time"

	"tandem/internal/engine/cores"
)

// Limits.
const (
	workersMax    = 64
	healthTimeout = 3 * time.Minute
)

// Options configures a cluster.
type Options struct {
	Binary     string   // the tandem executable
	Model      string   // GGUF path every worker loads
	Prefill    int      // prefill workers (>= 1)
	Decode     int      // decode workers (>= 1)
	Host       string   // address everything binds (default 127.0.0.1)
	Port       int      // router port (0: any free port)
	WorkerArgs []string // extra flags for every worker (e.g. --threads 1)
	RouterArgs []string // extra flags for the router
	Token      string   // cluster token (default: 32 random bytes, hex)
	Output     io.Writer
	// LogFormat is how children's output lines are written to Output:
	// "text" (default) prefixes each line with "[name] "; "json" adds a
	// "proc" member naming the child to each line that is a JSON object,
	// and wraps any other line in one ({"time","level","msg","proc"}), so
	// every line written is a JSON object.
	LogFormat   string
	Logger      *slog.Logger
	StopTimeout time.Duration // how long children get after SIGTERM before SIGKILL (default 10s)
	// LendCores makes the workers share this host's cores by priority
	// through a core lease (internal/engine/cores): Start creates the
	// shared region for runtime.NumCPU() cores and passes it to every
	// worker (--core-lease fd:3 --core-lease-slot i). At most
	// cores.MaxSlots workers; with more, Start fails.
	LendCores bool
	// OnExit, when set, is called once for every exit of every child,
	// including a child started again by Restart, from the goroutine that
	// waited for it. It must not block for long: Stop waits for it.
	OnExit func(Exit)
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
}

// Cluster is a running deployment.
type Cluster struct {
	o      Options
	region *cores.Region // the core lease region (LendCores), else nil
	procs  []*Proc
	env    []string
	wg     sync.WaitGroup
	outMu  sync.Mutex // serializes writes to o.Output from the copiers
}

// Start launches the workers, waits for them, then the router, and returns
// once every process answers /health. On error, what was started is stopped.
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
	if o.StopTimeout == 0 {
		o.StopTimeout = 10 * time.Second
	}
	if o.Token == "" {
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("cluster: make token: %w", err)
		}
		o.Token = hex.EncodeToString(b[:])
	}
	c := &Cluster{o: o, env: append(os.Environ(), "TANDEM_CLUSTER_TOKEN="+o.Token)}
	// Hold the router's port while the workers start: a worker's
	// listener on an ephemeral port (its transfer port) could otherwise be
	// given it, and the router would find it taken.
	var reserved net.Listener
	if o.Port != 0 {
		ln, err := net.Listen("tcp", net.JoinHostPort(o.Host, strconv.Itoa(o.Port)))
		if err != nil {
			return nil, fmt.Errorf("cluster: the router's port %d: %w (choose another with --port)", o.Port, err)
		}
		reserved = ln
		defer reserved.Close() // closed below before the router starts; this covers the early returns
	}
	if o.LendCores {
		if o.Prefill+o.Decode > cores.MaxSlots {
			return nil, fmt.Errorf("cluster: core lending serves at most %d workers on one host, got %d: turn it off (--lend-cores=false)", cores.MaxSlots, o.Prefill+o.Decode)
		}
		r, err := cores.Create(min(runtime.NumCPU(), cores.MaxCores), o.Prefill+o.Decode)
		if err != nil {
			return nil, fmt.Errorf("cluster: %w (turn lending off with --lend-cores=false)", err)
		}
		c.region = r
	}
	var prefills, decodes []string
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
		p.args = append([]string{role, "--model", o.Model, "--host", o.Host, "--port", strconv.Itoa(port), "--transfer-host", o.Host}, o.WorkerArgs...)
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
	for _, p := range c.procs {
		if err := c.launch(p); err != nil {
			c.Stop()
			return nil, err
		}
	}
	if err := c.waitHealthy(ctx, c.procs); err != nil {
		c.Stop()
		return nil, err
	}
	rport := o.Port
	if rport == 0 {
		var err error
		if rport, err = FreePort(o.Host); err != nil {
			c.Stop()
			return nil, err
		}
	}
	r := &Proc{Name: "router", Role: "router", URL: "http://" + net.JoinHostPort(o.Host, strconv.Itoa(rport))}
	r.args = []string{"route", "--host", o.Host, "--port", strconv.Itoa(rport)}
	for _, u := range prefills {
		r.args = append(r.args, "--prefill", u)
	}
	for _, u := range decodes {
		r.args = append(r.args, "--decode", u)
	}
	r.args = append(r.args, o.RouterArgs...)
	c.procs = append(c.procs, r)
	if reserved != nil {
		reserved.Close()
	}
	if err := c.launch(r); err != nil {
		c.Stop()
		return nil, err
	}
	if err := c.waitHealthy(ctx, []*Proc{r}); err != nil {
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
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("cluster: find a free port: %w", err)
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// RouterURL returns the router's base URL.
func (c *Cluster) RouterURL() string { return c.procs[len(c.procs)-1].URL }

// Procs returns every process, workers first, the router last.
func (c *Cluster) Procs() []*Proc { return c.procs }

func (c *Cluster) launch(p *Proc) error {
	cmd := exec.Command(c.o.Binary, p.args...)
	cmd.Env = c.env
	if c.region != nil && p.Role != "router" { // workers get the core lease region as fd 3
		cmd.ExtraFiles = []*os.File{c.region.File()}
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("cluster: start %s: %w", p.Name, err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("cluster: start %s: %w", p.Name, err)
	}
	p.mu.Lock()
	p.cmd, p.exited, p.exitErr, p.requested = cmd, make(chan struct{}), nil, false
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
	}()
	return nil
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

func (c *Cluster) waitHealthy(ctx context.Context, ps []*Proc) error {
	client := &http.Client{Timeout: healthRequestTimeout}
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	for _, p := range ps {
		p.mu.Lock()
		exited := p.exited
		p.mu.Unlock()
		if err := WaitHealthy(ctx, client, p.URL, exited); err != nil {
			p.mu.Lock()
			exitErr := p.exitErr
			p.mu.Unlock()
			if errors.Is(err, ErrExited) {
				return fmt.Errorf("cluster: %s exited before it was healthy: %v", p.Name, exitErr)
			}
			return fmt.Errorf("cluster: %s: %w", p.Name, err)
		}
	}
	return nil
}

// Health polling.
const (
	healthPoll           = 100 * time.Millisecond // between GET /health attempts
	healthRequestTimeout = 2 * time.Second        // the client timeout Start uses for each attempt
)

// ErrExited is what WaitHealthy returns when the process exited first.
var ErrExited = errors.New("the process exited")

// WaitHealthy polls GET base+"/health" with c every 100 ms until it answers
// 200. It returns ErrExited when exited is closed first (nil: never), and
// an error naming the last failure when ctx ends first; give ctx a
// deadline.
func WaitHealthy(ctx context.Context, c *http.Client, base string, exited <-chan struct{}) error {
	last := errors.New("no answer yet")
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/health", nil)
		if err != nil {
			return fmt.Errorf("health check of %s: %w", base, err)
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
			return fmt.Errorf("not healthy at %s/health (%w; last: %v)", base, context.Cause(ctx), last)
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

// Restart starts a killed or exited process again with the same address
// and flags, and waits until it is healthy.
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
	return c.waitHealthy(ctx, []*Proc{p})
}

func (c *Cluster) find(name string) *Proc {
	for _, p := range c.procs {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Stop sends SIGTERM to the router, then to the workers, waits up to
// StopTimeout for each, and SIGKILLs what is left. It waits for every
// output copier.
func (c *Cluster) Stop() {
	order := make([]*Proc, 0, len(c.procs))
	for i := len(c.procs) - 1; i >= 0; i-- {
		order = append(order, c.procs[i])
	}
	for _, p := range order {
		p.mu.Lock()
		cmd, exited := p.cmd, p.exited
		p.mu.Unlock()
		if cmd == nil {
			continue
		}
		select {
		case <-exited:
			continue
		default:
		}
		p.mu.Lock()
		p.requested = true
		p.mu.Unlock()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(c.o.StopTimeout):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	c.wg.Wait()
	if c.region != nil {
		_ = c.region.Close()
		c.region = nil
	}
}
