package toolcall

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// counter returns an id generator giving id0, id1, ...
func counter() func() string {
	n := 0
	return func() string {
		n++
		return fmt.Sprintf("id%d", n-1)
	}
}

// parseWith parses text whole with counter ids.
func parseWith(f Format, text string) Result {
	p := NewParser(f, counter())
	return Collect(p.Feed(text), p.Flush())
}

// parseSplit parses text fed in the given pieces with counter ids.
func parseSplit(f Format, pieces []string) Result {
	p := NewParser(f, counter())
	var ds []Delta
	for _, s := range pieces {
		ds = append(ds, p.Feed(s))
	}
	ds = append(ds, p.Flush())
	return Collect(ds...)
}

type parseCase struct {
	name    string
	f       Format
	text    string
	content string
	calls   []Call // ids are id0, id1, ...
}

func calls(nameArgs ...string) []Call {
	var cs []Call
	for i := 0; i+1 < len(nameArgs); i += 2 {
		cs = append(cs, Call{ID: fmt.Sprintf("id%d", len(cs)), Name: nameArgs[i], Arguments: nameArgs[i+1]})
	}
	return cs
}

// parseCases are outputs as the models write them (Qwen 3 and Hermes 2 Pro
// after their chat templates' instructions, Llama 3.1/3.2's JSON calls,
// Mistral v0.3's and the v11 tokenizer's forms) and the edge cases.
var parseCases = []parseCase{
	{"qwen3 one call", Hermes,
		"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>",
		"", calls("get_weather", `{"city": "Paris", "unit": "celsius"}`)},
	{"qwen3 parallel", Hermes,
		"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>",
		"", calls("get_weather", `{"city": "Paris"}`, "get_weather", `{"city": "Rome"}`)},
	{"qwen content then call", Hermes,
		"I'll check the weather for you.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Z\\u00fcrich\", \"days\": 3}}\n</tool_call>",
		"I'll check the weather for you.", calls("get_weather", `{"city": "Z\u00fcrich", "days": 3}`)},
	{"hermes 2 pro arguments first", Hermes,
		"<tool_call>\n{\"arguments\": {\"symbol\": \"TSLA\"}, \"name\": \"get_stock_fundamentals\"}\n</tool_call>",
		"", calls("get_stock_fundamentals", `{"symbol": "TSLA"}`)},
	{"hermes string arguments", Hermes,
		"<tool_call>{\"name\": \"search\", \"arguments\": \"{\\\"query\\\": \\\"cats\\\"}\"}</tool_call>",
		"", calls("search", `{"query": "cats"}`)},
	{"hermes nested braces in strings", Hermes,
		"<tool_call>{\"name\":\"run\",\"arguments\":{\"code\":\"if x { y } \\\"}\\\" [\",\"n\":[1,{\"a\":2}]}}</tool_call> done",
		"done", calls("run", `{"code":"if x { y } \"}\" [","n":[1,{"a":2}]}`)},
	{"hermes extra member after arguments", Hermes,
		"<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}, \"id\": \"x\"}</tool_call>",
		"", calls("f", `{"a": 1}`)},
	{"hermes no closing tag", Hermes,
		"<tool_call>\n{\"name\": \"f\", \"arguments\": {}}",
		"", calls("f", `{}`)},
	{"hermes truncated arguments", Hermes,
		"<tool_call>\n{\"name\": \"f\", \"arguments\": {\"city\": \"Par",
		"", calls("f", `{"city": "Par`)},
	{"hermes not a call", Hermes,
		"Use <tool_call>like this</tool_call> please",
		"Use <tool_call>like this</tool_call> please", nil},
	{"hermes head cut short", Hermes,
		"text <tool_call>{\"na",
		"text <tool_call>{\"na", nil},
	{"hermes content only", Hermes, "The weather is fine.\n", "The weather is fine.\n", nil},
	{"hermes partial marker at end", Hermes, "a <tool_ca", "a <tool_ca", nil},
	{"hermes content between calls", Hermes,
		"<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\nand then\n<tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>\n",
		"and then", calls("a", `{}`, "b", `{}`)},

	{"llama3.1 json", Llama3JSON,
		`{"name": "get_weather", "parameters": {"city": "Paris"}}`,
		"", calls("get_weather", `{"city": "Paris"}`)},
	{"llama3.1 python tag", Llama3JSON,
		`<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}`,
		"", calls("get_weather", `{"city": "Paris"}`)},
	{"llama3.2 two calls", Llama3JSON,
		`{"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": "search", "parameters": {"query": "Rome"}}`,
		"", calls("get_weather", `{"city": "Paris"}`, "search", `{"query": "Rome"}`)},
	{"llama3 arguments key", Llama3JSON,
		` {"name": "f", "arguments": {"x": [1, 2]}}`, "", calls("f", `{"x": [1, 2]}`)},
	{"llama3 reversed keys", Llama3JSON,
		`{"parameters": {"x": 1}, "name": "f"}`, "", calls("f", `{"x": 1}`)},
	{"llama3 content", Llama3JSON, "The answer is {x}.", "The answer is {x}.", nil},
	{"llama3 json that is not a call", Llama3JSON, `{"answer": 42}`, `{"answer": 42}`, nil},
	{"llama3 text after call", Llama3JSON,
		`{"name": "f", "parameters": {}} Done.`, "Done.", calls("f", `{}`)},

	{"mistral v0.3", Mistral,
		`[TOOL_CALLS] [{"name": "get_current_weather", "arguments": {"location": "Paris, France", "format": "celsius"}}]`,
		"", calls("get_current_weather", `{"location": "Paris, France", "format": "celsius"}`)},
	{"mistral v0.3 two", Mistral,
		`[TOOL_CALLS][{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}]`,
		"", calls("a", `{"x": 1}`, "b", `{}`)},
	{"mistral content first", Mistral,
		"Sure.\n[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}]", "Sure.", calls("a", `{}`)},
	{"mistral v11", Mistral,
		`[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}`, "", calls("get_weather", `{"city": "Paris"}`)},
	{"mistral v11 two", Mistral,
		`[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]search[ARGS]{"query": "x"}`,
		"", calls("get_weather", `{"city": "Paris"}`, "search", `{"query": "x"}`)},
	{"mistral v11 call id", Mistral,
		`[TOOL_CALLS]f[CALL_ID]abc123XYZ[ARGS]{}`, "", calls("f", `{}`)},
	{"mistral reversed keys", Mistral,
		`[TOOL_CALLS][{"arguments": {"x": 1}, "name": "a"}]`, "", calls("a", `{"x": 1}`)},
	{"mistral bad name form", Mistral,
		`[TOOL_CALLS]{oops} more`, `[TOOL_CALLS]{oops} more`, nil},

	{"generic object", Generic, `{"name": "f", "arguments": {"a": "b"}}`, "", calls("f", `{"a": "b"}`)},
	{"generic array", Generic, "[{\"name\": \"f\", \"arguments\": {}},\n {\"name\": \"g\", \"arguments\": {\"k\": null}}]",
		"", calls("f", `{}`, "g", `{"k": null}`)},
	{"generic content", Generic, "Hello there.", "Hello there.", nil},
	{"generic leading space content", Generic, "  Hello", "  Hello", nil},
}

