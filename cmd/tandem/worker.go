package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/pflag"

	"tandem/internal/api/leg"
	"tandem/internal/engine"
	"tandem/internal/engine/cores"
	"tandem/internal/engine/grammar"
	"tandem/internal/pd/room"
	"tandem/internal/pd/shm"
	"tandem/internal/pd/transfer"
	"tandem/internal/pd/worker"
	"tandem/internal/server"
	"tandem/internal/server/chat"
	"tandem/internal/server/toolcall"
)

// defaultITLTarget is --itl-target's default. Measured with tandem bench
// serve (8 clients, 25% 1000-token prompts, 75% 30-token prompts with 96-128
// tokens out) against tandem serve on a synthesized 110m Q8_0 model, 2
// threads: a step of 8 decodes takes 43-52 ms (ITL p50 without a target);
// 150 ms leaves about twice that for prefill chunks and stays under the
// 250 ms inter-token SLO of the project's goodput runs. It cut ITL p99 from
// 6.5 s to 0.38 s and TPOT p99 from 1.5 s to 0.19 s, at the price of TTFT
// (short p50 0.24 s -> 0.44 s, long p50 24 s -> 43 s).
const defaultITLTarget = 150 * time.Millisecond

// workerFlags are the flags of every command that serves a model over HTTP:
// serve, prefill and decode.
type workerFlags struct {
	ef        engineFlags
	cfg       engine.Config
	host      string
	port      int
	name      string
	maxBody   int64
	drain     drainFlags
	obs       obsFlags
	apiKey    string // tandem serve only: required bearer token on /v1/*
	chatTmpl  string // --chat-template: a Jinja file replacing the model's template
	reasoning string // --reasoning-parser
	toolCalls string // --tool-call-parser
	emb       embedFlags
	jsonWS    int // --json-max-whitespace
}

func (f *workerFlags) register(fs *pflag.FlagSet, defaultPort int) {
	f.ef.register(fs)
	f.emb.register(fs)
	fs.StringVar(&f.host, "host", "127.0.0.1", "address to listen on (0.0.0.0: all interfaces)")
	fs.IntVar(&f.port, "port", defaultPort, "TCP port to listen on (0: any free port)")
	fs.StringVar(&f.name, "model-name", "", "model id to serve under (default: the model's general.name)")
	fs.IntVar(&f.cfg.Pages, "kv-pages", 0, "pages in the KV cache (0: 4 sequences of --max-model-len tokens, within --kv-cache-memory-bytes)")
	fs.IntVar(&f.cfg.MaxModelLen, "max-model-len", 0, "context length (prompt plus output tokens), at most the model's; the KV cache is sized from it and longer requests get 400 (0: the model's context)")
	fs.Var((*byteSize)(&f.cfg.KVMemoryBytes), "kv-cache-memory-bytes", "memory of the default KV cache, e.g. 2GiB or 512MiB; startup fails when one --max-model-len sequence does not fit "+
		"(0: at most 4GiB, but never less than one full sequence)")
	fs.IntVar(&f.cfg.MaxBatchTokens, "max-batch-tokens", 512, "tokens per engine step (decode and prefill chunks together)")
	fs.IntVar(&f.cfg.MaxRunning, "max-running", 64, "sequences in the running batch")
	fs.IntVar(&f.cfg.MaxWaiting, "max-waiting", 256, "queued sequences before requests get 429")
	fs.DurationVar(&f.cfg.ITLTarget, "itl-target", defaultITLTarget, "inter-token latency budget of a step: while sequences decode, each step's prefill chunk is sized "+
		"from the measured step cost to stay within it (at least 16 tokens a step, so prefill progresses); 0: off. Applies to serve and to decode workers' local prefill")
	fs.BoolVar(&f.cfg.PrefixCache, "prefix-cache", true, "share full prompt pages between requests")
	fs.IntVar(&f.cfg.StateSlots, "state-slots", 0, "recurrent-state slots of a hybrid model (qwen35): sequences that may run at once, each holding one "+
		"(the start-up log shows the bytes per slot; 0: --max-running; ignored for models without state)")
	fs.IntVar(&f.cfg.StateSnapshots, "state-snapshots", 0, "recurrent-state snapshots the prefix cache of a hybrid model keeps, each a slot's size: "+
		"a prefix is reused only from one (0: as many as --state-slots, within 1 GiB)")
	fs.Int64Var(&f.maxBody, "max-body-bytes", server.DefaultMaxBodyBytes, "largest request body accepted (413 above it)")
	f.drain.register(fs)
	f.obs.register(fs, true)
	fs.StringVar(&f.chatTmpl, "chat-template", "", "Jinja chat template file used instead of the model's tokenizer.chat_template")
	fs.StringVar(&f.reasoning, "reasoning-parser", "auto", "split chat output into reasoning_content and content: none, think (<think>...</think>), harmony (gpt-oss's channels and tool calls), or auto (harmony or think, as the chat template writes)")
	fs.IntVar(&f.jsonWS, "json-max-whitespace", 0, "whitespace structured JSON output (schemas, json_object, tool arguments) may put between tokens: "+
		"0: compact (nothing, one space, or a newline and up to 20 spaces or tabs of indentation); N > 0: any run of space, tab, newline and CR up to N bytes")
	fs.StringVar(&f.toolCalls, "tool-call-parser", "auto", "tool-call syntax of chat output for requests with tools: hermes, llama3_json, mistral, generic, or auto (from the chat template)")
}

