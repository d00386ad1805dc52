package grammar

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// Two tools of a typical tool-calling request.
const (
	weatherParams = `{"type":"object","properties":{"location":{"type":"string","maxLength":12},"unit":{"enum":["celsius","fahrenheit"]}},"required":["location"],"additionalProperties":false}`
	timeParams    = `{"$defs":{"tz":{"type":"string","pattern":"^[A-Z][a-z]+/[A-Z][a-z]+$"}},"type":"object","properties":{"tz":{"$ref":"#/$defs/tz"}},"required":["tz"]}`
)

// toolCall is `{"name": "<name>", "arguments": <params>}`, the JSON of one
// call in Hermes and Mistral syntax.
func toolCall(name, params string) Part {
	return Seq(Lit(`{"name": "`+name+`", "arguments": `), Schema([]byte(params)), Lit("}"))
}

func toolCalls() Part {
	return Alt(toolCall("get_weather", weatherParams), toolCall("get_time", timeParams))
}

// hermesParts: 1 to 3 <tool_call> blocks separated by a newline.
func hermesParts() Part {
	return Repeat(Seq(Lit("<tool_call>\n"), toolCalls(), Lit("\n</tool_call>")), 1, 3, Lit("\n"))
}

// mistralParts: [TOOL_CALLS] and a JSON array of one or more calls.
func mistralParts() Part {
	return Seq(Lit("[TOOL_CALLS]["), Repeat(toolCalls(), 1, -1, Lit(", ")), Lit("]"))
}

func mustParts(t testing.TB, p Part, opts Options) *Grammar {
	t.Helper()
	g, err := CompileParts(p, opts)
	if err != nil {
		t.Fatalf("CompileParts: %v", err)
	}
	return g
}

func TestPartsToolCalls(t *testing.T) {
	v := byteVocab(t)
	w := `{"name": "get_weather", "arguments": {"location": "Paris", "unit": "celsius"}}`
	w2 := `{"name": "get_weather", "arguments": {"location":"Oslo"}}`
	tm := `{"name": "get_time", "arguments": {"tz": "Europe/Paris"}}`
	block := func(s string) string { return "<tool_call>\n" + s + "\n</tool_call>" }
	cases := []struct {
		name string
		p    Part
		opts Options
		good []string
		bad  []string
	}{
		{"hermes", hermesParts(), Options{}, []string{
			block(w), block(tm), block(w) + "\n" + block(tm), block(w) + "\n" + block(tm) + "\n" + block(w2),
			block(`{"name": "get_weather", "arguments": { "location" : "Rome" }}`),
		}, []string{
			"", block(w) + "\n", block(w) + block(tm), // separator missing
			block(w) + "\n" + block(w) + "\n" + block(w) + "\n" + block(w), // 4 calls
			block(`{"name": "get_wether", "arguments": {"location": "Paris"}}`),
			block(`{"name": "get_weather", "arguments": {"unit": "celsius"}}`),               // required missing
			block(`{"name": "get_weather", "arguments": {"location": "Paris", "x": 1}}`),     // additional property
			block(`{"name": "get_weather", "arguments": {"location": "Paris Paris Paris"}}`), // maxLength
			block(`{"name": "get_time", "arguments": {"tz": "europe/paris"}}`),               // pattern through $ref
			block(`{"name": "get_time", "arguments": {"location": "Paris"}}`),                // other tool's arguments
			" " + block(w), block(w) + " ", block(" " + w),
		}},
		{"hermes compact", hermesParts(), Options{DisableAnyWhitespace: true}, []string{
			block(`{"name": "get_weather", "arguments": {"location":"Oslo"}}`),
		}, []string{
			block(`{"name": "get_weather", "arguments": {"location": "Oslo"}}`),
		}},
		{"mistral", mistralParts(), Options{}, []string{
			"[TOOL_CALLS][" + w + "]", "[TOOL_CALLS][" + w + ", " + tm + ", " + w2 + ", " + w + "]",
		}, []string{
			"[TOOL_CALLS][]", "[TOOL_CALLS][" + w + "," + tm + "]", "[TOOL_CALLS]" + w, "[TOOL_CALLS][" + w + ", ]",
		}},
		{"repeat bounds", Repeat(Alt(Lit("a"), Lit("bc")), 0, 2, Lit(",")), Options{}, []string{
			"", "a", "bc", "a,bc", "bc,bc",
		}, []string{",", "a,", "abc", "a,a,a", "b"}},
		{"repeat no separator", Repeat(Lit("ab"), 2, -1, Part{}), Options{}, []string{"abab", "ababab"}, []string{"ab", "aba", ""}},
		{"repeat exact", Repeat(Regex(`[0-9]+`), 3, 3, Lit(".")), Options{}, []string{"1.22.333"}, []string{"1.2", "1.2.3.4", "1..2"}},
		{"optional", Seq(Lit("x"), Optional(Lit("y")), Lit("z")), Options{}, []string{"xz", "xyz"}, []string{"xyyz", "x"}},
		{"regex anchors", Seq(Regex(`^a+$`), Lit("!")), Options{}, []string{"a!", "aaa!"}, []string{"!", "ab!"}},
		{"empty seq", Seq(), Options{}, []string{""}, []string{"a"}},
		{"schema values", Seq(Schema([]byte(`{"type":"integer","minimum":3}`)), Lit(";"), Schema([]byte(`true`))), Options{}, []string{
			`3;null`, `10;{"a": [1, "x"]}`,
		}, []string{`2;null`, `3; null`, ` 3;null`, `3;`}},
		{"same part twice", func() Part { d := Schema([]byte(`{"type":"boolean"}`)); return Seq(d, Lit(" "), d) }(), Options{}, []string{"true false"}, []string{"true 1"}},
	}
	for _, tc := range cases {
		g := mustParts(t, tc.p, tc.opts)
		for _, d := range tc.good {
			if !accepts(g, v, d) {
				t.Errorf("%s: rejects %q, want accepted", tc.name, d)
			}
		}
		for _, d := range tc.bad {
			if accepts(g, v, d) {
				t.Errorf("%s: accepts %q, want rejected", tc.name, d)
			}
		}
	}
}

