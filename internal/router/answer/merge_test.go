package answer

import (
	"encoding/json"
	"testing"

	"tandem/internal/api/openai"
)

// TestSplice: each change applies to what it names, every other byte
// stays; a choices member that is not an array of objects is an error.
func TestSplice(t *testing.T) {
	const chunk = `{"id":"cmpl-1", "choices":[{"index":0, "text":" a","logprobs":{"token_logprobs":[null,null]}}],"x":[1, 2]}`
	plp := json.RawMessage(`[null,{"7":{"logprob":-0.5}}]`)
	for _, tc := range []struct {
		name string
		s    Splice
		want string
	}{
		{"id and index", Splice{ID: "cmpl-m", Reindex: true, Index: 3},
			`{"id":"cmpl-m","choices":[{"index":3,"text":" a","logprobs":{"token_logprobs":[null,null]}}],"x":[1, 2]}`},
		{"prompt logprobs", Splice{PromptLogprobs: plp},
			`{"id":"cmpl-1","choices":[{"index":0,"text":" a","logprobs":{"token_logprobs":[null,null]},"prompt_logprobs":[null,{"7":{"logprob":-0.5}}]}],"x":[1, 2]}`},
		{"prompt logprobs and echo", Splice{PromptLogprobs: plp, Echo: true},
			`{"id":"cmpl-1","choices":[{"index":0,"text":" a","logprobs":{"token_logprobs":[null,-0.5]},"prompt_logprobs":[null,{"7":{"logprob":-0.5}}]}],"x":[1, 2]}`},
		{"echo without prompt logprobs", Splice{Echo: true},
			`{"id":"cmpl-1","choices":[{"index":0,"text":" a","logprobs":{"token_logprobs":[null,null]}}],"x":[1, 2]}`},
	} {
		o, err := ParseObject([]byte(chunk))
		if err != nil {
			t.Fatal(err)
		}
		got, err := tc.s.Apply(o)
		if err != nil || string(got.Marshal()) != tc.want {
			t.Errorf("%s: %s, %v; want %s", tc.name, got.Marshal(), err, tc.want)
		}
	}
	o, _ := ParseObject([]byte(`{"choices":[1]}`))
	if _, err := (Splice{Reindex: true}).Apply(o); err == nil {
		t.Error("a choice that is not an object: want an error")
	}
}

// TestMergeUsage: each prompt's tokens count once (its n samples share
// it), every sample's completion tokens count, cached tokens are the most
// any sample had.
func TestMergeUsage(t *testing.T) {
	u := func(p, c, cached int) *openai.Usage {
		return &openai.Usage{PromptTokens: p, CompletionTokens: c, PromptTokensDetails: &openai.PromptTokensDetails{CachedTokens: cached}}
	}
	// Two prompts of 5 and 7 tokens, n = 2; the first sample of prompt 0 sent no usage.
	m := MergeUsage([]*openai.Usage{nil, u(5, 3, 0), u(7, 4, 2), u(7, 1, 6)}, 2)
	if m == nil || m.PromptTokens != 12 || m.CompletionTokens != 8 || m.TotalTokens != 20 || m.PromptTokensDetails.CachedTokens != 6 {
		t.Errorf("merged usage %+v, want 12 prompt, 8 completion, 20 total, 6 cached", m)
	}
	if MergeUsage([]*openai.Usage{nil, nil}, 1) != nil {
		t.Error("no usage at all: want nil")
	}
}

// TestMergeDocs: the first answer's members under the merged id, the
// choices in sample order, the usage merged; an answer without choices
// is an error.
func TestMergeDocs(t *testing.T) {
	a, _ := ParseObject([]byte(`{"id":"a","object":"text_completion","choices":[{"index":0,"text":"x"}],"usage":{"prompt_tokens":2,"completion_tokens":1,"total_tokens":3}}`))
	b, _ := ParseObject([]byte(`{"id":"b","object":"text_completion","choices":[{"index":1,"text":"y"}],"usage":{"prompt_tokens":2,"completion_tokens":2,"total_tokens":4}}`))
	got, err := MergeDocs([]Object{a, b}, "cmpl-m", 2)
	want := `{"id":"cmpl-m","object":"text_completion","choices":[{"index":0,"text":"x"},{"index":1,"text":"y"}],"usage":{"prompt_tokens":2,"completion_tokens":3,"total_tokens":5}}` + "\n"
	if err != nil || string(got) != want {
		t.Errorf("MergeDocs = %s, %v; want %s", got, err, want)
	}
	c, _ := ParseObject([]byte(`{"id":"c"}`))
	if _, err := MergeDocs([]Object{a, c}, "cmpl-m", 1); err == nil {
		t.Error("an answer without choices: want an error")
	}
}
