package toolcall

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"tandem/internal/api/openai"
	"tandem/internal/engine/grammar"
)

// byteVocab is a vocabulary of the 256 single bytes plus an end token
// (id 256).
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

// accepts reports whether g accepts text whole.
func accepts(g *grammar.Grammar, v *grammar.Vocab, text string) bool {
	m := grammar.NewMatcher(g, v)
	return m.AcceptBytes([]byte(text)) == nil && m.CanEnd()
}

func TestWithoutMarker(t *testing.T) {
	v := byteVocab(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, marker := range []string{hermesOpen, mistralCall} {
		g, err := grammar.CompileRegex(withoutMarker(marker), grammar.Options{})
		if err != nil {
			t.Fatalf("%s: %v", marker, err)
		}
		alphabet := marker + "xé"
		fixed := []string{"", "x", marker, "a" + marker, marker[:len(marker)-1], marker[:3] + marker,
			marker[:1] + marker[:1] + marker[1:], marker[:4] + "x" + marker[1:], "é" + marker[:5]}
		for i := range 3000 {
			var s string
			if i < len(fixed) {
				s = fixed[i]
			} else {
				var b strings.Builder
				for range rng.IntN(30) {
					if rng.IntN(6) == 0 {
						b.WriteString(marker[:1+rng.IntN(len(marker))])
					} else {
						c := []rune(alphabet)[rng.IntN(len([]rune(alphabet)))]
						b.WriteRune(c)
					}
				}
				s = b.String()
			}
			if got, want := accepts(g, v, s), !strings.Contains(s, marker); got != want {
				t.Fatalf("marker %q, text %q: accepted %v, want %v", marker, s, got, want)
			}
		}
	}
}

var testTools = []openai.Tool{
	{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","maxLength":12},` +
		`"unit":{"type":"string","enum":["celsius","fahrenheit"]},"days":{"type":"integer","minimum":1,"maximum":14}},"required":["city"]}`)},
	{Name: "search", Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","maxLength":8},"limit":{"type":"integer","minimum":0,"maximum":99}},"required":["query"],"additionalProperties":false}`)},
	{Name: "ping"}, // no parameters: any object
}

// checkArgs validates arguments against the test tools' schemas by hand.
func checkArgs(t *testing.T, c Call) {
	t.Helper()
	var args map[string]any
	dec := json.NewDecoder(strings.NewReader(c.Arguments))
	dec.UseNumber()
	if err := dec.Decode(&args); err != nil || dec.More() {
		t.Fatalf("call %s: arguments %q are not a JSON object: %v", c.Name, c.Arguments, err)
	}
	allowed := map[string]map[string]bool{
		"get_weather": {"city": true, "unit": true, "days": true},
		"search":      {"query": true, "limit": true},
	}
	if a, ok := allowed[c.Name]; ok {
		for k := range args {
			if !a[k] {
				t.Fatalf("call %s: unexpected argument %q in %s", c.Name, k, c.Arguments)
			}
		}
	}
	switch c.Name {
	case "get_weather":
		city, ok := args["city"].(string)
		if !ok || len([]rune(city)) > 12 {
			t.Fatalf("get_weather: bad city in %s", c.Arguments)
		}
		if u, ok := args["unit"]; ok && u != "celsius" && u != "fahrenheit" {
			t.Fatalf("get_weather: bad unit in %s", c.Arguments)
		}
		if d, ok := args["days"]; ok {
			n, isNum := d.(json.Number)
			f, err := n.Float64() // JSON Schema counts 7.0 as an integer
			if !isNum || err != nil || f != float64(int(f)) || f < 1 || f > 14 {
				t.Fatalf("get_weather: bad days in %s", c.Arguments)
			}
		}
	case "search":
		if q, ok := args["query"].(string); !ok || len([]rune(q)) > 8 {
			t.Fatalf("search: bad query in %s", c.Arguments)
		}
	case "ping":
	default:
		t.Fatalf("call of unknown function %q", c.Name)
	}
}

// generate samples a random output under g, byte by byte: the end token
// is taken with probability 1/3 whenever it is allowed.
func generate(t *testing.T, g *grammar.Grammar, v *grammar.Vocab, rng *rand.Rand) (string, bool) {
	m := grammar.NewMatcher(g, v)
	mask := grammar.NewBitset(v.Size())
	var out []byte
	for range 4000 {
		if m.Done() {
			return string(out), true
		}
		m.Mask(mask)
		if mask.Has(256) && rng.IntN(3) == 0 {
			return string(out), true
		}
		var ids []int32
		for i := range 256 {
			if mask.Has(i) {
				ids = append(ids, int32(i))
			}
		}
		if len(ids) == 0 {
			if mask.Has(256) {
				return string(out), true
			}
			t.Fatalf("no token allowed after %q", out)
		}
		// Prefer structural bytes so that documents finish.
		id := ids[rng.IntN(len(ids))]
		for _, c := range []byte(`"}],`) {
			if mask.Has(int(c)) && rng.IntN(4) == 0 {
				id = int32(c)
				break
			}
		}
		if err := m.Accept(id); err != nil {
			t.Fatalf("Accept(%q) after %q: %v", id, out, err)
		}
		out = append(out, byte(id))
	}
	return string(out), false
}

// TestGrammarCalls samples outputs under each format's grammar for
// required, named and auto choices, with and without parallel calls, and
// parses them back: required and named outputs are calls only, of the
// right functions and count, with arguments valid for the schemas.
func TestGrammarCalls(t *testing.T) {
	v := byteVocab(t)
	rng := rand.New(rand.NewPCG(5, 6))
	for _, f := range formats {
		for _, tc := range []struct {
			name     string
			choice   openai.Choice
			parallel bool
		}{
			{"required", openai.Choice{Mode: openai.ChoiceRequired}, false},
			{"required parallel", openai.Choice{Mode: openai.ChoiceRequired}, true},
			{"named", openai.Choice{Mode: openai.ChoiceFunction, Name: "search"}, true},
			{"auto", openai.Choice{Mode: openai.ChoiceAuto}, true},
		} {
			for _, ws := range []bool{false, true} {
				spec := GrammarSpec{Format: f, Tools: testTools, Choice: tc.choice, Parallel: tc.parallel,
					Options: grammar.Options{DisableAnyWhitespace: ws, MaxWhitespace: 2}}
				g, gerr := Grammar(spec)
				if gerr != nil {
					t.Fatalf("%s %s: %v", f, tc.name, gerr)
				}
				finished, multi := 0, 0
				for range 60 {
					text, ok := generate(t, g, v, rng)
					if !ok {
						continue
					}
					finished++
					r := parseWith(f, text)
					if tc.choice.Mode != openai.ChoiceAuto {
						if r.Content != "" || len(r.Calls) == 0 {
							t.Fatalf("%s %s: %q parsed as content %q and %d calls", f, tc.name, text, r.Content, len(r.Calls))
						}
						if !tc.parallel || tc.choice.Mode == openai.ChoiceFunction {
							if len(r.Calls) != 1 {
								t.Fatalf("%s %s: %q has %d calls, want 1", f, tc.name, text, len(r.Calls))
							}
						}
					}
					if len(r.Calls) > 1 {
						multi++
					}
					for _, c := range r.Calls {
						if tc.choice.Mode == openai.ChoiceFunction && c.Name != "search" {
							t.Fatalf("%s %s: call of %s", f, tc.name, c.Name)
						}
						checkArgs(t, c)
					}
				}
				if finished < 30 {
					t.Fatalf("%s %s: only %d of 60 samples finished", f, tc.name, finished)
				}
				if tc.name == "required parallel" && multi == 0 {
					t.Errorf("%s %s: no sample made several calls", f, tc.name)
				}
			}
		}
	}
}

// TestGrammarAcceptsModelSyntax checks that the grammars accept the calls
// as the chat templates' models write them, and refuse wrong ones.
func TestGrammarAcceptsModelSyntax(t *testing.T) {
	v := byteVocab(t)
	req := openai.Choice{Mode: openai.ChoiceRequired}
	for _, tc := range []struct {
		f        Format
		choice   openai.Choice
		parallel bool
		text     string
		want     bool
	}{
		{Hermes, req, false, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", true},
		{Hermes, req, true, "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"x\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>", true},
		{Hermes, req, false, "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"x\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>", false},
		{Hermes, req, false, "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>", false},
		{Hermes, req, false, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"unit\": \"celsius\"}}\n</tool_call>", false}, // city required
		{Hermes, req, false, "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"x\", \"other\": 1}}\n</tool_call>", false},
		{Hermes, openai.Choice{Mode: openai.ChoiceAuto}, true, "Let me see.\n<tool_call>\n{\"name\": \"ping\", \"arguments\": {\"any\": [1]}}\n</tool_call>", true},
		{Hermes, openai.Choice{Mode: openai.ChoiceAuto}, true, "Just text, no calls.", true},
		{Hermes, openai.Choice{Mode: openai.ChoiceAuto}, true, "Bad <tool_call>{}", false},
		{Llama3JSON, req, false, `{"name": "get_weather", "parameters": {"city": "Paris", "days": 3}}`, true},
		{Llama3JSON, req, true, `{"name": "ping", "parameters": {}}; {"name": "search", "parameters": {"query": "q"}}`, true},
		{Llama3JSON, openai.Choice{Mode: openai.ChoiceAuto}, true, `The answer.`, true},
		{Llama3JSON, openai.Choice{Mode: openai.ChoiceAuto}, true, ` {"x": 1}`, false},
		{Mistral, req, true, `[TOOL_CALLS][{"name": "ping", "arguments": {}}, {"name": "search", "arguments": {"query": "a"}}]`, true},
		{Mistral, openai.Choice{Mode: openai.ChoiceFunction, Name: "ping"}, true, `[TOOL_CALLS][{"name": "search", "arguments": {"query": "a"}}]`, false},
		{Generic, req, false, `{"name": "ping", "arguments": {}}`, true},
		{Generic, req, true, `[{"name": "ping", "arguments": {}}, {"name": "ping", "arguments": {}}]`, true},
	} {
		g, gerr := Grammar(GrammarSpec{Format: tc.f, Tools: testTools, Choice: tc.choice, Parallel: tc.parallel})
		if gerr != nil {
			t.Fatal(gerr)
		}
		if got := accepts(g, v, tc.text); got != tc.want {
			t.Errorf("%s %v parallel %v: %q accepted %v, want %v", tc.f, tc.choice, tc.parallel, tc.text, got, tc.want)
		}
	}
}

func TestGrammarErrors(t *testing.T) {
	if g, e := Grammar(GrammarSpec{Format: Hermes, Tools: testTools, Choice: openai.Choice{Mode: openai.ChoiceNone}}); g != nil || e != nil {
		t.Errorf("choice none: got %v, %v; want no grammar", g, e)
	}
	bad := []openai.Tool{testTools[0], {Name: "odd", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"not":{}}}}`)}}
	_, e := Grammar(GrammarSpec{Format: Hermes, Tools: bad, Choice: openai.Choice{Mode: openai.ChoiceRequired}})
	if e == nil || e.Param != "tools[1].function.parameters" || !strings.Contains(e.Message, "not") {
		t.Errorf("unsupported schema: got %+v, want an error naming tools[1].function.parameters and the keyword", e)
	}
	// auto without strict tools leaves the odd schema alone.
	if _, e := Grammar(GrammarSpec{Format: Hermes, Tools: bad, Choice: openai.Choice{Mode: openai.ChoiceAuto}}); e != nil {
		t.Errorf("auto, no strict tools: %v", e)
	}
}

// TestGrammarThinkAndMistralNames: a reasoning block may precede required
// calls (optional, or already open in the prompt), and Mistral's v11 name
// form is constrained when asked for.
func TestGrammarThinkAndMistralNames(t *testing.T) {
	v := byteVocab(t)
	req := openai.Choice{Mode: openai.ChoiceRequired}
	call := "<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>"
	for _, tc := range []struct {
		spec GrammarSpec
		text string
		want bool
	}{
		{GrammarSpec{Format: Hermes, Think: ThinkOptional}, call, true},
		{GrammarSpec{Format: Hermes, Think: ThinkOptional}, "<think>\nI should ping. <b>\n</think>\n\n" + call, true},
		{GrammarSpec{Format: Hermes, Think: ThinkOptional}, "<think>\nno close\n" + call, false},
		{GrammarSpec{Format: Hermes}, "<think>\n</think>\n\n" + call, false},
		{GrammarSpec{Format: Hermes, Think: ThinkOpen}, "Reasoning.</think>\n\n" + call, true},
		{GrammarSpec{Format: Hermes, Think: ThinkOpen}, call, false},
		{GrammarSpec{Format: Mistral, MistralNames: true}, `[TOOL_CALLS]search[ARGS]{"query": "a"}`, true},
		{GrammarSpec{Format: Mistral, MistralNames: true, Parallel: true}, `[TOOL_CALLS]ping[ARGS]{}[TOOL_CALLS]search[ARGS]{"query": "b"}`, true},
		{GrammarSpec{Format: Mistral, MistralNames: true}, `[TOOL_CALLS]ping[ARGS]{}[TOOL_CALLS]ping[ARGS]{}`, false},
		{GrammarSpec{Format: Mistral, MistralNames: true}, `[TOOL_CALLS][{"name": "ping", "arguments": {}}]`, false},
	} {
		tc.spec.Tools, tc.spec.Choice = testTools, req
		g, gerr := Grammar(tc.spec)
		if gerr != nil {
			t.Fatal(gerr)
		}
		if got := accepts(g, v, tc.text); got != tc.want {
			t.Errorf("%+v: %q accepted %v, want %v", tc.spec, tc.text, got, tc.want)
		}
		if tc.want && tc.spec.Format == Mistral {
			if r := Parse(Mistral, tc.text); len(r.Calls) == 0 || r.Content != "" {
				t.Errorf("%q parsed as %+v", tc.text, r)
			}
		}
	}
}

// TestGrammarTooLargeToolListNamesTool: 128 tools whose schemas each
// compile alone but not together (the red-team finding 4 of 2026-12-03,
// smaller) are refused with an error naming one tool's parameters, from
// the one compile of the whole list; before, every schema was compiled
// again one by one and none was named. A tool list compiled under a done
// context stops at once.
func TestGrammarTooLargeToolListNamesTool(t *testing.T) {
	var tools []openai.Tool
	for i := range 128 {
		tools = append(tools, openai.Tool{Name: fmt.Sprintf("f%d", i), Parameters: json.RawMessage(
			`{"type":"object","properties":{"a":{"type":"string","pattern":"^(a|b)*a(a|b){12}$"},"b":{"type":"string","pattern":"^(a|b)*a(a|b){11}$"}},"required":["a","b"]}`)})
	}
	spec := GrammarSpec{Format: Hermes, Tools: tools, Choice: openai.Choice{Mode: openai.ChoiceRequired}}
	_, e := Grammar(spec)
	if e == nil || !strings.HasPrefix(e.Param, "tools[") || !strings.HasSuffix(e.Param, "].function.parameters") ||
		!strings.Contains(e.Message, "takes the most") {
		t.Fatalf("128 large tools: %+v, want an error naming one tool's parameters", e)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	spec.Options = spec.Options.WithContext(ctx)
	if _, e := Grammar(spec); e == nil || !strings.Contains(e.Message, "context canceled") {
		t.Errorf("under a cancelled context: %+v", e)
	}
}
