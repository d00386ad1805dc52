package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"tandem/internal/cluster"
	"tandem/internal/engine/tensor"
	"tandem/internal/router"
	"tandem/internal/synth"
	"tandem/internal/telemetry"
)

func upCmd() *cobra.Command {
	var (
		o            cluster.Options
		threads      int
		logFormat    string
		logLevel     string
		otlpEndpoint string
		traceSample  float64
		pdThreshold  int
		pdSpill      float64
		apiKey       string
		modelName    string
		chatTmpl     string
		maxModelLen  int
		origins      []string
		df           drainFlags
	)
	cmd := &cobra.Command{
		Use:   "up [--model M] [--prefill N] [--decode M] [--routers R] [--port 8000]",
		Short: "Start routers and N prefill + M decode workers on this machine",
		Long: `Up starts a whole disaggregated cluster as child processes: prefill workers,
decode workers and a router in front of them, sharing one cluster token:
$TANDEM_CLUSTER_TOKEN when set, else a fresh random one, kept in a file only
the user can read (its path is printed) where ` + "`tandem inspect URL`" + ` finds it.
It prints the router's URL once everything answers /ready, restarts a process
that dies (with a backoff from 0.5 s doubling to 30 s), and stops them all, the
routers first, on Ctrl-C, SIGTERM or SIGHUP: each drains (its requests
finish within --drain-timeout) without waiting out its settle window, since
nobody is left to notice; if up itself is killed, even with SIGKILL, the
kernel stops its children (Linux). --routers N runs N routers that accept
on the one --port: up opens that socket once and gives it to each
(route --listen-fd), so a router that drains or dies leaves the
connections it did not take to the others, and one restarted gets the same
socket. --drain-settle and --drain-timeout are passed to every process
(see docs/operations.md). With no --model it
synthesizes a small random-weight Llama (cached under the user cache folder)
so it runs on a fresh machine. --pd-threshold is the router's: prompts under that many
tokens run as one local leg on a decode worker (0: every request is disaggregated);
--pd-spill too: a long prompt prefills on a decode worker when the prefill queue is that
many times the decode worker's (0: never). --lend-cores lets the workers share this
host's cores by priority instead of each running on its --threads alone (by default
the cores are split evenly between the workers): a decode
worker's steps with prompt tokens borrow the prefill worker's core, a worker borrows
an idle one's (see internal/engine/cores; off by default).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := telemetry.NewLogger(os.Stderr, logFormat, logLevel)
			if err != nil {
				return err
			}
			if err := df.check(cmd.Flags()); err != nil {
				return err
			}
			if cmd.Flags().Changed("drain-settle") {
				o.DrainSettle = df.settle
			}
			if cmd.Flags().Changed("drain-timeout") || cmd.Flags().Changed("shutdown-grace") {
				o.DrainTimeout = df.timeout
			}
			log = log.With("proc", "up") // children's lines carry their own name in "proc"
			if o.Model == "" {
				if o.Model, err = defaultModel(); err != nil {
					return err
				}
				log.Info("no --model given: using a synthesized random-weight model", "path", o.Model)
			} else if o.Model, err = resolveModel(cmd.Context(), o.Model); err != nil {
				return err // a hub reference is pulled once here, not by every worker
			}
			if o.Binary, err = os.Executable(); err != nil {
				return fmt.Errorf("find the tandem executable: %w", err)
			}
			if threads == 0 && !o.LendCores {
				threads = splitThreads(runtime.NumCPU(), o.Prefill+o.Decode)
			}
			// up's own worker flags first: a --worker-arg repeating one
			// comes later and wins.
			var wargs []string
			if threads > 0 {
				wargs = append(wargs, "--threads", strconv.Itoa(threads))
			}
			obsArgs := []string{"--log-format", logFormat, "--log-level", logLevel}
			if otlpEndpoint != "" {
				obsArgs = append(obsArgs, "--otlp-endpoint", otlpEndpoint)
			}
			if cmd.Flags().Changed("trace-sample") {
				obsArgs = append(obsArgs, "--trace-sample", strconv.FormatFloat(traceSample, 'g', -1, 64))
			}
			wargs = append(wargs, obsArgs...)
			if modelName != "" {
				wargs = append(wargs, "--model-name", modelName)
			}
			if chatTmpl != "" {
				wargs = append(wargs, "--chat-template", chatTmpl)
			}
			if maxModelLen > 0 {
				wargs = append(wargs, "--max-model-len", strconv.Itoa(maxModelLen))
			}
			o.WorkerArgs = append(wargs, o.WorkerArgs...)
			o.RouterArgs = append(o.RouterArgs, obsArgs...)
			o.RouterArgs = append(o.RouterArgs, "--pd-threshold", strconv.Itoa(pdThreshold),
				"--pd-spill", strconv.FormatFloat(pdSpill, 'g', -1, 64))
			if apiKey != "" {
				o.RouterArgs = append(o.RouterArgs, "--api-key", apiKey)
			}
			if len(origins) > 0 {
				o.RouterArgs = append(o.RouterArgs, "--allowed-origins", strings.Join(origins, ","))
			}
			o.Output, o.Logger, o.LogFormat = os.Stderr, log, logFormat
			o.Supervise = true
			o.Token = os.Getenv("TANDEM_CLUSTER_TOKEN")
			if o.Token == "" {
				if o.Token, err = newToken(); err != nil {
					return err
				}
			}
			c, err := cluster.Start(cmd.Context(), o)
			if err != nil {
				return err
			}
			defer c.Stop()
			u, _ := url.Parse(c.RouterURL())
			tokPath, err := writeUpToken(u.Hostname(), u.Port(), o.Token)
			if err != nil {
				log.Warn("could not keep the cluster token for tandem inspect", "err", err)
			} else {
				defer os.Remove(tokPath)
			}
			routers := ""
			if n := len(c.Routers()); n > 1 {
				routers = fmt.Sprintf(", %d routers", n)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "tandem is up: %s (%d prefill, %d decode%s); Ctrl-C stops it\n", c.RouterURL(), o.Prefill, o.Decode, routers)
			if tokPath != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "cluster token: %s (tandem inspect %s reads it)\n", tokPath, c.RouterURL())
			}
			<-cmd.Context().Done()
			log.Info("stopping the cluster")
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.Model, "model", "", "GGUF model every worker loads: a path or a hub reference (default: a synthesized tiny model)")
	fs.IntVar(&o.Prefill, "prefill", 1, "prefill workers")
	fs.IntVar(&o.Decode, "decode", 1, "decode workers")
	fs.IntVar(&o.Routers, "routers", 1, "routers, all accepting on --port (one listening socket shared by every router)")
	fs.StringVar(&o.Host, "host", "127.0.0.1", "address every process binds")
	fs.IntVar(&o.Port, "port", 8000, "router port (0: any free port)")
	fs.IntVar(&threads, "threads", 0, "compute threads per worker (0: the host's cores split evenly between the workers, at least 1 each)")
	fs.StringVar(&logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&logLevel, "log-level", "info", "least severe log lines written, by up and every process: debug, info, warn or error")
	fs.StringVar(&otlpEndpoint, "otlp-endpoint", "", "every process exports traces over OTLP to this collector (default $"+telemetry.EnvEndpoint+", which they inherit; none: off)")
	fs.Float64Var(&traceSample, "trace-sample", 1, "fraction of new traces the router records (0..1)")
	fs.IntVar(&pdThreshold, "pd-threshold", router.DefaultPDThreshold, pdThresholdUsage)
	fs.Float64Var(&pdSpill, "pd-spill", router.DefaultPDSpill, pdSpillUsage)
	fs.BoolVar(&o.LendCores, "lend-cores", false, "let the workers share this host's cores by priority (a decode worker's steps with prompt tokens borrow the prefill worker's cores, "+
		"a prefill worker borrows an idle decode worker's; --worker-arg=--core-lease-priority=even: only idle workers lend); each worker's pool then has a thread per core "+
		"and --threads is ignored. Off by default: on a quiet 2-core host it cut short-prompt TTFT p90 by 10-22% and raised long-prompt TTFT p50 by ~50% (see internal/engine/cores)")
	fs.StringVar(&apiKey, "api-key", "", "the router requires \"Authorization: Bearer KEY\" on /v1/* (default: $TANDEM_API_KEY; none: open)")
	fs.StringSliceVar(&origins, "allowed-origins", nil, "browser origins the router answers with CORS headers (scheme://host[:port], or *); default none")
	fs.StringVar(&modelName, "model-name", "", "model id to serve under (default: the model's general.name)")
	fs.IntVar(&maxModelLen, "max-model-len", 0, "context length every worker serves, at most the model's: the KV caches are sized from it and longer requests get 400 (0: the model's)")
	fs.StringVar(&chatTmpl, "chat-template", "", "Jinja chat template file the workers use instead of the model's tokenizer.chat_template")
	df.register(fs)
	fs.StringArrayVar(&o.WorkerArgs, "worker-arg", nil, "extra flag passed to every worker (repeatable), e.g. --worker-arg=--kv-pages=512")
	return cmd
}

// splitThreads gives each of n workers an even share of cores, at least
// one: on a 2-core host 1 prefill and 1 decode worker get a core each
// instead of both oversubscribing both.
func splitThreads(cores, n int) int { return max(1, cores/max(1, n)) }

// newToken returns a fresh cluster token: 32 random bytes, hex.
func newToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("make a cluster token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// defaultModel returns the path of the synthesized tiny model, writing it
// on first use.
func defaultModel() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	p := filepath.Join(dir, "tandem", "synth-tiny-q8_0-seed1.gguf")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", fmt.Errorf("make model cache folder: %w", err)
	}
	cfg, _ := synth.Preset("tiny")
	if err := synth.Write(p, synth.Options{Config: cfg, Type: tensor.Q8_0, Seed: 1}); err != nil {
		return "", fmt.Errorf("synthesize the default model: %w", err)
	}
	return p, nil
}
