package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestEchoLogprobsThroughRouter: a greedy completion with echo and
// logprobs through `tandem up` is what `tandem serve` answers: the same
// text, and the same legacy logprobs block, whose leading prompt entries
// the decode worker cannot compute (the router fills their token_logprobs
// from the prefill worker's prompt logprobs). Not streamed and streamed
// (the blocks of all chunks joined).
func TestEchoLogprobsThroughRouter(t *testing.T) {
	setup(t)
	serve := startServe(t, modelPath)
	up := startUp(t, modelPath)
	for pname, p := range prompts() {
		for _, stream := range []bool{false, true} {
			what := fmt.Sprintf("%s prompt, stream=%v", pname, stream)
			want := echoCompletion(t, serve, p, stream)
			got := echoCompletion(t, up, p, stream)
			if !strings.HasPrefix(want.Text, p) || len(want.TokenLogprobs) < 10 || want.TokenLogprobs[0] != "null" || want.TokenLogprobs[1] == "null" {
				t.Fatalf("%s: serve answered %q with token_logprobs %v; want the echoed prompt, its tokens' logprobs (the first null) and 8 more", what, want.Text, want.TokenLogprobs)
			}
			if got.Text != want.Text {
				t.Errorf("%s: text through the router %q, serve %q", what, got.Text, want.Text)
			}
			if strings.Join(got.Tokens, "\x00") != strings.Join(want.Tokens, "\x00") {
				t.Errorf("%s: tokens through the router %q, serve %q", what, got.Tokens, want.Tokens)
			}
			if strings.Join(got.TokenLogprobs, " ") != strings.Join(want.TokenLogprobs, " ") {
				t.Errorf("%s: token_logprobs through the router\n%v\nserve\n%v", what, got.TokenLogprobs, want.TokenLogprobs)
			}
			if fmt.Sprint(got.TextOffset) != fmt.Sprint(want.TextOffset) {
				t.Errorf("%s: text_offset through the router %v, serve %v", what, got.TextOffset, want.TextOffset)
			}
		}
	}
}

// echoAnswer is what an echo+logprobs completion returned, its streamed
// chunks joined.
type echoAnswer struct {
	Text          string
	Tokens        []string
	TokenLogprobs []string // as JSON: null or the number as sent
	TextOffset    []int
}

// echoCompletion posts a greedy completion of 8 tokens with echo and
// logprobs 1, streamed or not.
func echoCompletion(t *testing.T, base, prompt string, stream bool) echoAnswer {
	t.Helper()
	docs := completionDocs(t, base, map[string]any{"prompt": prompt, "max_tokens": 8, "temperature": 0, "ignore_eos": true,
		"echo": true, "logprobs": 1, "stream": stream})
	var a echoAnswer
	for _, doc := range docs {
		var d struct {
			Choices []struct {
				Text     string `json:"text"`
				Logprobs *struct {
					Tokens        []string          `json:"tokens"`
					TokenLogprobs []json.RawMessage `json:"token_logprobs"`
					TextOffset    []int             `json:"text_offset"`
				} `json:"logprobs"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(doc, &d); err != nil {
			t.Fatalf("answer from %s %s: %v", base, doc, err)
		}
		for _, c := range d.Choices {
			a.Text += c.Text
			if lp := c.Logprobs; lp != nil {
				a.Tokens = append(a.Tokens, lp.Tokens...)
				for _, x := range lp.TokenLogprobs {
					a.TokenLogprobs = append(a.TokenLogprobs, string(x))
				}
				a.TextOffset = append(a.TextOffset, lp.TextOffset...)
			}
		}
	}
	return a
}
