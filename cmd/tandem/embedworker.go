package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/pflag"

	"tandem/internal/api/leg"
	"tandem/internal/embed"
	"tandem/internal/engine/gguf"
	"tandem/internal/engine/kernels"
	"tandem/internal/engine/model"
	"tandem/internal/pd/room"
	"tandem/internal/pd/worker"
	"tandem/internal/router/pool"
	"tandem/internal/server"
)

// embedFlags are the embedding service's flags (serve and the workers).
type embedFlags struct {
	batchInputs int
	batchTokens int
	queueInputs int
	dims        string
}

func (f *embedFlags) register(fs *pflag.FlagSet) {
	fs.IntVar(&f.batchInputs, "embed-batch-inputs", embed.DefaultMaxBatchInputs, "embedding models: inputs per forward pass")
	fs.IntVar(&f.batchTokens, "embed-batch-tokens", embed.DefaultMaxBatchTokens, "embedding models: tokens per forward pass (also the longest input)")
	fs.IntVar(&f.queueInputs, "embed-queue-inputs", embed.DefaultMaxQueueInputs, "embedding models: inputs that may wait before requests get 429")
	fs.StringVar(&f.dims, "embed-dimensions", "", "embedding models: comma-separated truncated lengths the model was trained for (Matryoshka), allowed as the request's dimensions "+
		"(default: known by the model's name, nomic-embed-text-v1.5 and Qwen3-Embedding; else none)")
}

func (f *embedFlags) parseDims() ([]int, error) {
	if f.dims == "" {
		return nil, nil
	}
	var out []int
	for _, s := range strings.Split(f.dims, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--embed-dimensions: %q is not a positive integer", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// isEmbeddingModel resolves --model and reports whether it is an embedding
// model (see embed.IsEmbeddingFile), with the resolved path.
func isEmbeddingModel(ctx context.Context, ef *engineFlags) (bool, string, error) {
	if ef.model == "" {
		return false, "", nil // open reports the missing flag
	}
	path, err := resolveModel(ctx, ef.model)
	if err != nil {
		return false, "", err
	}
	ok, err := embed.IsEmbeddingFile(path)
	return ok, path, err
}

// runEmbeddingWorker serves an embedding model: /v1/embeddings (the
// generation endpoints answer 400), /health, /ready, /metrics, until ctx
// is done, then drains. On a prefill or decode worker (pd set) embeddings
// need the cluster credential, as /tokenize does: the router sends them;
// its /pd/info (credential too) says the model only embeds, so that the
// router answers generation requests with the same 400 as the worker.
func runEmbeddingWorker(ctx context.Context, f *workerFlags, ebf *embedFlags, path string, role room.Role, pd *pdFlags, log *slog.Logger) error {
	if err := kernels.SetLevelByName(f.ef.level); err != nil {
		return fmt.Errorf("--kernel-level: %w", err)
	}
	dims, err := ebf.parseDims()
	if err != nil {
		return err
	}
	open := embed.Open
	if !f.ef.mmap {
		open = embed.OpenInMemory
	}
	m, err := open(path, f.ef.threads, ebf.batchTokens, ebf.batchInputs, dims)
	if err != nil {
		return err
	}
	defer m.Close()
	svc := embed.New(m.Runner, m.Info, embed.Config{MaxBatchInputs: ebf.batchInputs, MaxBatchTokens: ebf.batchTokens, MaxQueueInputs: ebf.queueInputs})
	defer svc.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := svc.Register(reg); err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	so := server.Options{ModelName: f.name, Logger: log, Registry: reg, MaxBodyBytes: f.maxBody, APIKey: f.apiKey, Embeddings: svc}
	if pd != nil {
		tok, err := pd.token()
		if err != nil {
			return err
		}
		if so.LegKeys, err = leg.NewKeys(tok); err != nil {
			return err
		}
	}
	b := server.EmbeddingBackend(svc.Info(), m.Tokenizer)
	if so.LegKeys != nil {
		so.Legs = b.(server.Legs) // generation legs get the backend's 400
		so.Mounts = map[string]http.Handler{"/pd/": so.LegKeys.RequireCredential(embedPDHandler(role, svc, worker.NewInstanceID()))}
	}
	srv := server.New(b, so)
	hs, err := serveHTTP(srv, f.host, f.port)
	if err != nil {
		return err
	}
	in := svc.Info()
	log.Info("serving embeddings", "addr", "http://"+hs.addr, "model", f.ef.model, "arch", in.Arch, "dim", in.Dim,
		"pooling", in.Pooling.String(), "max_input_tokens", in.Context, "batch_inputs", svc.Config().MaxBatchInputs)
	if err := hs.wait(ctx); err != nil {
		return err
	}
	dc := f.drain.config(ctx)
	dc.Logger = log
	dc.Refusing = func() { hs.hs.SetKeepAlivesEnabled(false) }
	res := srv.Gate().Drain(dc)
	svc.Close() // requests still waiting end with ErrClosed (503)
	if err := hs.stop(log); err != nil {
		return err
	}
	log.Info("stopped", "settled", res.Settled, "drained", res.Drained, "ended_at_deadline", res.Left)
	return nil
}

// embedPDHandler serves an embedding worker's side of what the router
// and discovery ask a worker (package pool's Info and Status):
//
//	GET /pd/info    role, model, instance, embeddings_only (no transfer
//	                address: the worker moves no KV cache)
//	GET /pd/status  role, the service's load (waiting: queued inputs;
//	                running: inputs of the batch computing), instance
//
// The router picks the least loaded worker for /v1/embeddings by
// waiting+running, holds the role against the one it was given, and sees a
// restart by a new instance. Pages and rooms stay 0 (no KV cache is kept
// between requests) and prefill_queue_tokens and kv_usage are left out:
// the router then ranks by load and reports no KV use for the worker.
func embedPDHandler(role room.Role, svc *embed.Service, instance string) http.Handler {
	writeJSON := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /pd/info", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, pool.Info{Role: role.String(), Model: svc.Info().Name, Instance: instance, EmbeddingsOnly: true})
	})
	mux.HandleFunc("GET /pd/status", func(w http.ResponseWriter, _ *http.Request) {
		waiting, running := svc.Load()
		writeJSON(w, pool.Status{Role: role.String(), Waiting: waiting, Running: running, Instance: instance})
	})
	return mux
}

