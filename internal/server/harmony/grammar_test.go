package harmony

import (
	"encoding/json"
	"testing"

	"tandem/internal/api/openai"
	"tandem/internal/engine/grammar"
)

func byteVocab(t *testing.T) *grammar.Vocab {
	t.Helper()
	toks := make([][]byte, 257)
	for i := range 256 {
		toks[i] = []byte{byte(i)}
	}
	v, err := grammar.NewVocab(toks, []int32{256})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func accepts(g *grammar.Grammar, v *grammar.Vocab, text string) bool {
	m := grammar.NewMatcher(g, v)
	return m.AcceptBytes([]byte(text)) == nil && m.CanEnd()
}

// TestGrammar: the required/named grammar accepts gpt-oss's call syntax
// (with and without reasoning first) with arguments following the schema,
// refuses other text, and what it accepts parses back as the call.
func TestGrammar(t *testing.T) {
	tools := []openai.Tool{
		{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`)},
		{Name: "get_time"},
	}
	v := byteVocab(t)
	req, err := Grammar(tools, openai.Choice{Mode: openai.ChoiceRequired}, grammar.Options{})
	if err != nil {
		t.Fatal(err)
	}
	named, err := Grammar(tools, openai.Choice{Mode: openai.ChoiceFunction, Name: "get_time"}, grammar.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const call = `<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}`
	for _, c := range []struct {
		g    *grammar.Grammar
		text string
		ok   bool
		name string
	}{
		{req, call, true, "get_weather"},
		{req, "<|channel|>analysis<|message|>Need a < b.<|end|><|start|>assistant" + call, true, "get_weather"},
		{req, `<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{"zone":1}`, true, "get_time"},
		{req, `<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"town":"Paris"}`, false, ""},
		{req, `<|channel|>commentary to=functions.nope <|constrain|>json<|message|>{}`, false, ""},
		{req, "<|channel|>final<|message|>hi", false, ""},
		{req, "<|channel|>analysis<|message|>a<|end|>b<|end|><|start|>assistant" + call, false, ""},
		{named, `<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{}`, true, "get_time"},
		{named, call, false, ""},
	} {
		if got := accepts(c.g, v, c.text); got != c.ok {
			t.Errorf("accepts(%q) = %v, want %v", c.text, got, c.ok)
			continue
		}
		if c.ok {
			r := Parse("<|start|>assistant", c.text, nil)
			if len(r.Calls) != 1 || r.Calls[0].Name != c.name || r.Content != "" {
				t.Errorf("%q parses as %+v, want one call of %s", c.text, r, c.name)
			}
		}
	}
	if _, err := Grammar(tools, openai.Choice{Mode: openai.ChoiceFunction, Name: "x"}, grammar.Options{}); err == nil {
		t.Error("a named function not among the tools gives no error")
	}
}
