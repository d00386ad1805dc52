package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// countWords counts whitespace-separated words: the tests' tokenizer.
func countWords(_ context.Context, s string) (int, error) { return len(strings.Fields(s)), nil }

func repeat(n int) string { return strings.TrimSpace(strings.Repeat("w ", n)) }

// shareGPTFixture writes a small ShareGPT file: usable entries u0..u3 (the
// prompt "uK" plus K+4 countWords, the answer K+5 countWords), and entries every
// filter drops.
func shareGPTFixture(t *testing.T) string {
	t.Helper()
	turn := func(from, v string) map[string]string { return map[string]string{"from": from, "value": v} }
	var entries []any
	for k := range 4 {
		entries = append(entries, map[string]any{"id": fmt.Sprint("u", k), "conversations": []any{
			turn("human", fmt.Sprintf("u%d %s", k, repeat(k+4))), turn("gpt", repeat(k+5)), turn("human", "more"), turn("gpt", "and more")}})
	}
	entries = append(entries,
		map[string]any{"id": "one-turn", "conversations": []any{turn("human", repeat(10))}},
		map[string]any{"id": "no-turns", "conversations": []any{}},
		map[string]any{"id": "short-prompt", "conversations": []any{turn("human", "hi there"), turn("gpt", repeat(10))}},
		map[string]any{"id": "short-answer", "conversations": []any{turn("human", repeat(10)), turn("gpt", "ok")}},
		map[string]any{"id": "long-prompt", "conversations": []any{turn("human", repeat(1025)), turn("gpt", repeat(10))}},
		map[string]any{"id": "long-total", "conversations": []any{turn("human", repeat(1000)), turn("gpt", repeat(1049))}},
	)
	b, err := json.MarshalIndent(entries, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "sharegpt.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadShareGPT(t *testing.T) {
	p := shareGPTFixture(t)
	ctx := context.Background()
	items, err := ReadShareGPTFile(ctx, p, 10, 1, 0, countWords)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for i, it := range items {
		var k int
		if _, err := fmt.Sscanf(it.Prompt, "u%d", &k); err != nil {
			t.Fatalf("item %d: prompt %q is not one of the usable entries", i, clip(it.Prompt, 40))
		}
		if it.InputLen != k+5 || it.MaxTokens != k+5 {
			t.Errorf("entry u%d: input %d, max_tokens %d; want %d and %d (the answer's length)", k, it.InputLen, it.MaxTokens, k+5, k+5)
		}
		seen[it.Prompt]++
		if i >= 4 && it.Prompt != items[i-4].Prompt {
			t.Errorf("item %d: the 4 usable entries are not reused in turn", i)
		}
	}
	if len(seen) != 4 {
		t.Fatalf("%d distinct prompts, want the 4 usable entries", len(seen))
	}
	again, _ := ReadShareGPTFile(ctx, p, 10, 1, 0, countWords)
	other, _ := ReadShareGPTFile(ctx, p, 10, 2, 0, countWords)
	same, differ := true, false
	for i := range items {
		same = same && again[i].Prompt == items[i].Prompt
		differ = differ || other[i].Prompt != items[i].Prompt
	}
	if !same || !differ {
		t.Errorf("the order should follow the seed: same seed same order %v, another seed another order %v", same, differ)
	}
	// A fixed output length replaces the answer's, and lets short answers in.
	fixed, err := ReadShareGPTFile(ctx, p, 5, 1, 7, countWords)
	if err != nil {
		t.Fatal(err)
	}
	short := false
	for _, it := range fixed {
		if it.MaxTokens != 7 {
			t.Fatalf("--sharegpt-output-len 7: max_tokens %d", it.MaxTokens)
		}
		short = short || it.Prompt == repeat(10)
	}
	if !short {
		t.Error("with a fixed output length the entry with a 1-word answer should be usable")
	}
	// ErrTooLong drops an entry; another counting error is the run's.
	tooLong := func(ctx context.Context, s string) (int, error) {
		if strings.HasPrefix(s, "u0 ") {
			return 0, ErrTooLong
		}
		return countWords(ctx, s)
	}
	got, err := ReadShareGPTFile(ctx, p, 6, 1, 0, tooLong)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range got {
		if strings.HasPrefix(it.Prompt, "u0 ") {
			t.Fatal("an entry the counter found too long was used")
		}
	}
	broken := func(context.Context, string) (int, error) { return 0, errors.New("tokenizer down") }
	if _, err := ReadShareGPTFile(ctx, p, 6, 1, 0, broken); err == nil || !strings.Contains(err.Error(), "tokenizer down") {
		t.Fatalf("a failing counter: %v", err)
	}
}

// TestShareGPTMalformed: each malformed file is refused naming the entry,
// its line and what is wrong, never a Go type.
func TestShareGPTMalformed(t *testing.T) {
	ok := `{"conversations": [{"from": "human", "value": "a b c d e"}, {"from": "gpt", "value": "f g h i j"}]}`
	cases := []struct{ name, file, want string }{
		{"empty", "", "the file is empty"},
		{"object", `{"prompt": "x", "max_tokens": 3}`, "starts with '{' (a JSON Lines file"},
		{"string", `"hello"`, "starts with a string"},
		{"entry a string", "[\n" + ok + ",\n\"oops\"\n]", `entry 1 (line 3 column 1): want an object with "conversations", got a string`},
		{"no conversations", "[\n" + ok + ",\n  {\"id\": 1}\n]", `entry 1 (line 3 column 3): no "conversations" field`},
		{"conversations an object", `[{"conversations": {"from": "human"}}]`, `entry 0 (line 1 column 2): "conversations" is an object, want an array`},
		{"turn a string", `[{"conversations": ["hi", "there"]}]`, `conversations[0] is a string, want {"from"`},
		{"no value", `[{"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "text": "x"}]}]`, `conversations[1] has no "value"`},
		{"value a number", `[{"conversations": [{"from": "human", "value": 5}, {"from": "gpt", "value": "x"}]}]`, `conversations[0].value is a number, want a string`},
		{"value null", `[{"conversations": [{"from": "human", "value": null}, {"from": "gpt", "value": "x"}]}]`, `conversations[0].value is null, want a string`},
		{"syntax", "[\n" + ok + ",\n" + `{"conversations": [}` + "\n]", "entry 1 (line 3 column 20): not valid JSON"},
		{"syntax first", `[{"conversations": [}]`, "entry 0 (line 1 column 21): not valid JSON"},
		{"cut short", "[\n" + ok + ",\n" + `{"conversations": [`, "ends inside the JSON array"},
		{"trailing", "[" + ok + "] [1]", "more JSON after the array"},
		{"nothing usable", `[{"conversations": [{"value": "x"}]}]`, "no entry has two turns"},
		{"all filtered", `[{"conversations": [{"value": "x"}, {"value": "y"}]}]`, "none of the 1 conversations passes the length filter"},
	}
	for _, c := range cases {
		p := filepath.Join(t.TempDir(), "f.json")
		if err := os.WriteFile(p, []byte(c.file), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ReadShareGPTFile(context.Background(), p, 3, 1, 0, countWords)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) || strings.Contains(err.Error(), "Go value") {
			t.Errorf("%s: err %v\nwant it to name the file and contain %q", c.name, err, c.want)
		}
	}
}

// TestJSONLErrorsSayWhatIsWrong: a JSONL line of the wrong shape is named
// in the file's terms, and a ShareGPT file points at --dataset-name.
func TestJSONLErrorsSayWhatIsWrong(t *testing.T) {
	cases := []struct{ file, want string }{
		{`[{"conversations": []}]`, "line 1: a JSON array, not a JSON Lines object: a ShareGPT file needs --dataset-name sharegpt"},
		{"{\"prompt\": \"x\", \"max_tokens\": 2}\n{\"prompt\": [1], \"max_tokens\": 2}", `line 2: "prompt" is an array, want a string`},
		{`{"prompt": "x", "max_tokens": "2"}`, `line 1: "max_tokens" is a string, want an integer`},
		{`{"prompt": "x"}`, `line 1: no "max_tokens"`},
		{`{"prompt": "x", "max_tokens": 2, "class": 3}`, `line 1: "class" is a number, want a string`},
		{`{"prompt": "x", max_tokens: 2}`, "line 1: not valid JSON at column 17"},
		{`42`, "line 1: a number, not an object"},
	}
	for _, c := range cases {
		_, err := ReadItems(strings.NewReader(c.file), 2, 1)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "Go value") {
			t.Errorf("%q: err %v, want %q", c.file, err, c.want)
		}
	}
}