// chatOptions reads --chat-template and checks --reasoning-parser.
func (f *workerFlags) chatOptions() (tmpl, parser string, err error) {
	switch f.reasoning {
	case "none", "auto", "think", "harmony":
	default:
		return "", "", fmt.Errorf("--reasoning-parser %q is not supported: use none, auto, think or harmony", f.reasoning)
	}
	if f.jsonWS < 0 || f.jsonWS > grammar.MaxLengthBound {
		return "", "", fmt.Errorf("--json-max-whitespace %d is out of range 0..%d (0: compact)", f.jsonWS, grammar.MaxLengthBound)
	}
	if f.chatTmpl == "" {
		return "", f.reasoning, nil
	}
	b, err := os.ReadFile(f.chatTmpl)
	if err != nil {
		return "", "", fmt.Errorf("--chat-template: %w", err)
	}
	if _, err := chat.NewTemplate(string(b), "", ""); err != nil {
		return "", "", fmt.Errorf("--chat-template %s: %w", f.chatTmpl, err)
	}
	return string(b), f.reasoning, nil
}

// pdFlags are the flags of the disaggregated worker roles.
type pdFlags struct {
	transferHost string
	transferPort int
	advertise    string
	tokenFile    string
	heartbeat    time.Duration
	kvTransport  string // --kv-transport: auto, tcp or shm
	shmMiB       int    // --kv-shm-mib: shared-memory region per connection
	coreLease    string // --core-lease: fd:N or a path; "": no lending
	coreSlot     int    // --core-lease-slot
	corePrio     string // --core-lease-priority
	corePace     time.Duration
	faultSpec    string // only settable in -tags tandemfaults builds
}

func (f *pdFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.transferHost, "transfer-host", "127.0.0.1", "address the KV transfer listener binds (prefill; a decode worker only dials and listens nowhere)")
	fs.IntVar(&f.transferPort, "transfer-port", 0, "TCP port of the KV transfer listener (prefill; 0: any free port)")
	fs.StringVar(&f.advertise, "transfer-advertise", "", "prefill: the host:port decode workers dial to reach the transfer listener (needed when --transfer-host is 0.0.0.0); decode: the name it presents to prefill workers (default: a random one per process)")
	fs.StringVar(&f.tokenFile, "cluster-token-file", "", "file holding the cluster token peers authenticate with (default: $TANDEM_CLUSTER_TOKEN)")
	fs.DurationVar(&f.heartbeat, "heartbeat", time.Second, "heartbeat interval between prefill and decode workers; a peer silent for two intervals is lost")
	fs.StringVar(&f.kvTransport, "kv-transport", "auto", "how KV bytes travel between prefill and decode: auto (shared memory with a peer on this host when it can be set up, else TCP), tcp, or shm (offer shared memory to every peer; a prefill worker then refuses to send KV over TCP)")
	fs.IntVar(&f.shmMiB, "kv-shm-mib", 64, "MiB of shared memory per prefill-decode connection (1..1024); larger KV pages go over TCP")
	fs.StringVar(&f.coreLease, "core-lease", "", "share this host's cores with the other workers of `tandem up` through the core lease region it made (fd:N or a path): "+
		"the kernel pool gets a thread per core of the region, and runs on as many as the lease gives it by priority (--threads is then ignored); empty: no lending")
	fs.IntVar(&f.coreSlot, "core-lease-slot", 0, "this worker's slot in the --core-lease region")
	fs.StringVar(&f.corePrio, "core-lease-priority", "prompt", "how a worker's steps rank on the core lease: prompt (a decode worker's steps that carry prompt tokens are urgent and "+
		"take every core; all other steps share evenly) or even (every step shares evenly: cores go only to idle workers)")
	fs.DurationVar(&f.corePace, "core-lease-pace", 0, "decode worker with --core-lease: while another worker on the lease runs a step, start a step that only decodes "+
		"no sooner than this after the previous one, its cores lent meanwhile (keep it well under the inter-token SLO; a new prompt or import ends the wait); 0: never wait")
	registerFaultFlags(fs, f)
}

