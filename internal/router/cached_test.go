package router_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
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

// TestWorkerWarningPassesThrough: the decode worker's Warning header (a
// chat template that does not render tools) reaches the client, streamed
// or not.
func TestWorkerWarningPassesThrough(t *testing.T) {
	const warning = `299 tandem "the chat template does not render tools"`
	for _, streamed := range []bool{false, true} {
		p := newFake(t, "prefill", answer(200, prefillAnswer))
		d := newFake(t, "decode", func(w http.ResponseWriter, r *http.Request, b []byte) {
			w.Header().Set("Warning", warning)
			if streamed {
				writeEvents(w, strings.SplitAfter(chatStream, "\n\n")...)
				return
			}
			writeJSONBody(w, 200, decodeAnswer)
		})
		c := newCluster(t, []*fake{p}, []*fake{d}, nil)
		body := `{"messages":[{"role":"user","content":"x"}],"stream":` + strconv.FormatBool(streamed) + `}`
		resp, err := http.Post(c.srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Warning") != warning {
			t.Errorf("stream %v: %d with Warning %q, want 200 with the worker's %q", streamed, resp.StatusCode, resp.Header.Get("Warning"), warning)
		}
	}
}