func TestServerTokenCounter(t *testing.T) {
	var models []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Model, Prompt string }
		json.NewDecoder(r.Body).Decode(&req)
		models = append(models, req.Model)
		switch {
		case r.URL.Path != "/tokenize":
			http.NotFound(w, r)
		case strings.HasPrefix(req.Prompt, "long"):
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":{"message":"too long","type":"invalid_request_error","code":"context_length_exceeded"}}`)
		default:
			fmt.Fprintf(w, `{"count": %d, "max_model_len": 2048, "tokens": []}`, 1+len(strings.Fields(req.Prompt)))
		}
	}))
	defer srv.Close()
	if _, err := ServerTokenCounter(srv.URL+"/v1", "", "m", 0); err == nil {
		t.Fatal("a zero timeout was accepted")
	}
	count, err := ServerTokenCounter(srv.URL+"/v1", "", "m", 10e9)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if n, err := count(ctx, "a b c"); err != nil || n != 4 {
		t.Fatalf("count: %d, %v; want 4 (with BOS)", n, err)
	}
	if _, err := count(ctx, "long text"); !errors.Is(err, ErrTooLong) {
		t.Fatalf("context_length_exceeded: %v, want ErrTooLong", err)
	}
	if models[0] != "m" {
		t.Fatalf("model sent %q", models[0])
	}
	none, _ := ServerTokenCounter(srv.URL+"/nothing", "", "", 10e9)
	if _, err := none(ctx, "x"); err == nil || !strings.Contains(err.Error(), "--tokenizer") || !strings.Contains(err.Error(), "404") {
		t.Fatalf("a server without /tokenize: %v", err)
	}
}