func (f *pdFlags) token() ([]byte, error) { return clusterToken(f.tokenFile) }

// clusterToken reads the cluster token from file, or from
// $TANDEM_CLUSTER_TOKEN when file is "", and requires one of at least
// leg.TokenMin characters. Workers, the router and inspect share it.
func clusterToken(file string) ([]byte, error) {
	var tok string
	if file != "" {
		b, err := readSecretFile(file)
		if err != nil {
			return nil, fmt.Errorf("read --cluster-token-file: %w", err)
		}
		tok = strings.TrimSpace(string(b))
	} else {
		tok = os.Getenv("TANDEM_CLUSTER_TOKEN")
	}
	if len(tok) < leg.TokenMin {
		return nil, fmt.Errorf("a cluster token of at least %d characters is required: set TANDEM_CLUSTER_TOKEN or --cluster-token-file (tandem up makes one)", leg.TokenMin)
	}
	return []byte(tok), nil
}

// readSecretFile reads a file that holds a secret, refusing one that its
// group or other users can read or write, as ssh refuses a private key
// with such permissions: anyone who can read the cluster token can sign
// legs and read /debug, and anyone who can write it can make this process
// trust their token. The mode checked is that of the file opened (a
// symbolic link is followed), so it cannot change between check and read.
func readSecretFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%s is accessible by group or others (mode %#o): it holds a secret; run chmod 600 %s", name, perm, name)
	}
	b, err := io.ReadAll(io.LimitReader(f, secretFileBytesMax+1))
	if err == nil && len(b) > secretFileBytesMax {
		err = fmt.Errorf("%s is larger than %d bytes: it is not a token file", name, secretFileBytesMax)
	}
	return b, err
}

// secretFileBytesMax bounds what readSecretFile reads: a token is a line.
const secretFileBytesMax = 64 << 10

