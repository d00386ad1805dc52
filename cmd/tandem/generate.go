package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/sample"
	"tandem/internal/generate"
)

func generateCmd() *cobra.Command {
	var (
		ef     engineFlags
		prompt string
		format string
		maxTok int
		sp     sample.Params
	)
	cmd := &cobra.Command{
		Use:   "generate --model M --prompt P",
		Short: "Continue a prompt with a model and stream the text",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "text" && format != "json" {
				return fmt.Errorf("--format %q is not supported: use text or json", format)
			}
			kvType, err := ef.kvDType()
			if err != nil {
				return err
			}
			r, _, closeAll, err := ef.open(cmd.Context())
			if err != nil {
				return err
			}
			defer closeAll()
			m := r.Model()
			pt := ef.pageTokens
			kv, err := kvcache.New(m.CacheConfig(pt, (m.Config.Context+pt-1)/pt, kvType))
			if err != nil {
				return err
			}
			opts := generate.Options{MaxTokens: maxTok, Sample: sp, AddSpecial: true}
			out := cmd.OutOrStdout()
			if format == "text" {
				opts.OnText = func(s string) { fmt.Fprint(out, s) }
			}
			res, err := generate.Run(cmd.Context(), r, kv, prompt, opts)
			if err != nil {
				return err
			}
			if format == "json" {
				return json.NewEncoder(out).Encode(struct {
					PromptIDs    []int32 `json:"prompt_ids"`
					IDs          []int32 `json:"ids"`
					Text         string  `json:"text"`
					FinishReason string  `json:"finish_reason"`
				}{res.PromptIDs, res.IDs, res.Text, res.FinishReason})
			}
			fmt.Fprintln(out)
			return nil
		},
	}
	ef.register(cmd.Flags())
	fs := cmd.Flags()
	fs.StringVar(&prompt, "prompt", "", "text to continue")
	fs.StringVar(&format, "format", "text", "output: text (streamed) or json")
	fs.IntVar(&maxTok, "max-tokens", 128, "tokens to generate at most")
	fs.Float32Var(&sp.Temperature, "temperature", 0.8, "sampling temperature (0: greedy)")
	fs.IntVar(&sp.TopK, "top-k", 40, "keep the k most likely tokens (0: off)")
	fs.Float32Var(&sp.TopP, "top-p", 0.95, "nucleus sampling mass (1: off)")
	fs.Float32Var(&sp.MinP, "min-p", 0.05, "drop tokens below this fraction of the best one's probability (0: off)")
	fs.Float32Var(&sp.RepeatPenalty, "repeat-penalty", 1, "repetition penalty (1: off)")
	fs.Float32Var(&sp.PresencePenalty, "presence-penalty", 0, "presence penalty")
	fs.Float32Var(&sp.FrequencyPenalty, "frequency-penalty", 0, "frequency penalty")
	fs.Uint64Var(&sp.Seed, "seed", 0, "sampling seed (same seed, same output)")
	return cmd
}