// TestPartsRefsPerSchema: two schemas using the same $ref pointer resolve
// it each within itself.
func TestPartsRefsPerSchema(t *testing.T) {
	v := byteVocab(t)
	a := `{"$defs":{"x":{"type":"integer"}},"$ref":"#/$defs/x"}`
	b := `{"$defs":{"x":{"type":"string"}},"type":"array","items":{"$ref":"#/$defs/x"}}`
	c := `{"anyOf":[{"type":"null"},{"type":"array","items":{"$ref":"#"},"maxItems":2}]}` // recursive through "#"
	g := mustParts(t, Seq(Schema([]byte(a)), Lit("|"), Schema([]byte(b)), Lit("|"), Schema([]byte(c))), Options{DisableAnyWhitespace: true})
	for d, want := range map[string]bool{
		`1|["a"]|null`: true, `1|[]|[[null],[]]`: true, `"a"|["a"]|null`: false, `1|[1]|null`: false, `1|[]|[1]`: false,
	} {
		if got := accepts(g, v, d); got != want {
			t.Errorf("accepts %q = %v, want %v", d, got, want)
		}
	}
}

// TestPartsErrors: bad parts are refused with errors that say what and
// where; unsupported keywords still wrap ErrUnsupported and name the
// keyword.
func TestPartsErrors(t *testing.T) {
	cases := []struct {
		p    Part
		is   error
		want string
	}{
		{Part{}, nil, "zero Part"},
		{Seq(Lit("a"), Part{}), nil, "zero Part"},
		{Alt(), nil, "no alternatives"},
		{Repeat(Lit("a"), 2, 1, Part{}), nil, "bad counts"},
		{Repeat(Lit("a"), -1, 3, Part{}), nil, "bad counts"},
		{Repeat(Lit("a"), 0, -2, Part{}), nil, "bad counts"},
		{Repeat(Lit("a"), 0, MaxPartRepeat+1, Part{}), ErrTooLarge, "above"},
		{Seq(Lit("x"), Schema([]byte(`{"type":"object","properties":{"a":{"not":{}}}}`))), ErrUnsupported, `schema part 3: grammar: unsupported schema feature: #/properties/a: keyword "not"`},
		{Schema([]byte(`{"type":`)), nil, "schema part 1 is not valid JSON"},
		{Regex(`a(?=b)`), nil, "regex part 1"},
		{Seq(Lit("a"), Schema([]byte(`{"type":"integer","minimum":5,"maximum":4}`))), nil, "admits no value"},
		{Schema([]byte(`{"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"null"}]}},"$ref":"#/$defs/a"}`)), ErrUnsupported, "schema part 1 #/$defs/a refers to itself"},
	}
	for i, tc := range cases {
		_, err := CompileParts(tc.p, Options{})
		if err == nil {
			t.Errorf("case %d: no error, want %q", i, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("case %d: error %q does not contain %q", i, err, tc.want)
		}
		if tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("case %d: error %q does not wrap %v", i, err, tc.is)
		}
	}
}

// TestPartsPruned: an alternative that can never complete is pruned, so
// its first byte is not in the mask (every live state can finish).
func TestPartsPruned(t *testing.T) {
	v := byteVocab(t)
	g := mustParts(t, Alt(Lit("a"), Seq(Lit("b"), Schema([]byte(`false`)))), Options{})
	m := NewMatcher(g, v)
	mask := NewBitset(v.Size())
	m.Mask(mask)
	if !mask.Has('a') || mask.Has('b') {
		t.Errorf("mask has a %v, b %v; want a only", mask.Has('a'), mask.Has('b'))
	}
}

