package router_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// TestClusterMetricsUnderVLLMNames: the router exports vLLM's names over
// its own requests (model_name from the workers' /pd/info): TTFT and e2e
// per answered request, finish reasons (the worker's, or error when every
// attempt failed), tokens from the usage decode's answer carried, rooms by
// path, outcome and reason, and per-worker gauges from each worker's
// /pd/status with the membership counts.
func TestClusterMetricsUnderVLLMNames(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", nil)
	kv := 0.25
	d.mu.Lock()
	d.status.Waiting, d.status.Running, d.status.KVUsage = 3, 2, &kv
	d.mu.Unlock()
	var fail atomic.Bool
	d.gen = func(w http.ResponseWriter, r *http.Request, _ []byte) {
		if fail.Load() {
			writeJSONBody(w, 500, `{"error":{"message":"boom"}}`)
			return
		}
		writeJSONBody(w, 200, `{"object":"text_completion","choices":[{"index":0,"text":"ab","finish_reason":"length"}],`+
			`"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}`)
	}
	c := newCluster(t, []*fake{p}, []*fake{d}, nil)
	if st, b := c.post(t, "/v1/completions", `{"prompt":"x","max_tokens":2}`); st != 200 {
		t.Fatalf("POST: %d %s", st, b)
	}
	fail.Store(true)
	c.post(t, "/v1/completions", `{"prompt":"x","max_tokens":2}`)
	waitFor(t, func() bool {
		_, m := c.get(t, "/metrics")
		return strings.Contains(m, `tandem_router_worker_kv_usage{role="decode",worker="`+d.url()+`"} 0.25`)
	})
	_, m := c.get(t, "/metrics")
	for _, want := range []string{
		`vllm:time_to_first_token_seconds_count{model_name="m"} 1`,
		`vllm:e2e_request_latency_seconds_count{model_name="m"} 1`,
		`vllm:request_success_total{finished_reason="length",model_name="m"} 1`,
		`vllm:request_success_total{finished_reason="error",model_name="m"} 1`,
		`vllm:prompt_tokens_total{model_name="m"} 7`,
		`vllm:generation_tokens_total{model_name="m"} 2`,
		`vllm:request_prompt_tokens_count{model_name="m"} 1`,
		`vllm:request_generation_tokens_sum{model_name="m"} 2`,
		`tandem_router_rooms_total{outcome="succeeded",path="disaggregated",reason=""} 1`,
		`tandem_router_rooms_total{outcome="failed",path="disaggregated",reason="decode_status"}`,
		`tandem_router_worker_waiting{role="decode",worker="` + d.url() + `"} 3`,
		`tandem_router_worker_running{role="decode",worker="` + d.url() + `"} 2`,
		`tandem_router_workers{role="decode",state="healthy"} 1`,
		`vllm:num_requests_waiting{model_name="m"} 3`,
		`vllm:kv_cache_usage_perc{model_name="m"} 0.25`,
		`tandem_router_workers{role="prefill",state="down"} 0`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
