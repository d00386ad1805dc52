package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"

	"tandem/internal/bench"
	"tandem/internal/engine/grammar"
)

func benchCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "bench", Short: "Measure the engine or a serving endpoint"}
	cmd.AddCommand(benchEngineCmd(), benchServeCmd(), benchMemoryCmd())
	return cmd
}

func benchEngineCmd() *cobra.Command {
	var (
		ef      engineFlags
		o       bench.EngineOptions
		format  string
		prof    string
		schema  string
		compact bool
	)
	cmd := &cobra.Command{
		Use:   "engine --model M --prompt-tokens P --gen-tokens G [--batch N] [--json-schema FILE]",
		Short: "Print prefill and decode tokens per second for a batch of sequences, plain or constrained by a JSON schema",
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
			if schema != "" {
				b, err := os.ReadFile(schema)
				if err != nil {
					return fmt.Errorf("read --json-schema: %w", err)
				}
				if o.Grammar, err = grammar.Compile(b, grammar.Options{DisableAnyWhitespace: compact}); err != nil {
					return fmt.Errorf("--json-schema %s: %w", schema, err)
				}
			}
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
			fmt.Fprintf(w, "model %s, %d threads, %s kernels, batch %d\n", res.Model, res.Threads, res.Kernels, res.Batch)
			sh := func(s bench.Shares) string {
				return fmt.Sprintf("matmul %4.1f%%  attention %4.1f%%  other %4.1f%%", 100*s.MatMul, 100*s.Attention, 100*s.Other)
			}
			fmt.Fprintf(w, "prefill  %5d tokens  %8.3f s  %9.2f tok/s   %s\n", res.Batch*res.PromptTokens, res.PrefillS, res.PrefillTokS, sh(res.PrefillShares))
			fmt.Fprintf(w, "decode   %5d tokens  %8.3f s  %9.2f tok/s   %s  (choosing tokens %.3f s)\n", res.Batch*res.GenTokens, res.DecodeS, res.DecodeTokS, sh(res.DecodeShares), res.SampleS)
			if res.Constrained {
				fmt.Fprintf(w, "grammar  %5d documents  masks and accepts %.3f s  vocabulary index %.3f s (once)\n", res.Documents, res.ConstraintS, res.VocabS)
			}
			return nil
		},
	}
	ef.register(cmd.Flags())
	fs := cmd.Flags()
	fs.IntVar(&o.PromptTokens, "prompt-tokens", 512, "prompt length, prefilled in one step")
	fs.IntVar(&o.GenTokens, "gen-tokens", 128, "tokens to decode after the prompt")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed for the random prompts and the draws")
	fs.IntVar(&o.Batch, "batch", 1, "sequences decoded together")
	fs.Float32Var(&o.Temperature, "temperature", 0, "sampling temperature (0: greedy)")
	fs.StringVar(&schema, "json-schema", "", "constrain every sequence by this JSON schema file (a completed document starts another)")
	fs.BoolVar(&compact, "compact", false, "with --json-schema: no whitespace between JSON tokens (disable_any_whitespace)")
	fs.StringVar(&format, "format", "text", "output: text or json")
	fs.StringVar(&prof, "cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof)")
	return cmd
}

func benchMemoryCmd() *cobra.Command {
	var (
		o      bench.MemoryOptions
		size   = byteSize(2 << 30)
		format string
	)
	cmd := &cobra.Command{
		Use:   "memory [--size 2GiB] [--threads N] [--passes 5]",
		Short: "Print this machine's streaming read bandwidth, the bound on decode speed (decode reads the active weights once a step)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "text" && format != "json" {
				return fmt.Errorf("--format %q is not supported: use text or json", format)
			}
			o.Bytes = int(size)
			if int64(o.Bytes) != int64(size) {
				return fmt.Errorf("--size %d is too large", int64(size))
			}
			res, err := bench.Memory(cmd.Context(), o)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if format == "json" {
				return json.NewEncoder(w).Encode(res)
			}
			fmt.Fprintf(w, "%d threads, %.2f GiB buffer: median %.1f GB/s, best %.1f GB/s, passes", res.Threads, float64(res.Bytes)/(1<<30), res.Median, res.Best)
			for _, r := range res.PassGBs {
				fmt.Fprintf(w, " %.1f", r)
			}
			fmt.Fprintf(w, "\nmethod: %s\n", res.Method)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.Var(&size, "size", "buffer to stream (larger than the caches: 2GiB, 512MiB, ...)")
	fs.IntVar(&o.Threads, "threads", 1, "goroutines reading the buffer, each a contiguous share")
	fs.IntVar(&o.Passes, "passes", 5, "timed passes over the buffer")
	fs.StringVar(&format, "format", "text", "output: text or json")
	return cmd
}
