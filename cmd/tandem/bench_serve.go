package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"tandem/internal/loadgen"
)

func benchServeCmd() *cobra.Command {
	var (
		o      loadgen.Options
		format string
	)
	cmd := &cobra.Command{
		Use:   "serve --url URL [--concurrency C] [--requests N] [--prompt-tokens P] [--gen-tokens G]",
		Short: "Load-test an OpenAI-compatible /v1/completions endpoint (Tandem, vLLM, llama.cpp server...)",
		Long: `Sends --requests completion requests from --concurrency workers to URL/v1/completions
(temperature 0, max_tokens --gen-tokens, ignore_eos, a prompt of about --prompt-tokens random words)
and reports request and token throughput and TTFT, inter-token and end-to-end latency percentiles.
Token counts come from the server's usage when it sends usage. Progress goes to stderr; Ctrl-C stops
the run and reports what completed. Exits with status 1 when any request failed or the run was
interrupted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "text" && format != "json" {
				return fmt.Errorf("--format %q is not supported: use text or json", format)
			}
			if o.URL == "" {
				return fmt.Errorf("--url is required: the server's base address, e.g. http://127.0.0.1:8000")
			}
			if o.Timeout <= 0 {
				return fmt.Errorf("--timeout %v must be positive", o.Timeout)
			}
			for _, f := range []struct {
				name string
				v    int
			}{{"concurrency", o.Concurrency}, {"requests", o.Requests}, {"prompt-tokens", o.PromptTokens}, {"gen-tokens", o.GenTokens}} {
				if f.v < 1 {
					return fmt.Errorf("--%s %d must be at least 1", f.name, f.v)
				}
			}
			rep, err := loadgen.Run(cmd.Context(), o, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if format == "json" {
				err = json.NewEncoder(w).Encode(rep)
			} else {
				err = rep.WriteText(w)
			}
			if err != nil {
				return fmt.Errorf("write report: %w", err)
			}
			if rep.Interrupted {
				return fmt.Errorf("interrupted: %d of %d requests did not run to the end", rep.Requests-rep.Completed-rep.Failed, rep.Requests)
			}
			if rep.Failed > 0 {
				return fmt.Errorf("%d of %d requests failed (see errors in the report)", rep.Failed, rep.Requests)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.URL, "url", "", "server base address, e.g. http://127.0.0.1:8000 (a trailing /v1 is dropped)")
	fs.StringVar(&o.Model, "model", "", "model id to request (default: the first one GET /v1/models lists)")
	fs.StringVar(&o.APIKey, "api-key", "", "sent as a Bearer token when set")
	fs.IntVar(&o.Concurrency, "concurrency", 8, "requests in flight at once")
	fs.IntVar(&o.Requests, "requests", 64, "requests to send in all")
	fs.IntVar(&o.PromptTokens, "prompt-tokens", 256, "prompt length in words (about one token each)")
	fs.IntVar(&o.GenTokens, "gen-tokens", 128, "max_tokens of each request")
	fs.BoolVar(&o.Stream, "stream", true, "stream the responses (without streaming TTFT equals end-to-end latency)")
	fs.BoolVar(&o.IgnoreEOS, "ignore-eos", true, `send "ignore_eos": true so each request generates --gen-tokens tokens`)
	fs.Uint64Var(&o.Seed, "seed", 1, "seed for the random prompts")
	fs.DurationVar(&o.Timeout, "timeout", 5*time.Minute, "limit for each request")
	fs.StringVar(&format, "format", "text", "output: text or json")
	return cmd
}
