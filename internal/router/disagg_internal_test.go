package router

import "testing"

// TestPromptBound: the byte bound of each prompt shape the router reads,
// exact for token ids, and false for prompts it cannot read.
func TestPromptBound(t *testing.T) {
	for _, tc := range []struct {
		ep        endpoint
		body      string
		n         int
		exact, ok bool
	}{
		{endpointCompletions, `{"prompt":"héllo"}`, 6 + 2, false, true},
		{endpointCompletions, `{"prompt":["hello"]}`, 5 + 2, false, true},
		{endpointCompletions, `{"prompt":[1,2,3]}`, 3, true, true},
		{endpointCompletions, `{"prompt":[[1,2,3,4]]}`, 4, true, true},
		{endpointCompletions, `{"prompt":42}`, 0, false, false},
		{endpointCompletions, `{}`, 0, false, false},
		{endpointChat, `{"messages":[{"role":"user","content":"hi"}]}`, len(`[{"role":"user","content":"hi"}]`) + chatTemplateMargin, false, true},
		{endpointChat, `{"messages":[],"tools":[{}]}`, 2 + 4 + chatTemplateMargin, false, true},
		{endpointChat, `{"prompt":"x"}`, 0, false, false},
	} {
		req, e := parseRequest(tc.ep, []byte(tc.body), "req-1")
		if e != nil {
			t.Fatalf("parseRequest(%s): %v", tc.body, e)
		}
		n, exact, ok := promptBound(req)
		if n != tc.n || exact != tc.exact || ok != tc.ok {
			t.Errorf("promptBound(%s %s) = %d, %v, %v; want %d, %v, %v", tc.ep.name, tc.body, n, exact, ok, tc.n, tc.exact, tc.ok)
		}
	}
}

// TestTokenizeBody: /tokenize gets the prompt alone (completions) or the
// members that shape a chat prompt, nothing /tokenize would refuse.
func TestTokenizeBody(t *testing.T) {
	for _, tc := range []struct {
		ep         endpoint
		body, want string
	}{
		{endpointCompletions, `{"model":"m","prompt":"hi there","max_tokens":3,"stream":true}`, `{"prompt":"hi there"}`},
		{endpointCompletions, `{"prompt":["hi"]}`, `{"prompt":"hi"}`},
		{endpointChat, `{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[],"temperature":0,"chat_template_kwargs":{"a":1}}`,
			`{"messages":[{"role":"user","content":"x"}],"tools":[],"chat_template_kwargs":{"a":1}}`},
	} {
		req, e := parseRequest(tc.ep, []byte(tc.body), "req-1")
		if e != nil {
			t.Fatal(e)
		}
		b, err := tokenizeBody(req)
		if err != nil || string(b) != tc.want {
			t.Errorf("tokenizeBody(%s) = %s, %v; want %s", tc.body, b, err, tc.want)
		}
	}
}

// TestDecisionWork: a decision's prompt counts in the queues as its exact
// count, or its byte bound divided by bytesPerToken, or nothing.
func TestDecisionWork(t *testing.T) {
	for _, tc := range []struct {
		d    decision
		want int
	}{
		{decision{tokens: 200, countedBy: countTokenIDs}, 200},
		{decision{tokens: 150, countedBy: countTokenize}, 150},
		{decision{tokens: 4001, countedBy: countByteBound}, 1001},
		{decision{tokens: -1}, 0},
	} {
		if got := tc.d.work(); got != tc.want {
			t.Errorf("work of %+v = %d, want %d", tc.d, got, tc.want)
		}
	}
}
