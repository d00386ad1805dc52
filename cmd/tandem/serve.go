package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"tandem/internal/engine"
	"tandem/internal/server"
)

func serveCmd() *cobra.Command {
	var (
		ef        engineFlags
		cfg       engine.Config
		host      string
		port      int
		name      string
		maxBody   int64
		grace     time.Duration
		logFormat string
	)
	cmd := &cobra.Command{
		Use:   "serve --model M [--port 8000]",
		Short: "Serve a model over an OpenAI-compatible HTTP API",
		Long: `Serve loads a GGUF model, runs the continuous-batching engine and answers
POST /v1/completions, POST /v1/chat/completions, GET /v1/models, GET /health
and GET /metrics (Prometheus). SIGINT or SIGTERM stops taking requests, lets
running ones finish for --shutdown-grace, then ends the rest.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if port < 0 || port > 65535 {
				return fmt.Errorf("--port %d is out of range 0..65535", port)
			}
			var log *slog.Logger
			switch logFormat {
			case "text":
				log = slog.New(slog.NewTextHandler(os.Stderr, nil))
			case "json":
				log = slog.New(slog.NewJSONHandler(os.Stderr, nil))
			default:
				return fmt.Errorf("--log-format %q is not supported: use text or json", logFormat)
			}
			kvType, err := ef.kvDType()
			if err != nil {
				return err
			}
			cfg.KVType, cfg.PageTokens = kvType, ef.pageTokens
			r, pool, closeAll, err := ef.open()
			if err != nil {
				return err
			}
			defer closeAll()
			e, err := engine.New(r, cfg, log)
			if err != nil {
				return fmt.Errorf("start engine: %w", err)
			}
			defer e.Close()

			reg := prometheus.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
			srv := server.New(server.EngineBackend(e), server.Options{ModelName: name, Logger: log, Registry: reg, MaxBodyBytes: maxBody})
			hs := srv.HTTPServer(net.JoinHostPort(host, strconv.Itoa(port)))
			ln, err := net.Listen("tcp", hs.Addr)
			if err != nil {
				return fmt.Errorf("listen on %s: %w", hs.Addr, err)
			}
			errc := make(chan error, 1)
			go func() { errc <- hs.Serve(ln) }()
			srv.SetReady(true)
			m := e.Model().Config
			log.Info("serving", "addr", "http://"+ln.Addr().String(), "model", ef.model, "arch", m.Arch,
				"context", e.MaxContext(), "threads", pool.Threads(), "kv_pages", e.Config().Pages)

			select {
			case err := <-errc:
				return fmt.Errorf("serve http: %w", err)
			case <-cmd.Context().Done():
			}
			log.Info("shutting down: no new requests; waiting for running ones", "grace", grace)
			srv.SetReady(false)
			ctx, cancel := context.WithTimeout(context.Background(), grace)
			defer cancel()
			if err := hs.Shutdown(ctx); err != nil {
				log.Warn("requests still running after the grace period; ending them", "err", err)
				e.Close() // fails the remaining sequences: their handlers send an error and return
				ctx2, cancel2 := context.WithTimeout(context.Background(), 2*time.Second)
				hs.Shutdown(ctx2) // let them write it
				cancel2()
				hs.Close()
			}
			if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("serve http: %w", err)
			}
			return nil
		},
	}
	ef.register(cmd.Flags())
	fs := cmd.Flags()
	fs.StringVar(&host, "host", "127.0.0.1", "address to listen on (0.0.0.0: all interfaces)")
	fs.IntVar(&port, "port", 8000, "TCP port to listen on (0: any free port)")
	fs.StringVar(&name, "model-name", "", "model id to serve under (default: the model's general.name)")
	fs.IntVar(&cfg.Pages, "kv-pages", 0, "pages in the KV cache (0: enough for 4 full contexts)")
	fs.IntVar(&cfg.MaxBatchTokens, "max-batch-tokens", 512, "tokens per engine step (decode and prefill chunks together)")
	fs.IntVar(&cfg.MaxRunning, "max-running", 64, "sequences in the running batch")
	fs.IntVar(&cfg.MaxWaiting, "max-waiting", 256, "queued sequences before requests get 429")
	fs.BoolVar(&cfg.PrefixCache, "prefix-cache", true, "share full prompt pages between requests")
	fs.Int64Var(&maxBody, "max-body-bytes", server.DefaultMaxBodyBytes, "largest request body accepted (413 above it)")
	fs.DurationVar(&grace, "shutdown-grace", 30*time.Second, "how long running requests may finish after SIGINT/SIGTERM")
	fs.StringVar(&logFormat, "log-format", "text", "log format on stderr: text or json")
	return cmd
}
