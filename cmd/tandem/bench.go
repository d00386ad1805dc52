package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"

	"tandem/internal/bench"
)

func benchCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "bench", Short: "Measure the engine or a serving endpoint"}
	cmd.AddCommand(benchEngineCmd(), benchServeCmd())
	return cmd
}

func benchEngineCmd() *cobra.Command {
	var (
		ef     engineFlags
		o      bench.EngineOptions
		format string
		prof   string
	)
	cmd := &cobra.Command{
		Use:   "engine --model M --prompt-tokens P --gen-tokens G",
		Short: "Print prefill and decode tokens per second for one sequence",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "text" && format != "json" {
				return fmt.Errorf("--format %q is not supported: use text or json", format)
			}
			var err error
			if o.KVType, err = ef.kvDType(); err != nil {
				return err
			}
			o.PageTokens = ef.pageTokens
			r, pool, closeAll, err := ef.open(cmd.Context())
			if err != nil {
				return err
			}
			defer closeAll()
			if prof != "" {
				f, err := os.Create(prof)
				if err != nil {
					return fmt.Errorf("create --cpuprofile file: %w", err)
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return fmt.Errorf("start cpu profile: %w", err)
				}
				defer pprof.StopCPUProfile()
			}
			res, err := bench.Engine(cmd.Context(), r, pool.Threads(), o)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if format == "json" {
				return json.NewEncoder(w).Encode(res)
			}
			fmt.Fprintf(w, "model %s, %d threads\n", res.Model, res.Threads)
			sh := func(s bench.Shares) string {
				return fmt.Sprintf("matmul %4.1f%%  attention %4.1f%%  other %4.1f%%", 100*s.MatMul, 100*s.Attention, 100*s.Other)
			}
			fmt.Fprintf(w, "prefill  %5d tokens  %8.3f s  %9.2f tok/s   %s\n", res.PromptTokens, res.PrefillS, res.PrefillTokS, sh(res.PrefillShares))
			fmt.Fprintf(w, "decode   %5d tokens  %8.3f s  %9.2f tok/s   %s\n", res.GenTokens, res.DecodeS, res.DecodeTokS, sh(res.DecodeShares))
			return nil
		},
	}
	ef.register(cmd.Flags())
	fs := cmd.Flags()
	fs.IntVar(&o.PromptTokens, "prompt-tokens", 512, "prompt length, prefilled in one step")
	fs.IntVar(&o.GenTokens, "gen-tokens", 128, "tokens to decode after the prompt")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed for the random prompt")
	fs.StringVar(&format, "format", "text", "output: text or json")
	fs.StringVar(&prof, "cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof)")
	return cmd
}