// TestChatBackend: with Chat the run POSTs chat completions (one user
// message, max_completion_tokens) to the chat endpoint and reads the
// deltas, reasoning included.
func TestChatBackend(t *testing.T) {
	var s seen
	var paths []string
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.Path)
		s.add(t, r)
		writeSSE(w,
			`{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`,
			`{"choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]}`,
			`{"choices":[{"index":0,"delta":{"content":"Hi"}}]}`,
			`{"choices":[{"index":0,"delta":{"content":" there"},"finish_reason":"length"}]}`,
			usageChunk(9, 3), doneEvent)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	rep, err := Run(context.Background(), Options{URL: srv.URL, Model: "m", Chat: true, Requests: 2, GenTokens: 3, Stream: true, IgnoreEOS: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Completed != 2 || rep.Failed != 0 || rep.OutputTokens != 6 || rep.Backend != "openai-chat" || rep.Endpoint != "/v1/chat/completions" {
		t.Fatalf("report: completed %d failed %d output %d backend %q endpoint %q errors %v", rep.Completed, rep.Failed, rep.OutputTokens, rep.Backend, rep.Endpoint, rep.ErrorExamples)
	}
	req := s.reqs[0]
	msgs, _ := req["messages"].([]any)
	if len(msgs) != 1 || msgs[0].(map[string]any)["role"] != "user" || req["max_completion_tokens"] != 3.0 || req["prompt"] != nil || req["ignore_eos"] != true {
		t.Fatalf("chat request %v", req)
	}
	for _, bad := range []Options{
		{URL: srv.URL, Model: "m", Chat: true, Endpoint: "/v1/completions"},
		{URL: srv.URL, Model: "m", Endpoint: "/v1/chat/completions"},
		{URL: srv.URL, Model: "m", Endpoint: "v1/completions"},
	} {
		if _, err := Run(context.Background(), bad, nil); err == nil || !strings.Contains(err.Error(), "endpoint") {
			t.Errorf("chat %v endpoint %q: err %v", bad.Chat, bad.Endpoint, err)
		}
	}
}
