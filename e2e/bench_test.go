package e2e

import (
	"encoding/json"
	"testing"
	"time"
)

func TestBenchServeAgainstServe(t *testing.T) {
	setup(t)
	base := startServer(t)
	out := runTandem(t, 5*time.Minute, "bench", "serve", "--url", base, "--concurrency", "4", "--requests", "8",
		"--prompt-tokens", "32", "--gen-tokens", "8", "--format", "json")
	var rep struct {
		Requests     int            `json:"requests"`
		Completed    int            `json:"completed"`
		Failed       int            `json:"failed"`
		OutputTokS   float64        `json:"output_tok_s"`
		OutputTokens int64          `json:"output_tokens"`
		PromptTokens int64          `json:"prompt_tokens"`
		Usage        int            `json:"usage_reported"`
		Errors       map[string]int `json:"errors"`
		TTFT         struct {
			N int `json:"n"`
		} `json:"ttft_ms"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("tandem bench serve --format json printed %q: %v", out, err)
	}
	if rep.Requests != 8 || rep.Completed != 8 || rep.Failed != 0 || len(rep.Errors) != 0 {
		t.Errorf("bench serve: requests %d, completed %d, failed %d, errors %v; want 8, 8, 0, none", rep.Requests, rep.Completed, rep.Failed, rep.Errors)
	}
	if rep.OutputTokS <= 0 {
		t.Errorf("bench serve: output_tok_s = %v, want > 0", rep.OutputTokS)
	}
	// Tandem sends usage and honours ignore_eos, so every request made exactly
	// --gen-tokens tokens.
	if rep.Usage != 8 || rep.OutputTokens != 8*8 || rep.PromptTokens < 8*32 || rep.TTFT.N != 8 {
		t.Errorf("bench serve: usage on %d requests, %d output tokens, %d prompt tokens, %d TTFT samples; want 8, 64, >= 256, 8",
			rep.Usage, rep.OutputTokens, rep.PromptTokens, rep.TTFT.N)
	}
	t.Logf("bench serve report: %s", out)
}
