package answer

import "testing"

// TestFillEchoLogprobsLeavesOddShapes: nothing changes unless there is a
// legacy block at least as long as the prompt and prompt logprobs of the
// expected shape.
func TestFillEchoLogprobsLeavesOddShapes(t *testing.T) {
	const plp = `[null,{"5":{"logprob":-1.5,"decoded_token":"x"}}]`
	cases := []struct{ name, choice, plp, want string }{
		{"filled", `{"logprobs":{"tokens":["a","x"],"token_logprobs":[null,null]}}`, plp,
			`{"logprobs":{"tokens":["a","x"],"token_logprobs":[null,-1.5]}}`},
		{"no logprobs", `{"text":"a x","logprobs":null}`, plp, `{"text":"a x","logprobs":null}`},
		{"no token_logprobs", `{"logprobs":{"tokens":["a","x"]}}`, plp, `{"logprobs":{"tokens":["a","x"]}}`},
		{"block shorter than the prompt", `{"logprobs":{"token_logprobs":[null]}}`, plp, `{"logprobs":{"token_logprobs":[null]}}`},
		{"plain-number entries", `{"logprobs":{"token_logprobs":[null,null]}}`, `[null,{"5":-1.5}]`, `{"logprobs":{"token_logprobs":[null,null]}}`},
		{"entry with two tokens", `{"logprobs":{"token_logprobs":[null,null]}}`, `[null,{"5":{"logprob":-1},"6":{"logprob":-2}}]`, `{"logprobs":{"token_logprobs":[null,null]}}`},
		{"logprob not a number", `{"logprobs":{"token_logprobs":[null,null]}}`, `[null,{"5":{"logprob":"x"}}]`, `{"logprobs":{"token_logprobs":[null,null]}}`},
		{"prompt_logprobs not an array", `{"logprobs":{"token_logprobs":[null,null]}}`, `{}`, `{"logprobs":{"token_logprobs":[null,null]}}`},
		{"one-token prompt", `{"logprobs":{"token_logprobs":[null,-1]}}`, `[null]`, `{"logprobs":{"token_logprobs":[null,-1]}}`},
	}
	for _, tc := range cases {
		c, err := ParseObject([]byte(tc.choice))
		if err != nil {
			t.Fatal(err)
		}
		if got := string(FillEchoLogprobs(c, []byte(tc.plp)).Marshal()); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
}
