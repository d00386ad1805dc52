package grammar

import (
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// byteVocab has one token per byte value plus an end token (256).
func byteVocab(t testing.TB) *Vocab {
	t.Helper()
	toks := make([][]byte, 257)
	for i := 0; i < 256; i++ {
		toks[i] = []byte{byte(i)}
	}
	v, err := NewVocab(toks, []int32{256})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// accepts feeds doc byte by byte and reports whether every byte is taken
// and the document can end.
func accepts(g *Grammar, v *Vocab, doc string) bool {
	m := NewMatcher(g, v)
	for i := 0; i < len(doc); i++ {
		if m.Accept(int32(doc[i])) != nil {
			return false
		}
	}
	return m.CanEnd() && m.Accept(256) == nil
}

func mustCompile(t testing.TB, schema string, opts Options) *Grammar {
	t.Helper()
	g, err := Compile([]byte(schema), opts)
	if err != nil {
		t.Fatalf("Compile(%s): %v", schema, err)
	}
	return g
}

func TestSchemaDocuments(t *testing.T) {
	compact := Options{DisableAnyWhitespace: true}
	cases := []struct {
		name   string
		schema string
		opts   Options
		good   []string
		bad    []string
	}{
		{"null", `{"type":"null"}`, compact, []string{"null"}, []string{"nul", "nulll", "0", ""}},
		{"boolean", `{"type":"boolean"}`, compact, []string{"true", "false"}, []string{"True", "1"}},
		{"integer", `{"type":"integer"}`, compact, []string{"0", "-1", "1234567890123"}, []string{"01", "1.5", "-", "1e3", "+1"}},
		{"number", `{"type":"number"}`, compact, []string{"0", "-0.5", "1e10", "2.5E-3", "-12.0"}, []string{".5", "1.", "1e", "00", "--1"}},
		{"integer range", `{"type":"integer","minimum":-15,"maximum":123}`, compact,
			[]string{"-15", "-9", "0", "7", "99", "100", "123"}, []string{"-16", "124", "200", "1000", "-100"}},
		{"integer exclusive", `{"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":10}`, compact,
			[]string{"1", "9"}, []string{"0", "10", "-1"}},
		{"integer lower only", `{"type":"integer","minimum":42}`, compact,
			[]string{"42", "99", "100", "123456"}, []string{"41", "0", "-5", "9"}},
		{"integer upper only", `{"type":"integer","maximum":-3}`, compact,
			[]string{"-3", "-40", "-1000000"}, []string{"-2", "0", "5"}},
		{"number bounds", `{"type":"number","minimum":0,"maximum":1}`, compact,
			[]string{"0", "0.5", "1", "1.0", "0.999", "1.000"}, []string{"-0.1", "1.01", "2", "-1", "1.5"}},
		{"number exclusive", `{"type":"number","exclusiveMinimum":-2,"exclusiveMaximum":3}`, compact,
			[]string{"-1.99", "-1", "0", "2.999", "-0.5"}, []string{"-2", "-2.0", "3", "3.0", "3.1", "-2.5"}},
		{"decimal bounds", `{"type":"number","minimum":1.25,"exclusiveMaximum":3.5}`, compact,
			[]string{"1.25", "1.250", "1.3", "1.99", "2", "3", "3.4999", "2.0"}, []string{"1.2", "1.249", "1", "3.5", "3.50", "3.6", "4", "-1.3"}},
		{"negative decimal", `{"type":"number","minimum":-0.5,"maximum":0}`, compact,
			[]string{"-0.5", "-0.05", "-0.4999", "0", "0.0", "-0.1"}, []string{"-0.51", "-1", "0.1", "-0.6"}},
		{"exclusive decimal", `{"type":"number","exclusiveMinimum":-0.25,"exclusiveMaximum":0.75}`, compact,
			[]string{"-0.2", "-0.24999", "0", "0.5", "0.7499"}, []string{"-0.25", "-0.250", "0.75", "0.8", "-1"}},
		{"positive unit", `{"type":"number","exclusiveMinimum":0,"maximum":0.3}`, compact,
			[]string{"0.3", "0.1", "0.001", "0.29", "0.30"}, []string{"0", "0.0", "0.31", "0.300001", "1"}},
		{"string", `{"type":"string"}`, compact,
			[]string{`""`, `"abc"`, `"é😀"`, `"a\"b\\c\n\u00e9"`}, []string{`"a`, `"\x"`, "\"a\nb\"", `"\u12"`, "\"\xff\""}},
		{"string lengths", `{"type":"string","minLength":2,"maxLength":3}`, compact,
			[]string{`"ab"`, `"abc"`, `"é😀"`, `"\n\t"`}, []string{`"a"`, `"abcd"`, `""`}},
		{"enum", `{"enum":["red","green",3,null,{"a":[1,2]}]}`, compact,
			[]string{`"red"`, `"green"`, `3`, `null`, `{"a":[1,2]}`}, []string{`"blue"`, `4`, `"re"`}},
		{"const", `{"const":"x"}`, compact, []string{`"x"`}, []string{`"y"`}},
		{"typed enum", `{"type":"string","enum":["a",1]}`, compact, []string{`"a"`}, []string{`1`}},
		{"object order", `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"boolean"}},"required":["b"]}`, compact,
			[]string{`{"b":"x"}`, `{"a":1,"b":"x"}`, `{"a":1,"b":"x","c":true}`, `{"b":"x","c":false}`},
			[]string{`{}`, `{"a":1}`, `{"b":"x","a":1}`, `{"b":"x","d":1}`, `{"b":"x",}`, `{,"b":"x"}`}},
		{"object all optional", `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}}}`, compact,
			[]string{`{}`, `{"a":1}`, `{"b":2}`, `{"a":1,"b":2}`}, []string{`{"a":1,}`, `{,}`}},
		{"additional true", `{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":true}`, compact,
			[]string{`{}`, `{"a":1}`, `{"a":1,"x":[1,{"y":null}]}`, `{"z":"q"}`},
			[]string{`{"a":"s"}`, `{"x":1,"a":1}`}},
		{"additional schema", `{"type":"object","additionalProperties":{"type":"integer"}}`, compact,
			[]string{`{}`, `{"x":1,"y":2}`}, []string{`{"x":"s"}`}},
		{"loose default", `{"type":"object","properties":{"ab":{"type":"integer"}}}`, Options{DisableAnyWhitespace: true, LooseProperties: true},
			[]string{`{"ab":1,"a":2}`, `{"abc":true}`, `{"b":null}`}, []string{`{"ab":1,"ab":2}`}},
		{"array", `{"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3}`, compact,
			[]string{`[1]`, `[1,2]`, `[1,2,3]`}, []string{`[]`, `[1,2,3,4]`, `[1,]`, `["a"]`}},
		{"prefix items", `{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false}`, compact,
			[]string{`[]`, `["a"]`, `["a",1]`}, []string{`[1]`, `["a",1,2]`}},
		{"prefix then items", `{"type":"array","prefixItems":[{"type":"string"}],"items":{"type":"null"},"minItems":2}`, compact,
			[]string{`["a",null]`, `["a",null,null]`}, []string{`["a"]`, `["a",1]`}},
		{"any array", `{"type":"array"}`, compact, []string{`[]`, `[1,"a",[],{}]`}, []string{`[`, `[1,]`}},
		{"anyOf", `{"anyOf":[{"type":"string","maxLength":2},{"type":"integer"}]}`, compact,
			[]string{`"ab"`, `12`}, []string{`"abc"`, `1.5`}},
		{"nullable union", `{"type":["string","null"]}`, compact, []string{`"a"`, `null`}, []string{`1`}},
		{"allOf merge", `{"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},{"properties":{"b":{"type":"string"}},"required":["b"]}]}`, compact,
			[]string{`{"a":1,"b":"x"}`}, []string{`{"a":1}`, `{"b":"x"}`}},
		{"ref recursion", `{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"]}},"$ref":"#/$defs/node"}`, compact,
			[]string{`{"v":1,"next":null}`, `{"v":1,"next":{"v":2,"next":{"v":3,"next":null}}}`}, []string{`{"v":1}`, `{"v":1,"next":{"v":2}}`}},
		{"root recursion", `{"type":"array","items":{"$ref":"#"}}`, compact, []string{`[]`, `[[],[[]]]`}, []string{`[1]`}},
		{"pattern", `{"type":"string","pattern":"^[a-c]+-\\d{2,3}$"}`, compact, []string{`"ab-12"`, `"c-123"`}, []string{`"ab-1"`, `"ad-12"`, `"ab-1234"`}},
		{"pattern unanchored", `{"type":"string","pattern":"x(y|z)"}`, compact, []string{`"xy"`, `"aaxzbb"`}, []string{`"x"`, `"yx"`}},
		{"pattern escapes", `{"type":"string","pattern":"^\"\\\\.$"}`, compact, []string{`"\"\\a"`}, []string{`"\"\\"`}},
		{"date", `{"type":"string","format":"date"}`, compact, []string{`"2024-02-29"`, `"1999-12-31"`}, []string{`"2024-02-30"`, `"2024-13-01"`, `"2024-04-31"`}},
		{"time", `{"type":"string","format":"time"}`, compact, []string{`"23:59:60Z"`, `"08:30:00.5+01:00"`}, []string{`"24:00:00Z"`, `"08:30:00"`}},
		{"date-time", `{"type":"string","format":"date-time"}`, compact, []string{`"2024-01-02T03:04:05Z"`}, []string{`"2024-01-02 03:04:05Z"`}},
		{"uuid", `{"type":"string","format":"uuid"}`, compact, []string{`"123e4567-e89b-12d3-a456-426614174000"`}, []string{`"123e4567e89b12d3a456426614174000"`}},
		{"email", `{"type":"string","format":"email"}`, compact, []string{`"a.b+c@example.com"`}, []string{`"a@"`, `"@b.c"`, `"a b@c.d"`}},
		{"whitespace", `{"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}}},"required":["a"]}`, Options{},
			[]string{`{"a":[1,2]}`, "{ \"a\" : [ 1 , 2 ] }", "{\n  \"a\": [\n    1\n  ]\n}"},
			// none before or after the document
			[]string{"{\"a\":[1 2]}", "{" + strings.Repeat(" ", 17) + `"a":[]}`, ` {"a":[]}`, "{\"a\":[]}\n"}},
		{"whitespace bounded", `{"type":"array"}`, Options{MaxWhitespace: 2}, []string{"[  ]", "[ 1 ]"}, []string{"[   ]"}},
		// Compact by default: one space, or a newline and up to 20 spaces or tabs.
		{"whitespace compact", `{"type":"array"}`, Options{}, []string{"[ ]", "[ 1, 2 ]", "[\n\t1,\n\t2\n]", "[\n" + strings.Repeat(" ", 20) + "1]"},
			[]string{"[  ]", "[\t]", "[\r\n1]", "[\n\n1]", "[1 ,  2]", "[\n" + strings.Repeat(" ", 21) + "1]", "[\n\t\r1]"}},
		{"whitespace flexible", `{"type":"array"}`, Options{MaxWhitespace: 16}, []string{"[\n\t\r 1]", "[" + strings.Repeat(" ", 16) + "]"}, []string{"[" + strings.Repeat(" ", 17) + "]"}},
		// Unbounded integers and numbers take llama.cpp's digit bounds.
		{"integer digits", `{"type":"integer"}`, compact, []string{"1234567890123456", "-1234567890123456", "0"},
			[]string{"12345678901234567", "-12345678901234567"}},
		{"integer minimum digits", `{"type":"integer","minimum":5}`, compact, []string{"5", "1234567890123456"}, []string{"12345678901234567"}},
		{"integer maximum digits", `{"type":"integer","maximum":5}`, compact, []string{"5", "-1234567890123456"}, []string{"-12345678901234567"}},
		{"number digits", `{"type":"number"}`, compact, []string{"1234567890123456.1234567890123456", "-1.5e308", "2E-7"},
			[]string{"12345678901234567", "0.12345678901234567", "1e1000", "1.e5"}},
		{"any value digits", `{}`, compact, []string{"[1.5,-3]"}, []string{"[12345678901234567]"}},
		{"true schema", `true`, compact, []string{`1`, `"a"`, `{"a":[null]}`}, []string{`{`, `tru`}},
		{"empty schema", `{}`, compact, []string{`[]`, `-1.5e3`}, []string{`]`}},
		{"nullable keyword", `{"type":"integer","nullable":true}`, compact, []string{`1`, `null`}, []string{`"1"`}},
		{"draft4 exclusive", `{"type":"integer","minimum":5,"exclusiveMinimum":true}`, compact, []string{`6`}, []string{`5`}},
		{"tuple items", `{"type":"array","items":[{"type":"integer"}],"additionalItems":false}`, compact, []string{`[]`, `[1]`}, []string{`[1,2]`}},
	}
	v := byteVocab(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := mustCompile(t, tc.schema, tc.opts)
			for _, d := range tc.good {
				if !accepts(g, v, d) {
					t.Errorf("schema %s rejects %q, want accepted", tc.schema, d)
				}
			}
			for _, d := range tc.bad {
				if accepts(g, v, d) {
					t.Errorf("schema %s accepts %q, want rejected", tc.schema, d)
				}
			}
		})
	}
}

