package server

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"tandem/internal/engine"
)

// TestVLLMMetrics: beside Tandem's, /metrics exports vLLM's names with a
// model_name label: the engine gauges (KV usage as a fraction, pages only
// the prefix cache holds counted free) and token counters, the lengths
// and finish reason of each choice, and the
// latency histograms with one observation per choice or request; the
// queue time is the engine's (engine.Update.QueueTime). The vllm: names
// are the only ones promlint objects to, and only to their colons.
func TestVLLMMetrics(t *testing.T) {
	tok := testVocab(t, "", true)
	ups := append(tokens(t, tok, 0, "a", "b"), done(engine.FinishStop))
	ups[0].QueueTime = 250 * time.Millisecond
	b := newFake(t, tok, ups)
	s, _ := newTestServer(t, b, Options{})
	do(s.Handler(), "POST", "/v1/completions", `{"prompt":"Hi"}`)
	body := do(s.Handler(), "GET", "/metrics", "").Body.String()
	for _, want := range []string{
		`vllm:num_requests_waiting{model_name="test-model"} 1`,
		`vllm:num_requests_running{model_name="test-model"} 2`,
		`vllm:kv_cache_usage_perc{model_name="test-model"} 0.05`,
		`tandem_kv_pages_evictable 1`,
		`vllm:prompt_tokens_total{model_name="test-model"} 6`,
		`vllm:generation_tokens_total{model_name="test-model"} 7`,
		`vllm:request_success_total{finished_reason="stop",model_name="test-model"} 1`,
		`vllm:request_prompt_tokens_count{model_name="test-model"} 1`,
		`vllm:request_generation_tokens_sum{model_name="test-model"} 2`,
		`vllm:request_max_num_generation_tokens_count{model_name="test-model"} 1`,
		`vllm:request_prompt_tokens_bucket{model_name="test-model",le="50"} 1`,
		`vllm:time_to_first_token_seconds_count{model_name="test-model"} 1`,
		`vllm:inter_token_latency_seconds_count{model_name="test-model"} 1`,
		`vllm:e2e_request_latency_seconds_count{model_name="test-model"} 1`,
		`vllm:request_queue_time_seconds_sum{model_name="test-model"} 0.25`,
		`vllm:request_queue_time_seconds_count{model_name="test-model"} 1`,
		`vllm:request_prefill_time_seconds_count{model_name="test-model"} 1`,
		`vllm:request_decode_time_seconds_count{model_name="test-model"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if !strings.HasPrefix(p.Metric, "vllm:") || p.Text != "metric names should not contain ':'" {
			t.Errorf("promlint: %s: %s", p.Metric, p.Text)
		}
	}
}
