package main

import (
	"os"

	"github.com/spf13/cobra"

	"tandem/internal/pd/room"
)

func serveCmd() *cobra.Command {
	var f workerFlags
	cmd := &cobra.Command{
		Use:   "serve --model M [--port 8000]",
		Short: "Serve a model over an OpenAI-compatible HTTP API (colocated prefill and decode)",
		Long: `Serve loads a GGUF model, runs the continuous-batching engine and answers
POST /v1/completions, POST /v1/chat/completions, GET /v1/models, GET /health
(liveness), GET /ready (readiness) and GET /metrics (Prometheus). With
--api-key (or $TANDEM_API_KEY) every /v1/* request needs
"Authorization: Bearer KEY"; /health, /ready and /metrics stay open.

SIGINT or SIGTERM drains: /ready answers 503 at once, requests are still
served for --drain-settle (a second signal ends that window), then new ones
get 503 (code "draining", Retry-After) while running ones have
--drain-timeout to finish; what is left then ends with an error, and the
process exits 0 (see docs/operations.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.apiKey == "" {
				f.apiKey = os.Getenv("TANDEM_API_KEY")
			}
			return runWorker(cmd.Context(), cmd.Flags(), &f, 0, nil)
		},
	}
	f.register(cmd.Flags(), 8000)
	cmd.Flags().StringVar(&f.apiKey, "api-key", "", "require this key as \"Authorization: Bearer KEY\" on /v1/* (default: $TANDEM_API_KEY; none: open)")
	return cmd
}

func prefillCmd() *cobra.Command { return pdWorkerCmd(room.RolePrefill) }
func decodeCmd() *cobra.Command  { return pdWorkerCmd(room.RoleDecode) }

func pdWorkerCmd(role room.Role) *cobra.Command {
	var (
		f  workerFlags
		pd pdFlags
	)
	name := role.String()
	what := map[room.Role]string{
		room.RolePrefill: "runs prompts and pushes their KV cache, page by page, into the pages a decode worker reserved",
		room.RoleDecode:  "reserves pages, receives the prompt's KV cache from a prefill worker and generates in its continuous batch",
	}[role]
	cmd := &cobra.Command{
		Use:   name + " --model M --port P",
		Short: "Run a " + name + " worker of a disaggregated cluster",
		Long: "A " + name + " worker " + what + ".\n" +
			"It serves the same HTTP API as `tandem serve`, but only to its router: a generation request without the\n" +
			"router's leg signature gets 401, and /pd/* and /debug/* need the cluster credential (see docs/security.md).\n" +
			"Peers and the router authenticate with the cluster token ($TANDEM_CLUSTER_TOKEN or --cluster-token-file).\n" +
			"SIGINT or SIGTERM drains it as `tandem serve` (see docs/operations.md): /ready answers 503 at once, legs are\n" +
			"served for --drain-settle, then refused with 503 (code \"draining\"), which the router retries on another worker;\n" +
			"the rooms held (a prefill worker's KV sends, a decode worker's streams) have --drain-timeout to end.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runWorker(cmd.Context(), cmd.Flags(), &f, role, &pd)
		},
	}
	f.register(cmd.Flags(), 0)
	pd.register(cmd.Flags())
	return cmd
}
