package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestPromptLogprobsThroughRouter: a greedy completion with
// prompt_logprobs through `tandem up` (the prefill worker computes them,
// the router splices them into the decode worker's answer) is the answer
// `tandem serve` gives: not streamed, the same document apart from id and
// created (member order included); streamed, the first chunk carries the
// same prompt_logprobs and no other chunk does, and the text and finish
// reason are the same (chunk boundaries depend on timing).
func TestPromptLogprobsThroughRouter(t *testing.T) {
	setup(t)
	serve := startServe(t, modelPath)
	up := startUp(t, modelPath)
	for pname, p := range prompts() {
		what := pname + " prompt"
		want := promptLogprobsDocs(t, serve, p, false)[0]
		got := promptLogprobsDocs(t, up, p, false)[0]
		if !strings.Contains(want, `"prompt_logprobs":[null,{"`) {
			t.Fatalf("%s: serve's answer %s, want prompt_logprobs", what, want)
		}
		if got != want {
			t.Errorf("%s: through the router\n%s\nserve\n%s", what, got, want)
		}

		what += ", streamed"
		ws := summarize(t, promptLogprobsDocs(t, serve, p, true))
		gs := summarize(t, promptLogprobsDocs(t, up, p, true))
		if ws.plp == "" || ws.plpChunks != 1 {
			t.Fatalf("%s: serve sent prompt_logprobs in %d chunks (first chunk: %q), want in the first only", what, ws.plpChunks, ws.plp)
		}
		if gs.plpChunks != 1 || gs.plp != ws.plp {
			t.Errorf("%s: through the router prompt_logprobs in %d chunks, first chunk's\n%s\nserve's\n%s", what, gs.plpChunks, gs.plp, ws.plp)
		}
		if gs.text != ws.text || gs.finish != ws.finish {
			t.Errorf("%s: through the router text %q finish %q, serve %q %q", what, gs.text, gs.finish, ws.text, ws.finish)
		}
	}
}

// streamSummary is what a streamed completion's chunks add up to.
type streamSummary struct {
	text, finish string
	plp          string // the first chunk's prompt_logprobs, as sent
	plpChunks    int    // chunks that carry prompt_logprobs
}

func summarize(t *testing.T, docs []string) streamSummary {
	t.Helper()
	var s streamSummary
	for i, d := range docs {
		var c struct {
			Choices []struct {
				Text           string          `json:"text"`
				FinishReason   *string         `json:"finish_reason"`
				PromptLogprobs json.RawMessage `json:"prompt_logprobs"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(d), &c); err != nil || len(c.Choices) != 1 {
			t.Fatalf("chunk %s: %v, want one choice", d, err)
		}
		ch := c.Choices[0]
		s.text += ch.Text
		if ch.FinishReason != nil {
			s.finish = *ch.FinishReason
		}
		if len(ch.PromptLogprobs) > 0 {
			s.plpChunks++
			if i == 0 {
				s.plp = string(ch.PromptLogprobs)
			}
		}
	}
	return s
}

// promptLogprobsDocs posts a greedy completion with prompt_logprobs 1 and
// returns the answer (or each streamed chunk) re-encoded without its id and
// created, keeping member order.
func promptLogprobsDocs(t *testing.T, base, prompt string, stream bool) []string {
	t.Helper()
	var docs []string
	for _, b := range completionDocs(t, base, map[string]any{"prompt": prompt, "max_tokens": 8, "temperature": 0,
		"ignore_eos": true, "prompt_logprobs": 1, "stream": stream}) {
		docs = append(docs, withoutIDs(t, b))
	}
	return docs
}

// withoutIDs re-encodes a JSON object without its top-level id and created
// members, keeping the other members' order and bytes.
func withoutIDs(t *testing.T, b []byte) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("document %s is not a JSON object (%v)", b, err)
	}
	var out strings.Builder
	out.WriteString("{")
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatalf("document %s: %v", b, err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("document %s: %v", b, err)
		}
		if k == "id" || k == "created" {
			continue
		}
		if out.Len() > 1 {
			out.WriteString(",")
		}
		key, _ := json.Marshal(k)
		fmt.Fprintf(&out, "%s:%s", key, v)
	}
	out.WriteString("}")
	return out.String()
}