func TestUnsupportedKeywordsNamed(t *testing.T) {
	cases := map[string]string{
		`{"not":{"type":"null"}}`:                                     "not",
		`{"type":"object","patternProperties":{"a":{}}}`:              "patternProperties",
		`{"type":"array","uniqueItems":true}`:                         "uniqueItems",
		`{"type":"number","multipleOf":2}`:                            "multipleOf",
		`{"type":"string","format":"ipv4"}`:                           "ipv4",
		`{"type":"string","pattern":"(?=a)"}`:                         "lookahead",
		`{"type":"string","pattern":"a","minLength":1}`:               "pattern",
		`{"$ref":"http://example.com/s.json"}`:                        "$ref",
		`{"type":"number","minimum":0.1,"maximum":0.9}`:               "minimum",
		`{"type":"string","enum":["a"],"maxLength":1}`:                "maxLength",
		`{"allOf":[{"type":"string","pattern":"a"},{"pattern":"b"}]}`: "pattern",
		`{"type":"object","minProperties":1}`:                         "minProperties",
	}
	for schema, kw := range cases {
		_, err := Compile([]byte(schema), Options{})
		if err == nil {
			t.Errorf("Compile(%s) = nil error, want one naming %q", schema, kw)
			continue
		}
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), kw) {
			t.Errorf("Compile(%s) error %q, want ErrUnsupported naming %q", schema, err, kw)
		}
	}
	for _, bad := range []string{`{`, `{"type":"object","required":"a"}`, `{"type":"strin"}`, `[]`} {
		if _, err := Compile([]byte(bad), Options{}); err == nil {
			t.Errorf("Compile(%s) = nil error, want an error", bad)
		}
	}
	if _, err := Compile([]byte(`{"type":"integer","minimum":5,"maximum":4}`), Options{}); err == nil {
		t.Errorf("Compile of an empty integer range = nil error, want 'admits no value'")
	}
}

