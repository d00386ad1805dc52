package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"tandem/internal/testenv"
)

// batchTokens is the engine step budget both deployments run with, so a
// prompt longer than it is prefilled in several chunks.
const batchTokens = 64

// startUp runs `tandem up` (1 prefill, 1 decode) on model and returns the
// router's base URL once it is healthy.
// startUp starts `tandem up` with every request disaggregated
// (--pd-threshold 0: these tests are about the PD path); extra flags come
// last, so a later --pd-threshold wins.
func startUp(t *testing.T, model string, extra ...string) string {
	t.Helper()
	setup(t)
	port := freePort(t)
	args := append([]string{"up", "--model", model, "--port", strconv.Itoa(port), "--threads", "1",
		"--worker-arg=--max-batch-tokens=" + strconv.Itoa(batchTokens), "--worker-arg=--prefix-cache=false", "--pd-threshold", "0"}, extra...)
	return startProcess(t, port, args...)
}

func startServe(t *testing.T, model string) string {
	t.Helper()
	setup(t)
	port := freePort(t)
	return startProcess(t, port, "serve", "--model", model, "--port", strconv.Itoa(port), "--threads", "1",
		"--max-batch-tokens", strconv.Itoa(batchTokens), "--prefix-cache=false")
}

// completion is what a greedy completion returned: its text and tokens.
type completion struct {
	Text   string
	Tokens []string
	Top    []string // each token's top_logprobs, as JSON
	LPs    []string // each token's logprob, as JSON
	Usage  string
	Finish string
}

// completionDocs posts req to base's /v1/completions and returns the JSON
// documents of the answer: the one body, or each streamed `data:` chunk
// (the stream must end with [DONE]). A status other than 200 fails the test.
func completionDocs(t *testing.T, base string, req map[string]any) [][]byte {
	t.Helper()
	body, _ := json.Marshal(req)
	client := &http.Client{Timeout: 2 * time.Minute}
	resp, err := client.Post(base+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s/v1/completions: %v", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s/v1/completions: %s: %s", base, resp.Status, b)
	}
	if stream, _ := req["stream"].(bool); !stream {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("read the answer from %s: %v", base, err)
		}
		return [][]byte{b}
	}
	var docs [][]byte
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<22)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			return docs
		}
		docs = append(docs, []byte(line))
	}
	t.Fatalf("stream from %s ended without [DONE] (%v)", base, sc.Err())
	return nil
}

