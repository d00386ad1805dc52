package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// badRequest is a request a client gets wrong, sent alike to serve and to
// a router cluster.
type badRequest struct {
	name, path, body string
	key              string // the API key sent ("" none)
}

// errorAnswer is what a client saw: the status and the error object
// (message, type, param, code), compacted.
type errorAnswer struct {
	Status int
	Error  string
}

func postRaw(t *testing.T, base string, r badRequest) (errorAnswer, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+r.path, strings.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if r.key != "" {
		req.Header.Set("Authorization", "Bearer "+r.key)
	}
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatalf("%s: POST %s%s: %v", r.name, base, r.path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var doc struct {
		Error json.RawMessage `json:"error"`
	}
	var c bytes.Buffer
	if resp.StatusCode < 400 {
		return errorAnswer{Status: resp.StatusCode}, string(b)
	}
	if err := json.Unmarshal(b, &doc); err != nil || json.Compact(&c, doc.Error) != nil {
		t.Errorf("%s: %s answered %d with a body that is not an error document: %q", r.name, base, resp.StatusCode, b)
	}
	return errorAnswer{Status: resp.StatusCode, Error: c.String()}, string(b)
}

// TestErrorsAsFromOneServer: the same bad requests sent to `tandem serve`
// and through `tandem up`'s router (a short prompt as a local leg, a long
// one through the prefill worker) get the same status and the same error
// (message, type, param, code): the router adds no wrapper and names no
// worker.
func TestErrorsAsFromOneServer(t *testing.T) {
	skipShort(t)
	setup(t)
	const key = "e2e-key"
	sp := freePort(t)
	serve := startProcess(t, sp, "serve", "--model", modelPath, "--port", strconv.Itoa(sp), "--threads", "1", "--api-key", key)
	up := startUp(t, modelPath, "--api-key", key, "--pd-threshold", "16")

	long := strings.Repeat("Once upon a time there was a cat. ", 400) // past the tiny model's context
	pd := strings.Repeat("word ", 40)                                 // over --pd-threshold: a prefill leg
	chat := func(extra string) string {
		return `{"messages":[{"role":"user","content":"hi"}]` + extra + `}`
	}
	reqs := []badRequest{
		{"malformed JSON", "/v1/completions", `{"prompt": "hi",`, key},
		{"unknown model", "/v1/completions", `{"model":"no-such-model","prompt":"hi"}`, key},
		{"max_tokens past the context", "/v1/completions", `{"prompt":"hi","max_tokens":10000000}`, key},
		{"max_tokens past the context, PD", "/v1/completions", `{"prompt":"` + pd + `","max_tokens":10000000}`, key},
		{"negative temperature", "/v1/completions", `{"prompt":"hi","temperature":-1}`, key},
		{"logprobs out of range", "/v1/completions", `{"prompt":"hi","logprobs":99}`, key},
		{"prompt over the context", "/v1/completions", `{"prompt":"` + long + `","max_tokens":4}`, key},
		{"schema of a bad type", "/v1/chat/completions", chat(`,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"nosuchtype"}}}`), key},
		{"tool without a name", "/v1/chat/completions", chat(`,"tools":[{"type":"function","function":{"description":"d"}}]`), key},
		{"empty messages", "/v1/chat/completions", `{"messages":[]}`, key},
		{"max_tokens a string", "/v1/completions", `{"prompt":"hi","max_tokens":"ten"}`, key},
		{"n out of range", "/v1/completions", `{"prompt":"hi","n":99}`, key},
		{"unknown role", "/v1/chat/completions", `{"messages":[{"role":"wizard","content":"hi"}]}`, key},
		{"no API key", "/v1/completions", `{"prompt":"hi"}`, ""},
	}
	for _, r := range reqs {
		s, sbody := postRaw(t, serve, r)
		u, ubody := postRaw(t, up, r)
		if s.Status < 400 || s.Status >= 500 {
			t.Errorf("%s: serve answered %d %s, want a 4xx", r.name, s.Status, sbody)
			continue
		}
		if s != u {
			t.Errorf("%s: serve and the router differ\nserve:  %d %s\nrouter: %d %s", r.name, s.Status, sbody, u.Status, ubody)
		}
		if strings.Contains(ubody, "leg") || strings.Contains(ubody, "127.0.0.1") {
			t.Errorf("%s: the router's answer names a leg or a worker: %s", r.name, ubody)
		}
		t.Logf("%s: %d %s", r.name, s.Status, bytes.TrimSpace([]byte(sbody)))
	}
}

// TestCachedTokensThroughRouter: a prompt sent twice through `tandem up`
// with every request disaggregated reports the prefill worker's
// prefix-cache hit in usage.prompt_tokens_details.cached_tokens the second
// time, as `tandem serve` reports its own.
func TestCachedTokensThroughRouter(t *testing.T) {
	skipShort(t)
	setup(t)
	port := freePort(t)
	up := startProcess(t, port, "up", "--model", modelPath, "--port", strconv.Itoa(port), "--threads", "1", "--pd-threshold", "0")
	prompt := strings.Repeat("Once upon a time there was a cat. ", 12)
	cached := func(stream bool) int {
		docs := completionDocs(t, up, map[string]any{"prompt": prompt, "max_tokens": 2, "temperature": 0, "stream": stream,
			"stream_options": map[string]any{"include_usage": true}})
		n := -1
		for _, b := range docs {
			var d struct {
				Usage *struct {
					Details *struct {
						Cached int `json:"cached_tokens"`
					} `json:"prompt_tokens_details"`
				} `json:"usage"`
			}
			if json.Unmarshal(b, &d) == nil && d.Usage != nil && d.Usage.Details != nil {
				n = d.Usage.Details.Cached
			}
		}
		return n
	}
	first := cached(false)
	second, third := cached(false), cached(true)
	if second <= 0 || third <= 0 {
		t.Errorf("cached_tokens through the router: %d, then %d, then %d streamed; want the repeats > 0 (the prefill worker's prefix-cache hit)", first, second, third)
	}
	t.Logf("cached_tokens: first %d, second %d, third (streamed) %d", first, second, third)
}
