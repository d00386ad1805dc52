package router_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCachedTokensFromPrefill: usage.prompt_tokens_details.cached_tokens
// through the router is the prefill worker's count when it found the
// prompt in its prefix cache (the decode worker imported the KV and
// counts none), streamed or not, for one sample or several.
func TestCachedTokensFromPrefill(t *testing.T) {
	const pre = `{"id":"cmpl-p","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"x","logprobs":null,"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4,"prompt_tokens_details":{"cached_tokens":240}}}` + "\n"
	const dec = `{"id":"cmpl-d","object":"text_completion","created":2,"model":"m","choices":[{"index":0,"text":" hi","logprobs":null,"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6,"prompt_tokens_details":{"cached_tokens":0}}}` + "\n"
	decStream := []string{
		"data: {\"id\":\"cmpl-d\",\"object\":\"text_completion\",\"created\":2,\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\" hi\",\"logprobs\":null,\"finish_reason\":\"length\"}]}\n\n",
		"data: {\"id\":\"cmpl-d\",\"object\":\"text_completion\",\"created\":2,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,\"total_tokens\":4}}\n\n",
		"data: [DONE]\n\n",
	}
	for _, tc := range []struct {
		name, body string
		stream     bool
	}{
		{"body", `{"prompt":"x"}`, false},
		{"body n=2", `{"prompt":"x","n":2}`, false},
		{"stream", `{"prompt":"x","stream":true,"stream_options":{"include_usage":true}}`, true},
		{"stream n=2", `{"prompt":"x","n":2,"stream":true,"stream_options":{"include_usage":true}}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newFake(t, "prefill", answer(200, pre))
			d := newFake(t, "decode", answer(200, dec))
			if tc.stream {
				d = newFake(t, "decode", stream(decStream...))
			}
			c := newCluster(t, []*fake{p}, []*fake{d}, nil) // PDThreshold 0: every prompt goes through prefill
			status, body := c.post(t, "/v1/completions", tc.body)
			if status != 200 {
				t.Fatalf("POST %s = %d %s", tc.body, status, body)
			}
			usage := body
			if tc.stream {
				usage = ""
				for _, ev := range strings.Split(body, "\n\n") {
					if strings.Contains(ev, `"usage"`) {
						usage = strings.TrimPrefix(ev, "data: ")
					}
				}
			}
			var doc struct {
				Usage struct {
					Details struct {
						Cached int `json:"cached_tokens"`
					} `json:"prompt_tokens_details"`
				} `json:"usage"`
			}
			if err := json.Unmarshal([]byte(usage), &doc); err != nil || doc.Usage.Details.Cached != 240 {
				t.Errorf("POST %s: usage %s (err %v), want cached_tokens 240 (the prefill worker's)\n%s", tc.body, usage, err, body)
			}
		})
	}
}
