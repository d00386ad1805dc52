package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/pflag"

	"tandem/internal/engine"
	"tandem/internal/telemetry"
)

// obsFlags are the logging and tracing flags of the serving commands
// (serve, prefill, decode, route).
type obsFlags struct {
	logFormat     string
	logLevel      string
	otlpEndpoint  string
	traceSample   float64
	statsInterval time.Duration // workers only
}

func (f *obsFlags) register(fs *pflag.FlagSet, engineStats bool) {
	fs.StringVar(&f.logFormat, "log-format", "text", "log format on stderr: text or json")
	fs.StringVar(&f.logLevel, "log-level", "info", "least severe log lines written: debug, info, warn or error")
	fs.StringVar(&f.otlpEndpoint, "otlp-endpoint", "", "export traces over OTLP to this collector (http://host:4318, or host:4317 with $"+
		telemetry.EnvProtocol+"=grpc); default $"+telemetry.EnvEndpoint+"; none: tracing off")
	fs.Float64Var(&f.traceSample, "trace-sample", 1, "fraction of new traces recorded when tracing is on (0..1); a client's traceparent keeps its own sampling decision")
	if engineStats {
		fs.DurationVar(&f.statsInterval, "stats-interval", 10*time.Second, "log an \"engine stats\" line this often (throughput, running, waiting, KV use), as vLLM does; 0: never")
	}
}

// logger builds the process's logger from --log-format and --log-level.
func (f *obsFlags) logger() (*slog.Logger, error) {
	return telemetry.NewLogger(os.Stderr, f.logFormat, f.logLevel)
}

// tracing sets up the process's tracing for role; its Shutdown, deferred,
// flushes what is buffered (within endGrace).
func (f *obsFlags) tracing(ctx context.Context, log *slog.Logger, role, instance string) (*telemetry.Tracing, func(), error) {
	t, err := telemetry.Setup(ctx, telemetry.Config{Endpoint: f.otlpEndpoint, SampleRatio: f.traceSample, Role: role, Instance: instance})
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: %w", err)
	}
	if t.Enabled() {
		log.Info("tracing", "export", t.String())
	}
	return t, func() {
		sctx, cancel := context.WithTimeout(context.Background(), endGrace)
		defer cancel()
		if err := t.Shutdown(sctx); err != nil {
			log.Warn("tracing: spans not exported at exit", "err", err)
		}
	}, nil
}

// engineStats logs the engine's periodic stats line until ctx ends.
func (f *obsFlags) engineStats(ctx context.Context, log *slog.Logger, e *engine.Engine) {
	if f.statsInterval <= 0 {
		return
	}
	if f.statsInterval < 100*time.Millisecond {
		f.statsInterval = 100 * time.Millisecond
	}
	go telemetry.RunStats(ctx, log, f.statsInterval, func() telemetry.EngineStats {
		st := e.Stats()
		return telemetry.EngineStats{PromptTokens: st.PromptTokens, GeneratedTokens: st.GeneratedTokens, PrefixHitTokens: st.PrefixHitTokens,
			Running: st.Running, Waiting: st.Waiting, KVUsage: st.KVUsage()}
	})
}
