package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"tandem/internal/engine/gguf"
	"tandem/internal/engine/tokenizer"
	"tandem/internal/loadgen"
)

func benchServeCmd() *cobra.Command {
	var (
		o                      loadgen.Options
		format, resultFile     string
		dataset, mixed, dsPath string
		randIn, randOut        int
		rangeRatio             float64
		goodput                []string
		pctMetrics, metricPcts string
		numPrompts             int
		sweepRates, plotFile   string
		backend, tokenizerRef  string
		sharegptOut            int
	)
	cmd := &cobra.Command{
		Use:   "serve --url URL [--backend openai|openai-chat] [--concurrency C] [--requests N] [--dataset-name random|mixed|sharegpt] ...",
		Short: "Load-test an OpenAI-compatible completions or chat endpoint (Tandem, vLLM, llama.cpp server...)",
		Long: `Sends --requests completion requests from --concurrency workers to URL/v1/completions
(temperature 0, max_tokens --gen-tokens, ignore_eos, a prompt of about --prompt-tokens random words)
and reports request and token throughput and TTFT, inter-token and end-to-end latency percentiles.
--backend openai-chat (vLLM's name) sends chat completions to URL/v1/chat/completions instead: the
prompt as one user message, max_completion_tokens, so the server's chat template applies; TTFT then
counts reasoning text as output too. --endpoint PATH changes the path (it must end in
chat/completions for openai-chat, and must not for openai).
Token counts come from the server's usage when it sends usage. Progress goes to stderr; Ctrl-C stops
the run and reports what completed. Exits with status 1 when any request failed or the run was
interrupted.

Open loop (vLLM's conventions): --request-rate R sends requests at R per second whatever is in
flight (inf: all at once), with Poisson intervals, or gamma intervals of shape --burstiness; the
schedule is seeded by --seed. --max-concurrency caps the requests in flight under it. Without
--request-rate the run is the closed loop of --concurrency workers.

Datasets: by default every prompt has --prompt-tokens words and max_tokens --gen-tokens.
--dataset random draws lengths from [L(1-r), L(1+r)] with L --random-input-len/--random-output-len
and r --random-range-ratio. --dataset mixed --mixed SPEC has classes of their own lengths and shares:
SPEC is "NAME:share=S,in=N|A-B,out=N|A-B" joined by ";", e.g.
  --mixed "long:share=0.25,in=1000,out=16;short:share=0.75,in=30,out=96-128"
--dataset-path FILE reads JSONL lines {"prompt": "...", "max_tokens": N, "class": "..."} (class
optional), shuffled by --seed and reused when fewer than --requests.
--dataset-name sharegpt --dataset-path FILE reads a ShareGPT file as vLLM does: a JSON array of
{"conversations": [{"from": "human", "value": ...}, {"from": "gpt", "value": ...}, ...]}; entries
shuffled by --seed, the first turn sent as the prompt, max_tokens the token count of the second
(--sharegpt-output-len N fixes it), entries with a prompt under 4 or over 1024 tokens, an output
under 4, or more than 2048 together skipped. Tokens are counted with the server's POST /tokenize
(Tandem and vLLM have it), or with --tokenizer MODEL (a GGUF path or hub reference) locally.
A malformed file is an error naming the entry, its line and what is wrong.
--dataset-name is vLLM's name for --dataset.

Metrics as vLLM: TTFT, TPOT = (e2el - ttft) / (output_tokens - 1), ITL, E2EL, with
--percentile-metrics and --metric-percentiles. --goodput "ttft:MS tpot:MS e2el:MS" counts a request
good when it meets every objective; "CLASS.METRIC:MS" applies to one class, and itl:MS bounds the
longest gap between chunks. --format json or --result-file F writes vLLM's field names
(completed, request_goodput, mean_ttft_ms, p99_ttft_ms, ...) with a "classes" block per class.

--sweep-rates R1,R2,... runs the benchmark once per rate and reports DistServe's goodput, the
highest rate at which at least 90% of the requests met every --goodput objective; --plot F.svg
draws attainment and p90 TTFT against rate. Its JSON is {"goodput_rate", "goodput_slos",
"points": [{"request_rate", "attainment", "p90_ttft_ms", "result": {...}}]}. Every rate sends
the same prompts, so run the server without its prefix cache (tandem: --prefix-cache=false),
or every rate after the first finds its prompts cached.`,
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
			if cmd.Flags().Changed("num-prompts") {
				o.Requests = numPrompts
			}
			switch backend {
			case "openai", "vllm":
			case "openai-chat":
				o.Chat = true
			default:
				return fmt.Errorf("--backend %q is not supported: use openai (completions; vllm is the same) or openai-chat (chat completions)", backend)
			}
			if o.Endpoint == "" {
				o.Endpoint = loadgen.DefaultEndpoint
				if o.Chat {
					o.Endpoint = loadgen.DefaultChatEndpoint
				}
			}
			if dataset == "sharegpt" {
				if dsPath == "" {
					return fmt.Errorf("--dataset-name sharegpt needs --dataset-path FILE (e.g. ShareGPT_V3_unfiltered_cleaned_split.json)")
				}
				if sharegptOut < 0 {
					return fmt.Errorf("--sharegpt-output-len %d must be positive (0: the answer's own length)", sharegptOut)
				}
				count, err := shareGPTCounter(cmd, o, tokenizerRef)
				if err != nil {
					return err
				}
				if o.Items, err = loadgen.ReadShareGPTFile(cmd.Context(), dsPath, o.Requests, o.Seed, sharegptOut, count); err != nil {
					return err
				}
				dataset, dsPath = "", ""
			} else if tokenizerRef != "" || sharegptOut != 0 {
				return fmt.Errorf("--tokenizer and --sharegpt-output-len are for --dataset-name sharegpt")
			}
			if err := benchOptions(&o, dataset, mixed, dsPath, randIn, randOut, rangeRatio, goodput, pctMetrics, metricPcts); err != nil {
				return err
			}
			if sweepRates != "" {
				return runSweep(cmd, o, sweepRates, plotFile, format, resultFile)
			}
			if plotFile != "" {
				return fmt.Errorf("--plot needs --sweep-rates")
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
			if resultFile != "" {
				b, err := json.MarshalIndent(rep, "", "  ")
				if err != nil {
					return fmt.Errorf("encode result: %w", err)
				}
				if err := os.WriteFile(resultFile, append(b, '\n'), 0o644); err != nil {
					return fmt.Errorf("write --result-file: %w", err)
				}
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
	fs.StringVar(&resultFile, "result-file", "", "also write the JSON result (vLLM's field names) to this file")
	fs.IntVar(&numPrompts, "num-prompts", 0, "vLLM's name for --requests")
	fs.Float64Var(&o.RequestRate, "request-rate", 0, "open-loop arrivals at this many requests/s (inf: all at once); 0: closed loop of --concurrency workers")
	fs.Float64Var(&o.Burstiness, "burstiness", 1, "gamma shape of open-loop intervals: 1 is Poisson, below 1 burstier")
	fs.IntVar(&o.MaxConcurrency, "max-concurrency", 0, "cap on requests in flight under --request-rate (0: none)")
	fs.StringVar(&dataset, "dataset", "", "random, mixed or sharegpt (default: --prompt-tokens words, --gen-tokens out)")
	fs.StringVar(&dataset, "dataset-name", "", "vLLM's name for --dataset")
	fs.StringVar(&dsPath, "dataset-path", "", `JSONL file of {"prompt": "...", "max_tokens": N, "class": "..."}, or with --dataset-name sharegpt a ShareGPT JSON file`)
	fs.StringVar(&backend, "backend", "openai", "openai (completions) or openai-chat (chat completions, the server's chat template)")
	fs.StringVar(&o.Endpoint, "endpoint", "", "path to POST to (default /v1/completions, or /v1/chat/completions for openai-chat)")
	fs.StringVar(&tokenizerRef, "tokenizer", "", "sharegpt: count tokens with this GGUF's tokenizer (path or hub reference) instead of the server's /tokenize")
	fs.IntVar(&sharegptOut, "sharegpt-output-len", 0, "sharegpt: max_tokens of every request (0: the token count of the conversation's answer)")
	fs.IntVar(&randIn, "random-input-len", 0, "random dataset: prompt words (default --prompt-tokens)")
	fs.IntVar(&randOut, "random-output-len", 0, "random dataset: max_tokens (default --gen-tokens)")
	fs.Float64Var(&rangeRatio, "random-range-ratio", 0, "random dataset: lengths uniform in [L(1-r), L(1+r)]")
	fs.StringVar(&mixed, "mixed", "", `mixed dataset classes, e.g. "long:share=0.25,in=1000,out=16;short:share=0.75,in=30,out=96-128"`)
	fs.StringArrayVar(&goodput, "goodput", nil, `objectives "ttft:MS tpot:MS e2el:MS itl:MS", CLASS.METRIC:MS for one class (repeatable)`)
	fs.StringVar(&pctMetrics, "percentile-metrics", "ttft,tpot,itl,e2el", "metrics to report percentiles of")
	fs.StringVar(&metricPcts, "metric-percentiles", "50,90,99", "percentiles to report")
	fs.StringVar(&sweepRates, "sweep-rates", "", "run once per rate (req/s, comma-separated) and report DistServe's goodput: the highest rate with >= 90% of requests meeting --goodput")
	fs.StringVar(&plotFile, "plot", "", "with --sweep-rates: write an SVG of attainment and p90 TTFT against rate")
	return cmd
}

// benchOptions turns the dataset, goodput and percentile flags into o.
func benchOptions(o *loadgen.Options, dataset, mixed, path string, randIn, randOut int, ratio float64,
	goodput []string, pctMetrics, metricPcts string) error {
	var err error
	if o.RequestRate < 0 || math.IsNaN(o.RequestRate) {
		return fmt.Errorf("--request-rate %v: give a positive rate, inf, or 0 for the closed loop", o.RequestRate)
	}
	if o.Burstiness <= 0 || math.IsNaN(o.Burstiness) || math.IsInf(o.Burstiness, 0) {
		return fmt.Errorf("--burstiness %v must be a positive number", o.Burstiness)
	}
	if o.MaxConcurrency < 0 {
		return fmt.Errorf("--max-concurrency %d must be 0 (no cap) or more", o.MaxConcurrency)
	}
	if ratio < 0 || ratio >= 1 || math.IsNaN(ratio) {
		return fmt.Errorf("--random-range-ratio %v must be in [0, 1)", ratio)
	}
	switch {
	case path != "":
		if dataset != "" || mixed != "" {
			return fmt.Errorf("--dataset-path cannot be combined with --dataset or --mixed")
		}
		if o.Items, err = loadgen.ReadItemsFile(path, o.Requests, o.Seed); err != nil {
			return err
		}
	case dataset == "mixed" || (dataset == "" && mixed != ""):
		cs, err := loadgen.ParseMixed(mixed)
		if err != nil {
			return fmt.Errorf("--mixed: %w", err)
		}
		o.Items = loadgen.MixedItems(o.Requests, cs, o.Seed)
	case dataset == "random":
		if randIn == 0 {
			randIn = o.PromptTokens
		}
		if randOut == 0 {
			randOut = o.GenTokens
		}
		if randIn < 1 || randOut < 1 {
			return fmt.Errorf("--random-input-len %d and --random-output-len %d must be at least 1", randIn, randOut)
		}
		o.Items = loadgen.RandomItems(o.Requests, randIn, randOut, ratio, o.Seed)
	case dataset != "":
		return fmt.Errorf("--dataset %q is not supported: use random, mixed or sharegpt, or --dataset-path FILE (JSONL)", dataset)
	}
	if o.Goodput, err = loadgen.ParseGoodput(goodput); err != nil {
		return fmt.Errorf("--goodput: %w", err)
	}
	if o.PercentileMetrics, err = loadgen.ParseMetricNames(pctMetrics); err != nil {
		return fmt.Errorf("--percentile-metrics: %w", err)
	}
	if o.MetricPercentiles, err = loadgen.ParsePercentiles(metricPcts); err != nil {
		return fmt.Errorf("--metric-percentiles: %w", err)
	}
	return nil
}

// runSweep runs the benchmark at each rate of rates and reports the sweep.
func runSweep(cmd *cobra.Command, o loadgen.Options, rates, plotFile, format, resultFile string) error {
	var rs []float64
	for f := range strings.SplitSeq(rates, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		r, err := strconv.ParseFloat(f, 64)
		if err != nil || !(r > 0) || math.IsInf(r, 0) {
			return fmt.Errorf("--sweep-rates: %q is not a positive finite rate", f)
		}
		rs = append(rs, r)
	}
	if len(o.Goodput) == 0 {
		return fmt.Errorf("--sweep-rates needs --goodput objectives to measure attainment against")
	}
	res, err := loadgen.Sweep(cmd.Context(), o, rs, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if format == "json" {
		err = json.NewEncoder(w).Encode(res)
	} else {
		for _, p := range res.Points {
			if _, err = fmt.Fprintf(w, "rate %8.3f req/s  attainment %5.1f%%  p90 TTFT %9.1f ms  goodput %.3f req/s\n",
				p.Rate, 100*p.Attainment, p.P90TTFTMS, p.Report.Metrics["request_goodput"]); err != nil {
				break
			}
		}
		if err == nil {
			_, err = fmt.Fprintf(w, "goodput (DistServe, >= 90%% meet %s): %g req/s\n", strings.Join(res.SLOs, " "), res.Goodput)
		}
	}
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if resultFile != "" {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return fmt.Errorf("encode result: %w", err)
		}
		if err := os.WriteFile(resultFile, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("write --result-file: %w", err)
		}
	}
	if plotFile != "" {
		var b bytes.Buffer
		if err := res.WriteSVG(&b); err != nil {
			return fmt.Errorf("draw plot: %w", err)
		}
		if err := os.WriteFile(plotFile, b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("write --plot: %w", err)
		}
	}
	for _, p := range res.Points {
		if p.Report.Interrupted {
			return fmt.Errorf("interrupted at %g req/s", p.Rate)
		}
	}
	return nil
}

// shareGPTCounter returns the token counter of a ShareGPT run: the
// tokenizer of --tokenizer MODEL when given, else the server's /tokenize.
func shareGPTCounter(cmd *cobra.Command, o loadgen.Options, ref string) (loadgen.TokenCounter, error) {
	if ref == "" {
		return loadgen.ServerTokenCounter(o.URL, o.APIKey, o.Model, min(o.Timeout, time.Minute))
	}
	log, err := loggerTo(cmd.ErrOrStderr(), "text")
	if err != nil {
		return nil, err
	}
	path, err := resolveModelTo(cmd.Context(), ref, cmd.ErrOrStderr(), log)
	if err != nil {
		return nil, fmt.Errorf("--tokenizer: %w", err)
	}
	// The file stays open for the run: the vocabulary may point into it.
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--tokenizer: %w", err)
	}
	voc, err := tokenizer.VocabFromMetadata(f)
	if err != nil {
		return nil, fmt.Errorf("--tokenizer %s: %w", ref, err)
	}
	tok, err := tokenizer.New(voc)
	if err != nil {
		return nil, fmt.Errorf("--tokenizer %s: %w", ref, err)
	}
	return func(_ context.Context, text string) (int, error) {
		return len(tok.Encode(text, true, true)), nil
	}, nil
}
