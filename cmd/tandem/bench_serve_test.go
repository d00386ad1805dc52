package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tandem/internal/loadgen"
)

func TestBenchOptions(t *testing.T) {
	o := loadgen.Options{Requests: 20, PromptTokens: 50, GenTokens: 9, Burstiness: 1, Seed: 1}
	if err := benchOptions(&o, "mixed", "long:share=0.25,in=1000,out=16;short:share=0.75,in=30,out=96-128", "", 0, 0, 0,
		[]string{"short.ttft:1000 long.ttft:10000 tpot:250"}, "ttft,itl", "90,99"); err != nil {
		t.Fatal(err)
	}
	if len(o.Items) != 20 || len(o.Goodput) != 3 || len(o.PercentileMetrics) != 2 || len(o.MetricPercentiles) != 2 {
		t.Errorf("items %d goodput %v metrics %v percentiles %v", len(o.Items), o.Goodput, o.PercentileMetrics, o.MetricPercentiles)
	}
	o = loadgen.Options{Requests: 5, PromptTokens: 50, GenTokens: 9, Burstiness: 1}
	if err := benchOptions(&o, "random", "", "", 0, 0, 0, nil, "ttft", "99"); err != nil {
		t.Fatal(err)
	}
	if it := o.Items[0]; it.InputLen != 50 || it.MaxTokens != 9 {
		t.Errorf("random dataset defaults to --prompt-tokens/--gen-tokens: item %+v", it)
	}
	p := filepath.Join(t.TempDir(), "d.jsonl")
	os.WriteFile(p, []byte(`{"prompt":"a b","max_tokens":3,"class":"x"}`+"\n"), 0o644)
	o = loadgen.Options{Requests: 4, Burstiness: 1}
	if err := benchOptions(&o, "", "", p, 0, 0, 0, nil, "ttft", "99"); err != nil || len(o.Items) != 4 || o.Items[3].Class != "x" {
		t.Errorf("dataset path: %v, %+v", err, o.Items)
	}
	for name, f := range map[string]func(*loadgen.Options) error{
		"bad dataset": func(o *loadgen.Options) error { return benchOptions(o, "sharegpt", "", "", 0, 0, 0, nil, "ttft", "99") },
		"bad ratio":   func(o *loadgen.Options) error { return benchOptions(o, "random", "", "", 0, 0, 1, nil, "ttft", "99") },
		"bad goodput": func(o *loadgen.Options) error {
			return benchOptions(o, "", "", "", 0, 0, 0, []string{"ttft"}, "ttft", "99")
		},
		"bad mixed":    func(o *loadgen.Options) error { return benchOptions(o, "mixed", "a", "", 0, 0, 0, nil, "ttft", "99") },
		"path and mix": func(o *loadgen.Options) error { return benchOptions(o, "mixed", "", p, 0, 0, 0, nil, "ttft", "99") },
		"missing file": func(o *loadgen.Options) error { return benchOptions(o, "", "", p+".no", 0, 0, 0, nil, "ttft", "99") },
		"negative rate": func(o *loadgen.Options) error {
			o.RequestRate = -1
			return benchOptions(o, "", "", "", 0, 0, 0, nil, "ttft", "99")
		},
		"nan burst": func(o *loadgen.Options) error {
			o.Burstiness = math.NaN()
			return benchOptions(o, "", "", "", 0, 0, 0, nil, "ttft", "99")
		},
	} {
		o := loadgen.Options{Requests: 2, PromptTokens: 4, GenTokens: 2, Burstiness: 1}
		if err := f(&o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// fakeCompletions serves /v1/completions as a stream of max_tokens one-word
// chunks with usage, and one model.
func fakeCompletions(t *testing.T) string {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `{"data":[{"id":"m"}]}`)
	})
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Prompt    string `json:"prompt"`
			MaxTokens int    `json:"max_tokens"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "text/event-stream")
		for range req.MaxTokens {
			io.WriteString(w, `data: {"choices":[{"text":" w"}]}`+"\n\n")
		}
		fmt.Fprintf(w, "data: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"length\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d}}\n\ndata: [DONE]\n\n",
			len(strings.Fields(req.Prompt)), req.MaxTokens)
	})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Role, Content string
			} `json:"messages"`
			MaxTokens int `json:"max_completion_tokens"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		if len(req.Messages) != 1 || req.Messages[0].Role != "user" || req.MaxTokens < 1 {
			http.Error(w, `{"error":{"message":"want one user message and max_completion_tokens"}}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for range req.MaxTokens {
			io.WriteString(w, `data: {"choices":[{"delta":{"content":" w"}}]}`+"\n\n")
		}
		fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"length\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d}}\n\ndata: [DONE]\n\n",
			len(strings.Fields(req.Messages[0].Content)), req.MaxTokens)
	})
	// /tokenize counts words, plus one for BOS.
	mux.HandleFunc("POST /tokenize", func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Prompt string }
		json.NewDecoder(r.Body).Decode(&req)
		fmt.Fprintf(w, `{"count":%d}`, 1+len(strings.Fields(req.Prompt)))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestBenchServeShareGPTChatCLI: vLLM's command line for a ShareGPT run on
// the chat endpoint works as written; the result has vLLM's null goodput
// without objectives; a malformed file is refused naming the entry.
func TestBenchServeShareGPTChatCLI(t *testing.T) {
	url := fakeCompletions(t)
	dir := t.TempDir()
	turn := func(from string, n int) map[string]string {
		return map[string]string{"from": from, "value": strings.TrimSpace(strings.Repeat("w ", n))}
	}
	var entries []any
	for k := range 3 {
		entries = append(entries, map[string]any{"conversations": []any{turn("human", 10+k), turn("gpt", 5+k)}})
	}
	b, _ := json.Marshal(entries)
	ds := filepath.Join(dir, "sharegpt.json")
	os.WriteFile(ds, b, 0o644)
	res := filepath.Join(dir, "r.json")
	run(t, "bench", "serve", "--url", url, "--backend", "openai-chat", "--endpoint", "/v1/chat/completions",
		"--dataset-name", "sharegpt", "--dataset-path", ds, "--num-prompts", "6", "--max-concurrency", "2", "--request-rate", "inf", "--result-file", res)
	b, err := os.ReadFile(res)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	gp, hasGoodput := v["request_goodput"]
	// 6 requests over the 3 entries twice: prompts of 10..12 words (+1
	// BOS), outputs the answers' 5..7 words (+1 BOS, as vLLM counts them).
	if v["completed"] != 6.0 || v["backend"] != "openai-chat" || v["endpoint"] != "/v1/chat/completions" || !hasGoodput || gp != nil ||
		v["total_output_tokens"] != 2.0*(6+7+8) || v["dataset"] != true {
		t.Fatalf("result: %s", b)
	}

	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte("[\n"+`{"conversations": [{"from": "human", "value": "a b c d e"}, {"from": "gpt", "value": ["x"]}]}`+"\n]"), 0o644)
	root := newRoot()
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	root.SetArgs([]string{"bench", "serve", "--url", url, "--dataset-name", "sharegpt", "--dataset-path", bad})
	err = root.Execute()
	if err == nil || !strings.Contains(err.Error(), "entry 0 (line 2 column 1): conversations[1].value is an array, want a string") {
		t.Fatalf("a malformed ShareGPT file: %v", err)
	}
	for _, args := range [][]string{
		{"--backend", "openai-chat", "--endpoint", "/v1/completions"},
		{"--endpoint", "/v1/chat/completions"},
		{"--backend", "tgi"},
		{"--dataset-name", "sharegpt"},
	} {
		root := newRoot()
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		root.SetArgs(append([]string{"bench", "serve", "--url", url, "--model", "m", "--requests", "1"}, args...))
		if err := root.Execute(); err == nil {
			t.Errorf("bench serve %v: no error", args)
		}
	}
}

func TestBenchServeOpenLoopMixedCLI(t *testing.T) {
	url := fakeCompletions(t)
	dir := t.TempDir()
	res := filepath.Join(dir, "r.json")
	out := run(t, "bench", "serve", "--url", url, "--num-prompts", "10", "--request-rate", "inf", "--max-concurrency", "3",
		"--dataset", "mixed", "--mixed", "long:share=0.3,in=50,out=2;short:share=0.7,in=5,out=3-4",
		"--goodput", "short.ttft:1e9 long.ttft:1e9 tpot:1e9", "--result-file", res)
	if !strings.Contains(out, "class short") || !strings.Contains(out, "goodput") {
		t.Errorf("text report lacks classes or goodput:\n%s", out)
	}
	b, err := os.ReadFile(res)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Completed      int                       `json:"completed"`
		RequestGoodput float64                   `json:"request_goodput"`
		P99TTFT        *float64                  `json:"p99_ttft_ms"`
		Classes        map[string]map[string]any `json:"classes"`
	}
	if err := json.Unmarshal(b, &v); err != nil || v.Completed != 10 || v.RequestGoodput <= 0 || v.P99TTFT == nil || len(v.Classes) != 2 {
		t.Errorf("result file: %v %+v\n%s", err, v, b)
	}

	plot := filepath.Join(dir, "p.svg")
	out = run(t, "bench", "serve", "--url", url, "--requests", "4", "--prompt-tokens", "3", "--gen-tokens", "2",
		"--sweep-rates", "100,200", "--goodput", "e2el:1e9", "--plot", plot)
	if !strings.Contains(out, "goodput (DistServe") || !strings.Contains(out, ": 200 req/s") {
		t.Errorf("sweep report:\n%s", out)
	}
	if svg, err := os.ReadFile(plot); err != nil || !strings.HasPrefix(string(svg), "<svg") {
		t.Errorf("plot: %v %.80q", err, svg)
	}
}