// runWorker serves the model over HTTP until ctx is done: colocated when
// pd is nil, else as a prefill or decode worker.
func runWorker(ctx context.Context, fs *pflag.FlagSet, f *workerFlags, role room.Role, pd *pdFlags) error {
	if f.port < 0 || f.port > 65535 {
		return fmt.Errorf("--port %d is out of range 0..65535", f.port)
	}
	if err := f.drain.check(fs); err != nil {
		return err
	}
	log, err := f.obs.logger()
	if err != nil {
		return err
	}
	if emb, path, err := isEmbeddingModel(ctx, &f.ef); err != nil {
		return err
	} else if emb {
		return runEmbeddingWorker(ctx, f, &f.emb, path, role, pd, log)
	}
	roleName := "serve"
	if pd != nil {
		roleName = role.String()
	}
	tracing, stopTracing, err := f.obs.tracing(ctx, log, roleName, "")
	if err != nil {
		return err
	}
	defer stopTracing()
	chatTmpl, parser, err := f.chatOptions()
	if err != nil {
		return err
	}
	if _, err := toolcall.ParseFormat(f.toolCalls); err != nil {
		return fmt.Errorf("--tool-call-parser: %w", err)
	}
	kvType, err := f.ef.kvDType()
	if err != nil {
		return err
	}
	f.cfg.KVType, f.cfg.PageTokens = kvType, f.ef.pageTokens
	var lease *cores.Lease
	if pd != nil && pd.coreLease != "" {
		region, err := cores.Open(pd.coreLease)
		if err != nil {
			return err
		}
		defer region.Close()
		if lease, err = region.Lease(pd.coreSlot, cores.Options{}); err != nil {
			return fmt.Errorf("--core-lease-slot: %w", err)
		}
		defer lease.Close()
		f.ef.threads = lease.Cores()
		if f.cfg.StepHook, err = stepPriority(lease, role, pd.corePrio); err != nil {
			return err
		}
		if f.cfg.DecodePace, err = decodePace(lease, role, pd.corePace); err != nil {
			return err
		}
	}
	var kvt transfer.KVTransport
	if pd != nil {
		if kvt, err = transfer.ParseKVTransport(pd.kvTransport); err != nil {
			return fmt.Errorf("--kv-transport: %w", err)
		}
	}
	var src *shm.Source
	if pd != nil && role == room.RolePrefill && kvt != transfer.KVTCP && shm.Supported() {
		// Decode workers on this host copy KV pages straight out of this
		// worker's cache: it lives in a shared-memory source region.
		f.cfg.KVMemory = func(n int) ([]byte, error) {
			s, err := shm.CreateSource(n)
			if err != nil {
				log.Warn("no shared-memory region for the KV cache; decode workers on this host get KV through their ring (two copies a page)", "bytes", n, "err", err)
				return nil, nil
			}
			src = s
			return s.Data(), nil
		}
		defer func() {
			if src != nil {
				src.Close() // after the engine and the transport (deferred later, run sooner)
			}
		}()
	}
	r, pool, closeAll, err := f.ef.open(ctx)
	if err != nil {
		return err
	}
	defer closeAll()
	if lease != nil {
		pool.SetCoreLease(lease)
	}
	e, err := engine.New(r, f.cfg, log)
	if err != nil {
		return fmt.Errorf("start engine: %w", err)
	}
	defer e.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var (
		pw   *worker.Worker
		keys *leg.Keys
	)
	if pd != nil {
		tok, err := pd.token()
		if err != nil {
			return err
		}
		if keys, err = leg.NewKeys(tok); err != nil {
			return err
		}
		inj, err := pd.faults()
		if err != nil {
			return err
		}
		if pd.shmMiB < 1 || pd.shmMiB > 1024 {
			return fmt.Errorf("--kv-shm-mib %d is out of range 1..1024", pd.shmMiB)
		}
		rc := worker.DefaultRoomConfig()
		pw, err = worker.New(e, worker.Config{Role: role, Room: rc, Logger: log, Tracing: tracing, Transfer: transfer.Config{
			ListenAddr: net.JoinHostPort(pd.transferHost, strconv.Itoa(pd.transferPort)), AdvertiseAddr: pd.advertise, ClusterToken: tok,
			HeartbeatInterval: pd.heartbeat, Faults: inj, KVTransport: kvt, ShmRegionBytes: pd.shmMiB << 20, ShmSource: src}})
		if err != nil {
			return err
		}
		defer pw.Close()
		if err := pw.Register(reg); err != nil {
			return fmt.Errorf("register metrics: %w", err)
		}
		if lease != nil {
			if err := reg.Register(cores.NewCollector(lease)); err != nil {
				return fmt.Errorf("register metrics: %w", err)
			}
		}
	}
	so := server.Options{ModelName: f.name, Logger: log, Registry: reg, MaxBodyBytes: f.maxBody, APIKey: f.apiKey, LegKeys: keys,
		ChatTemplate: chatTmpl, ReasoningParser: parser, ToolCallParser: f.toolCalls, JSONMaxWhitespace: f.jsonWS}
	if lease != nil {
		so.Health = lease.Health // a stuck or written-over core lease shows on /health
	}
	if pw != nil { // a PD worker: legs must be signed and go to it, /pd/* and /debug/* need the cluster credential
		so.Legs = pw
		h := pw.Handler()
		if lease != nil {
			mux := http.NewServeMux()
			mux.Handle("GET /debug/cores", cores.DebugHandler(lease))
			mux.Handle("/", h)
			h = mux
		}
		guarded := keys.RequireCredential(h)
		so.Mounts = map[string]http.Handler{"/pd/": guarded, "/debug/": guarded}
	}
	srv := server.New(server.EngineBackend(e), so)
	hs := srv.HTTPServer(net.JoinHostPort(f.host, strconv.Itoa(f.port)))
	ln, err := net.Listen("tcp", hs.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", hs.Addr, err)
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	srv.SetReady(true)
	m := e.Model().Config
	attrs := []any{"addr", "http://" + ln.Addr().String(), "model", f.ef.model, "arch", m.Arch,
		"context", e.MaxContext(), "threads", pool.Threads(), "kv_pages", e.Config().Pages, "kv_bytes", e.Stats().KVBytesTot}
	if pw != nil {
		attrs = append(attrs, "role", role.String(), "transfer", pw.TransferAddr())
	}
	if lease != nil {
		attrs = append(attrs, "core_lease_slot", lease.Slot())
	}
	log.Info("serving", attrs...)
	sctx, stopStats := context.WithCancel(ctx)
	defer stopStats()
	f.obs.engineStats(sctx, log, e)

	select {
	case err := <-errc:
		return fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
	}
	// The drain (package drain): /ready turns 503 at once, requests are
	// served for --drain-settle while routers notice, then refused with
	// the draining answer (which routers retry elsewhere); what is held —
	// requests, and a PD worker's rooms until both sides end them — has
	// --drain-timeout. The listener stays open throughout, so /debug/rooms
	// and /pd/status show every room until the end.
	dc := f.drain.config(ctx)
	dc.Logger = log
	dc.Refusing = func() { hs.SetKeepAlivesEnabled(false) } // idle connections close now, busy ones after their answer
	if pw != nil {
		dc.Busy = pw.LiveRooms
	}
	res := srv.Gate().Drain(dc)
	if res.Left > 0 {
		// The deadline passed: a PD worker fails its live rooms (reason
		// shutdown; its peers fail theirs when the connection closes), the
		// engine fails its sequences, and their handlers answer the error.
		if pw != nil {
			pw.Close()
		}
		e.Close()
	}
	sctx, cancel := context.WithTimeout(context.Background(), endGrace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		log.Warn("connections still open after the drain; closing them", "err", err)
		hs.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve http: %w", err)
	}
	log.Info("stopped", "settled", res.Settled, "drained", res.Drained, "ended_at_deadline", res.Left)
	return nil
}

// decodePace returns the engine's DecodePace for --core-lease-pace: a
// decode worker waits pace between decode-only steps while another worker
// on the lease wants cores; nil when pace is 0 or the role does not decode.
func decodePace(l *cores.Lease, role room.Role, pace time.Duration) (func() time.Duration, error) {
	switch {
	case pace < 0 || pace > time.Second:
		return nil, fmt.Errorf("--core-lease-pace %v is out of range 0..1s", pace)
	case pace == 0 || role != room.RoleDecode:
		return nil, nil
	}
	return func() time.Duration {
		if l.OthersWant() {
			return pace
		}
		return 0
	}, nil
}

// stepPriority returns the engine step hook that gives a PD worker's steps
// their priority on the core lease. Mode "prompt": a decode worker's steps
// that carry prompt tokens (short prompts prefilled locally: someone waits
// on their first token) are urgent, its other steps and every prefill
// worker step normal; mode "even": every step normal. Between steps the
// worker is idle (the others may use its cores).
func stepPriority(l *cores.Lease, role room.Role, mode string) (func(prefill, decodes int) func(), error) {
	switch mode {
	case "prompt":
		return func(prefill, _ int) func() {
			if role == room.RoleDecode && prefill > 0 {
				return l.Step(cores.Urgent)
			}
			return l.Step(cores.Normal)
		}, nil
	case "even":
		return func(int, int) func() { return l.Step(cores.Normal) }, nil
	}
	return nil, fmt.Errorf("--core-lease-priority %q is not supported: use prompt or even", mode)
}