// printEncoderInfo is `tandem model info` for an encoder file.
func printEncoderInfo(w io.Writer, f *gguf.File) {
	c, err := model.EncoderConfigFromMetadata(f)
	if err != nil {
		fmt.Fprintf(w, "architecture  %s (tandem cannot run it: %v)\n", f.Architecture(), err)
		return
	}
	fmt.Fprintf(w, "name          %s\n", c.Name)
	fmt.Fprintf(w, "architecture  %s (embedding encoder: bidirectional attention, no generation)\n", c.Arch)
	fmt.Fprintf(w, "embedding     %d\n", c.Dim)
	fmt.Fprintf(w, "layers        %d\n", c.Layers)
	fmt.Fprintf(w, "heads         %d (kv %d, head dim %d)\n", c.Heads, c.KVHeads, c.HeadDim)
	fmt.Fprintf(w, "feed forward  %d\n", c.FF)
	fmt.Fprintf(w, "context       %d\n", c.Context)
	if c.RopeDim > 0 {
		fmt.Fprintf(w, "rope          neox, %d dims, base %g\n", c.RopeDim, c.RopeBase)
	} else {
		fmt.Fprintf(w, "positions     absolute (position_embd)\n")
	}
	fmt.Fprintf(w, "norm eps      %g (layer norm)\n", c.NormEps)
	fmt.Fprintf(w, "pooling       %s, L2-normalized (tandem serve answers /v1/embeddings)\n", c.Pooling)
}

func errSuffix(err error) string {
	if err != nil {
		return ": " + err.Error()
	}
	return ""
}