func TestParse(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			got := parseWith(tc.f, tc.text)
			want := Result{Content: tc.content, Calls: tc.calls}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Parse(%s, %q)\n got %+v\nwant %+v", tc.f, tc.text, got, want)
			}
			for _, c := range got.Calls {
				if strings.HasSuffix(tc.name, "truncated arguments") {
					continue
				}
				if !json.Valid([]byte(c.Arguments)) {
					t.Errorf("call %s: arguments %q are not JSON", c.Name, c.Arguments)
				}
			}
		})
	}
}

// TestParseSplits feeds every case split at each byte, byte by byte, and at
// random points: the result must equal the whole parse.
func TestParseSplits(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range parseCases {
		want := parseWith(tc.f, tc.text)
		for i := 0; i <= len(tc.text); i++ {
			if got := parseSplit(tc.f, []string{tc.text[:i], tc.text[i:]}); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s split at %d: got %+v, want %+v", tc.name, i, got, want)
			}
		}
		if got := parseSplit(tc.f, strings.Split(tc.text, "")); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s byte by byte: got %+v, want %+v", tc.name, got, want)
		}
		for range 50 {
			if got := parseSplit(tc.f, randomSplit(rng, tc.text)); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s random split: got %+v, want %+v", tc.name, got, want)
			}
		}
	}
}