// toolVocab is synthVocab plus tokens spanning tool-call syntax.
func toolVocab(t testing.TB) *Vocab {
	t.Helper()
	words := []string{
		"<tool_call>", "<tool_call>\n", "\n</tool_call>", "</tool_call>", "<", ">", "tool", "_call", "\n",
		`{"name": "`, `get_weather`, `get_time`, `", "arguments": `, `"arguments"`, `}}`, `}]`, `, {"`, "[TOOL_CALLS]", "[TOOL",
		`{"location": "`, `celsius`, `"unit"`, "Europe", "/Paris", "Paris", `"}`, `"}}`, `": "`,
	}
	for c := byte(' '); c < 0x7f; c++ {
		words = append(words, string([]byte{c}))
	}
	toks := make([][]byte, 0, len(words)+1)
	for _, w := range words {
		toks = append(toks, []byte(w))
	}
	toks = append(toks, []byte{}) // end token
	v, err := NewVocab(toks, []int32{int32(len(toks) - 1)})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// checkToolOutput is an independent check of a finished generation: the
// calls, split by their syntax, decode with encoding/json, name a known
// tool and carry its required argument.
func checkToolOutput(t *testing.T, format, out string) {
	t.Helper()
	var calls []string
	switch format {
	case "hermes":
		for i, b := range strings.Split(out, "\n</tool_call>") {
			if b == "" && i > 0 {
				continue
			}
			b = strings.TrimPrefix(b, "\n")
			if !strings.HasPrefix(b, "<tool_call>\n") {
				t.Fatalf("hermes output %q: block %q", out, b)
			}
			calls = append(calls, strings.TrimPrefix(b, "<tool_call>\n"))
		}
	case "mistral":
		var raw []json.RawMessage
		if !strings.HasPrefix(out, "[TOOL_CALLS]") || json.Unmarshal([]byte(strings.TrimPrefix(out, "[TOOL_CALLS]")), &raw) != nil {
			t.Fatalf("mistral output %q is not [TOOL_CALLS] and a JSON array", out)
		}
		for _, r := range raw {
			calls = append(calls, string(r))
		}
	}
	required := map[string]string{"get_weather": "location", "get_time": "tz"}
	for _, c := range calls {
		var call struct {
			Name      string         `json:"name"`
			Arguments map[string]any `json:"arguments"`
		}
		if err := json.Unmarshal([]byte(c), &call); err != nil {
			t.Fatalf("%s output %q: call %q: %v", format, out, c, err)
		}
		if _, ok := call.Arguments[required[call.Name]].(string); !ok {
			t.Fatalf("%s output %q: call %q lacks its required string argument", format, out, c)
		}
	}
}

// TestPartsMaskAgreesWithAccept: random masked generations through the
// tool-call grammars with multi-byte tokens; at every step the mask equals
// the tokens Accept takes, and finished outputs pass checkToolOutput.
func TestPartsMaskAgreesWithAccept(t *testing.T) {
	v := toolVocab(t)
	end := int32(v.Size() - 1)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, f := range []struct {
		name string
		p    Part
	}{{"hermes", hermesParts()}, {"mistral", mistralParts()}} {
		g := mustParts(t, f.p, Options{MaxWhitespace: 2})
		finished := 0
		for run := 0; run < 12; run++ {
			m := NewMatcher(g, v)
			var out []byte
			for step := 0; step < 400 && !m.Ended(); step++ {
				mask := checkMaskAgrees(t, m, v, fmt.Sprintf("%s after %q", f.name, out))
				var allowed []int32
				for id := 0; id < v.Size(); id++ {
					if mask.Has(id) {
						allowed = append(allowed, int32(id))
					}
				}
				if len(allowed) == 0 {
					t.Fatalf("%s: empty mask after %q", f.name, out)
				}
				tok := allowed[rng.IntN(len(allowed))]
				if mask.Has(int(end)) && rng.IntN(3) > 0 {
					tok = end
				}
				// Prefer multi-byte tokens, so that outputs finish.
				for try := 0; try < 3 && len(v.Token(tok)) == 1; try++ {
					tok = allowed[rng.IntN(len(allowed))]
				}
				if err := m.Accept(tok); err != nil {
					t.Fatalf("%s: Accept(%d) of a masked token: %v", f.name, tok, err)
				}
				out = append(out, v.Token(tok)...)
			}
			if m.Ended() {
				finished++
				checkToolOutput(t, f.name, string(out))
			}
		}
		if finished == 0 {
			t.Errorf("%s: no generation finished", f.name)
		}
	}
}