// complete posts a greedy completion with per-token logprobs (so tokens,
// not only text, are compared), streamed or not.
func complete(t *testing.T, base, prompt string, stream bool) completion {
	t.Helper()
	docs := completionDocs(t, base, map[string]any{"prompt": prompt, "max_tokens": 24, "temperature": 0, "logprobs": 2,
		"ignore_eos": true, "stream": stream, "stream_options": map[string]any{"include_usage": true}})
	var c completion
	for _, b := range docs {
		var d struct {
			Choices []struct {
				Text         string `json:"text"`
				FinishReason string `json:"finish_reason"`
				Logprobs     *struct {
					Tokens        []string          `json:"tokens"`
					TokenLogprobs []json.RawMessage `json:"token_logprobs"`
					TopLogprobs   []json.RawMessage `json:"top_logprobs"`
				} `json:"logprobs"`
			} `json:"choices"`
			Usage json.RawMessage `json:"usage"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("answer from %s %q: %v", base, b, err)
		}
		for _, ch := range d.Choices {
			c.Text += ch.Text
			if ch.Logprobs != nil {
				c.Tokens = append(c.Tokens, ch.Logprobs.Tokens...)
				for _, r := range ch.Logprobs.TopLogprobs {
					c.Top = append(c.Top, string(r))
				}
				for _, r := range ch.Logprobs.TokenLogprobs {
					c.LPs = append(c.LPs, string(r))
				}
			}
			if ch.FinishReason != "" {
				c.Finish = ch.FinishReason
			}
		}
		if len(d.Usage) > 0 && string(d.Usage) != "null" {
			c.Usage = string(d.Usage)
		}
	}
	return c
}

// prompts returns a short prompt, one longer than a KV page (16 tokens) and
// one longer than a prefill chunk (batchTokens).
func prompts() map[string]string {
	sentence := "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. "
	return map[string]string{
		"short":        "Once upon a time",
		"over-a-page":  sentence,
		"over-a-chunk": strings.Repeat(sentence, 5),
	}
}

// TestPDMatchesServe: greedy output through `tandem up` is token for token
// what `tandem serve` gives, streaming and not, for a synthesized quantized
// model and for stories260K.
func TestPDMatchesServe(t *testing.T) {
	setup(t)
	models := map[string]string{"synth-tiny-q8_0": modelPath}
	// A missing shared file drops only its entry: testenv.Shared would skip
	// this whole test, the synthesized-model comparison included.
	if d := testenv.SharedDir(); d == "" {
		t.Log("shared data folder absent: checking the synthesized model only")
	} else if p := filepath.Join(d, "models", "stories260K.gguf"); fileExists(p) {
		models["stories260K"] = p
	} else {
		t.Logf("%s not found: checking the synthesized model only", p)
	}
	for name, model := range models {
		t.Run(name, func(t *testing.T) { upMatchesServe(t, model) })
	}
}

// upMatchesServe checks that greedy output through `tandem up` is token
// for token, logprob for logprob, what `tandem serve` gives for model, for
// the prompts named (every prompt when none is), streaming and not.
func upMatchesServe(t *testing.T, model string, names ...string) {
	t.Helper()
	serve := startServe(t, model)
	up := startUp(t, model)
	ps := prompts()
	if len(names) == 0 {
		names = slices.Sorted(maps.Keys(ps))
	}
	for _, pname := range names {
		p, ok := ps[pname]
		if !ok {
			t.Fatalf("no prompt %q", pname)
		}
		for _, stream := range []bool{false, true} {
			want := complete(t, serve, p, stream)
			got := complete(t, up, p, stream)
			sameCompletion(t, fmt.Sprintf("%s prompt, stream=%v", pname, stream), got, want)
		}
	}
}

// sameCompletion checks that got, a completion through the router, is want,
// `tandem serve`'s (which must have 24 tokens), token for token and
// logprob for logprob (the top logprobs too), with the same finish reason
// and usage.
func sameCompletion(t *testing.T, what string, got, want completion) {
	t.Helper()
	if len(want.Tokens) != 24 {
		t.Fatalf("%s: serve returned %d tokens, want 24 (logprobs tokens)", what, len(want.Tokens))
	}
	if strings.Join(got.Tokens, "\x00") != strings.Join(want.Tokens, "\x00") || got.Text != want.Text {
		t.Errorf("%s: through the router %q %q, serve %q %q", what, got.Text, got.Tokens, want.Text, want.Tokens)
	}
	if strings.Join(got.Top, " ") != strings.Join(want.Top, " ") || strings.Join(got.LPs, " ") != strings.Join(want.LPs, " ") {
		t.Errorf("%s: logprobs through the router\n%v %v\nserve\n%v %v", what, got.LPs, got.Top, want.LPs, want.Top)
	}
	if got.Finish != want.Finish || got.Usage != want.Usage {
		t.Errorf("%s: finish %q usage %s through the router; serve finish %q usage %s", what, got.Finish, got.Usage, want.Finish, want.Usage)
	}
}

// fileExists reports whether path names an existing file.
func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}

// TestPDLendingMatchesServe: with core lending and decode pacing on, greedy
// output through `tandem up` is still token for token what `tandem serve`
// gives, for every prompt sent at once (parallel subtests, so the decode
// worker paces its steps while the prefill worker runs others' prompts).
func TestPDLendingMatchesServe(t *testing.T) {
	setup(t)
	serve := startServe(t, modelPath)
	up := startUp(t, modelPath, "--lend-cores", "--worker-arg=--core-lease-pace=20ms")
	ps := prompts()
	want := map[string]completion{}
	for pname, p := range ps {
		want[pname] = complete(t, serve, p, false)
	}
	t.Run("at once", func(t *testing.T) {
		for pname, p := range ps {
			for _, stream := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s stream=%v", pname, stream), func(t *testing.T) {
					t.Parallel()
					got, w := complete(t, up, p, stream), want[pname]
					if strings.Join(got.Tokens, "\x00") != strings.Join(w.Tokens, "\x00") || got.Text != w.Text {
						t.Errorf("with lending and pacing %q %q, serve %q %q", got.Text, got.Tokens, w.Text, w.Tokens)
					}
					if strings.Join(got.LPs, " ") != strings.Join(w.LPs, " ") {
						t.Errorf("logprobs with lending and pacing\n%v\nserve\n%v", got.LPs, w.LPs)
					}
				})
			}
		}
	})
}