// TestStreamedDeltas checks the shape of streamed deltas: a call's first
// delta has its id and name, later ones only arguments, and the arguments
// come in several pieces when the text does.
func TestStreamedDeltas(t *testing.T) {
	text := "Checking.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
	p := NewParser(Hermes, counter())
	var ds []Delta
	for _, s := range strings.Split(text, "") {
		if d := p.Feed(s); !d.Empty() {
			ds = append(ds, d)
		}
	}
	if d := p.Flush(); !d.Empty() {
		ds = append(ds, d)
	}
	var first *CallDelta
	argPieces := 0
	for _, d := range ds {
		for i := range d.Calls {
			c := d.Calls[i]
			if first == nil {
				first = &c
				if c.ID != "id0" || c.Name != "get_weather" {
					t.Fatalf("first call delta %+v: want id0 and the name", c)
				}
				continue
			}
			if c.ID != "" || c.Name != "" {
				t.Fatalf("later call delta %+v carries an id or name", c)
			}
			argPieces++
		}
	}
	if argPieces < 10 {
		t.Fatalf("arguments came in %d pieces, want one per byte", argPieces)
	}
	if got := Collect(ds...); got.Content != "Checking." || len(got.Calls) != 1 {
		t.Fatalf("collected %+v", got)
	}
}

func randomSplit(rng *rand.Rand, s string) []string {
	var out []string
	for len(s) > 0 {
		n := 1 + rng.IntN(min(len(s), 8))
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

var formats = []Format{Hermes, Llama3JSON, Mistral, Generic}

// FuzzParse checks that the parser never panics and that its result does
// not depend on how the text is split.
func FuzzParse(f *testing.F) {
	for _, tc := range parseCases {
		for i, fm := range formats {
			if fm == tc.f {
				f.Add(uint8(i), tc.text, uint64(len(tc.text)))
			}
		}
	}
	f.Fuzz(func(t *testing.T, fi uint8, text string, seed uint64) {
		fm := formats[int(fi)%len(formats)]
		want := parseWith(fm, text)
		rng := rand.New(rand.NewPCG(seed, 7))
		got := parseSplit(fm, randomSplit(rng, text))
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s %q: split parse %+v, whole %+v", fm, text, got, want)
		}
		if got := parseSplit(fm, strings.Split(text, "")); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s %q: byte-by-byte parse %+v, whole %+v", fm, text, got, want)
		}
	})
}

func TestDetect(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want Format
	}{
		{"{{'<tool_call>\\n'}}", Hermes},
		{"[TOOL_CALLS]", Mistral},
		{"<|python_tag|>", Llama3JSON},
		{`<|start_header_id|>... {"name": function name, "parameters": dictionary}`, Llama3JSON},
		{"{{ messages }}", Generic},
		{"", Generic},
	} {
		if got := Detect(tc.src); got != tc.want {
			t.Errorf("Detect(%q) = %s, want %s", tc.src, got, tc.want)
		}
	}
	for _, name := range []string{"", "auto"} {
		if f, err := ParseFormat(name); err != nil || f != "" {
			t.Errorf("ParseFormat(%q) = %q, %v", name, f, err)
		}
	}
	for _, f := range formats {
		if got, err := ParseFormat(string(f)); err != nil || got != f {
			t.Errorf("ParseFormat(%q) = %q, %v", f, got, err)
		}
	}
	if _, err := ParseFormat("pythonic"); err == nil {
		t.Error("ParseFormat(pythonic) succeeded")
	}
}

func TestNewID(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id := Hermes.NewID()
		if !strings.HasPrefix(id, "call_") || len(id) != 29 || seen[id] {
			t.Fatalf("id %q: want call_ and 24 fresh characters", id)
		}
		seen[id] = true
		m := Mistral.NewID()
		if len(m) != 9 || strings.Trim(m, idAlphabet) != "" {
			t.Fatalf("Mistral id %q: want 9 letters and digits", m)
		}
	}
}