func TestAnyObjectRegexChoice(t *testing.T) {
	v := byteVocab(t)
	g, err := CompileAnyObject(Options{DisableAnyWhitespace: true})
	if err != nil {
		t.Fatal(err)
	}
	for d, want := range map[string]bool{`{}`: true, `{"a":{"b":[1,"x"]}}`: true, `[]`: false, `1`: false, `{"a"}`: false} {
		if got := accepts(g, v, d); got != want {
			t.Errorf("json_object accepts %q = %v, want %v", d, got, want)
		}
	}
	g, err = CompileRegex(`(ab|cd)+[0-9]?`, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for d, want := range map[string]bool{`ab`: true, `abcd7`: true, `abc`: false, `7`: false, `ab77`: false} {
		if got := accepts(g, v, d); got != want {
			t.Errorf("regex accepts %q = %v, want %v", d, got, want)
		}
	}
	g, err = CompileChoice([]string{"yes", "no", "maybe"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for d, want := range map[string]bool{`yes`: true, `no`: true, `ye`: false, `nope`: false} {
		if got := accepts(g, v, d); got != want {
			t.Errorf("choice accepts %q = %v, want %v", d, got, want)
		}
	}
}

// TestCompileLimits: large bounds compile through shared rules, and a
// pattern whose DFA explodes fails with ErrTooLarge instead of running on.
func TestCompileLimits(t *testing.T) {
	v := byteVocab(t)
	g := mustCompile(t, `{"type":"string","minLength":3000,"maxLength":4000}`, Options{})
	if accepts(g, v, `"`+strings.Repeat("a", 2999)+`"`) || !accepts(g, v, `"`+strings.Repeat("é", 3000)+`"`) {
		t.Errorf("minLength 3000 / maxLength 4000: wrong acceptance at the bounds")
	}
	_, err := Compile([]byte(`{"type":"string","pattern":"(a|b)*a.{100}"}`), Options{})
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("exploding pattern: error %v, want ErrTooLarge", err)
	}
	_, err = Compile([]byte(`{"type":"string","pattern":"^(.{1000}){1000}$"}`), Options{})
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("nested repeat: error %v, want ErrTooLarge", err)
	}
}

// TestNumberBoundsRandom compares bounded number and integer grammars
// with big.Rat comparisons (an independent oracle) on random bounds and
// random numbers written in plain decimal.
func TestNumberBoundsRandom(t *testing.T) {
	v := byteVocab(t)
	rng := rand.New(rand.NewPCG(7, 9))
	randDec := func() string {
		s := ""
		if rng.IntN(2) == 0 {
			s = "-"
		}
		s += strconv.Itoa(rng.IntN(30))
		if rng.IntN(2) == 0 {
			s += "." + strconv.Itoa(rng.IntN(100))
		}
		return s
	}
	for trial := 0; trial < 150; trial++ {
		integer := trial%3 == 0
		typ := "number"
		if integer {
			typ = "integer"
		}
		lo, hi := randDec(), randDec()
		loKw, hiKw := "minimum", "maximum"
		if rng.IntN(2) == 0 {
			loKw = "exclusiveMinimum"
		}
		if rng.IntN(2) == 0 {
			hiKw = "exclusiveMaximum"
		}
		schema := fmt.Sprintf(`{"type":%q,%q:%s,%q:%s}`, typ, loKw, lo, hiKw, hi)
		if rng.IntN(4) == 0 {
			schema = fmt.Sprintf(`{"type":%q,%q:%s}`, typ, loKw, lo)
			hi = ""
		}
		g, err := Compile([]byte(schema), Options{DisableAnyWhitespace: true})
		if errors.Is(err, ErrUnsupported) {
			continue
		}
		rlo, _ := new(big.Rat).SetString(lo)
		var rhi *big.Rat
		if hi != "" {
			rhi, _ = new(big.Rat).SetString(hi)
		}
		in := func(x *big.Rat) bool {
			c := x.Cmp(rlo)
			if c < 0 || (c == 0 && loKw == "exclusiveMinimum") {
				return false
			}
			if rhi != nil {
				c = x.Cmp(rhi)
				if c > 0 || (c == 0 && hiKw == "exclusiveMaximum") {
					return false
				}
			}
			return !integer || x.IsInt()
		}
		if err != nil {
			// Only "admits no value" may fail: check that nothing is in range.
			for i := 0; i < 200; i++ {
				x, _ := new(big.Rat).SetString(randDec())
				if in(x) {
					t.Fatalf("%s: compile error %v, but %s is in range", schema, err, x.RatString())
				}
			}
			continue
		}
		for i := 0; i < 200; i++ {
			d := randDec()
			if rng.IntN(3) == 0 { // near a bound: the bound, or one more digit
				d = lo
				if hi != "" && rng.IntN(2) == 0 {
					d = hi
				}
				if rng.IntN(2) == 0 {
					if !strings.Contains(d, ".") {
						d += "."
					}
					d += strconv.Itoa(rng.IntN(10))
				}
			}
			if rng.IntN(4) == 0 && strings.Contains(d, ".") {
				d += "0" // a trailing zero in the fraction
			}
			x, _ := new(big.Rat).SetString(d)
			if d[0] == '-' && x.Sign() == 0 {
				continue // negative zero is never written by the grammar
			}
			// Integers are generated without a fraction (not even ".0").
			want := in(x) && !(integer && strings.Contains(d, "."))
			if got := accepts(g, v, d); got != want {
				t.Fatalf("%s: %s accepted %v, want %v", schema, d, got, want)
			}
		}
	}
}

func TestNewVocabErrors(t *testing.T) {
	if _, err := NewVocab([][]byte{[]byte("a")}, nil); err == nil {
		t.Errorf("NewVocab without end tokens = nil error, want one")
	}
	if _, err := NewVocab([][]byte{[]byte("a")}, []int32{3}); err == nil {
		t.Errorf("NewVocab with an end token outside the vocabulary = nil error, want one")
	}
	if _, err := NewVocab(nil, []int32{0}); err == nil {
		t.Errorf("NewVocab of no tokens = nil error, want one")
	}
}
