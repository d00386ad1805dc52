package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"tandem/internal/pd/debugdoc"
)

// listChoices posts req to base's /v1/completions and returns each
// choice's text by index, its finish reason, and the usage member.
func listChoices(t *testing.T, base string, req map[string]any) (texts map[int]string, finish map[int]string, usage string) {
	t.Helper()
	texts, finish = map[int]string{}, map[int]string{}
	for _, b := range completionDocs(t, base, req) {
		var d struct {
			Choices []struct {
				Index        int     `json:"index"`
				Text         string  `json:"text"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage json.RawMessage `json:"usage"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("answer from %s %q: %v", base, b, err)
		}
		for _, c := range d.Choices {
			texts[c.Index] += c.Text
			if c.FinishReason != nil {
				finish[c.Index] = *c.FinishReason
			}
		}
		if len(d.Usage) > 0 && string(d.Usage) != "null" {
			usage = string(d.Usage)
		}
	}
	return texts, finish, usage
}

// tokenIDs returns the token ids base's /tokenize gives text.
func tokenIDs(t *testing.T, base, text string) []int {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"prompt": text})
	client := &http.Client{Timeout: time.Minute}
	resp, err := client.Post(base+"/tokenize", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s/tokenize: %v", base, err)
	}
	defer resp.Body.Close()
	var doc struct {
		Tokens []int `json:"tokens"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != http.StatusOK || len(doc.Tokens) == 0 {
		t.Fatalf("POST %s/tokenize: %s, %v", base, resp.Status, err)
	}
	return doc.Tokens
}

// TestListPromptMatchesServe: a completions list of prompts (strings or
// token-id arrays, n 1 and 2, streamed and not) through `tandem up`, which
// splits it into one sample per prompt and choice, answers greedily what
// `tandem serve` answers: the same text and finish reason at each choice
// index (prompt*n + j), and the same usage.
func TestListPromptMatchesServe(t *testing.T) {
	setup(t)
	serve := startServe(t, modelPath)
	// Every prompt disaggregated, and (--pd-threshold 32) the short
	// prompts local and the longest disaggregated within one request.
	ups := map[string]string{"disaggregated": startUp(t, modelPath), "selective": startUp(t, modelPath, "--pd-threshold", "32")}
	ps := prompts()
	texts := []string{ps["short"], ps["over-a-page"], ps["over-a-chunk"]}
	var ids [][]int
	for _, s := range texts[:2] {
		ids = append(ids, tokenIDs(t, serve, s))
	}
	for _, tc := range []struct {
		name   string
		prompt any
	}{{"strings", texts}, {"token ids", ids}} {
		for _, n := range []int{1, 2} {
			for _, stream := range []bool{false, true} {
				what := fmt.Sprintf("%s, n=%d, stream=%v", tc.name, n, stream)
				req := map[string]any{"prompt": tc.prompt, "n": n, "max_tokens": 12, "temperature": 0, "ignore_eos": true,
					"stream": stream, "stream_options": map[string]any{"include_usage": true}}
				if !stream {
					delete(req, "stream_options")
				}
				want, wantFinish, wantUsage := listChoices(t, serve, req)
				k := n * len(texts)
				if tc.name == "token ids" {
					k = n * len(ids)
				}
				if len(want) != k {
					t.Fatalf("%s: serve answered %d choices, want %d", what, len(want), k)
				}
				for upName, up := range ups {
					what := upName + ", " + what
					got, gotFinish, gotUsage := listChoices(t, up, req)
					for i := range k {
						if got[i] != want[i] || gotFinish[i] != wantFinish[i] {
							t.Errorf("%s: choice %d through the router %q (%s), serve %q (%s)", what, i, got[i], gotFinish[i], want[i], wantFinish[i])
						}
					}
					if len(got) != k {
						t.Errorf("%s: the router answered %d choices, want %d", what, len(got), k)
					}
					if gotUsage != wantUsage {
						t.Errorf("%s: usage through the router %s, serve %s", what, gotUsage, wantUsage)
					}
				}
			}
		}
	}
	// One request's prompts were decided each on its own length.
	b, err := debugGet(context.Background(), &http.Client{Timeout: time.Minute}, ups["selective"]+"/debug/rooms")
	if err != nil {
		t.Fatal(err)
	}
	var doc debugdoc.Rooms
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	paths := map[string]int{}
	for _, r := range doc.Rooms {
		if r.Decision != nil {
			paths[r.Decision.Path]++
		}
	}
	t.Logf("selective router rooms by path: %v", paths)
	if paths["local"] == 0 || paths["disaggregated"] == 0 {
		t.Errorf("selective router's rooms by path %v, want both local and disaggregated ones", paths)
	}
}
