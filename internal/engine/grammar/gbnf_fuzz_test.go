package grammar

import (
	"testing"
)

// FuzzCompileGBNF compiles arbitrary GBNF sources: CompileGBNF must return
// a grammar or an error, never panic or run without bound (the limits in
// gbnf.go and compile.go cap rules, repeats, nesting and automaton size),
// and a compiled grammar's first mask must agree with Accept on every byte
// and on the end token.
func FuzzCompileGBNF(f *testing.F) {
	for _, tc := range gbnfCases {
		f.Add(tc.src)
	}
	for _, s := range []string{
		`root ::= "a" . "b" [^a-c\n] "\xE9" "\U0001F600"{2,3}`,
		"root ::= a\na ::= b \"x\"\nb ::= a | \"y\"",
		`root ::= "(" root ")" | ""`,
		`root ::= ("a"{1000}){1000}`,
		"root ::= x*\nx ::= [ ]* | \"y\"",
		`root ::= <think> "x"`,
	} {
		f.Add(s)
	}
	v := byteVocab(f)
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 4096 {
			return
		}
		g, err := CompileGBNF(src, Options{MaxDepth: 64})
		if err != nil {
			return
		}
		m := NewMatcher(g, v)
		mask := NewBitset(v.Size())
		m.Mask(mask)
		for b := 0; b <= 256; b++ {
			c := m.Clone()
			if got, want := mask.Has(b), c.Accept(int32(b)) == nil; got != want {
				t.Fatalf("grammar %q: token %#x: mask %v, Accept %v", src, b, got, want)
			}
		}
	})
}

// FuzzAcceptGBNF feeds arbitrary bytes to matchers of the example GBNF
// grammars. At every byte the mask must agree with Accept; the grammar
// accepts the whole input exactly when its reference does (encoding/json
// for the JSON grammar: the grammar's acceptance implies validity).
func FuzzAcceptGBNF(f *testing.F) {
	f.Add(uint8(0), []byte(`{"a": [1, {"b": null}], "c": "\u00e9"}`))
	f.Add(uint8(1), []byte("x=(1+y)*2\n(a)=b\n"))
	f.Add(uint8(2), []byte("- milk\n- crème\n"))
	f.Add(uint8(3), []byte("1. e4 e5\n2. Nf3 Nc6\n3. O-O-O Qxd8#"))
	v := byteVocab(f)
	var gs []*Grammar
	for _, tc := range gbnfCases {
		gs = append(gs, mustGBNF(f, tc.src))
	}
	f.Fuzz(func(t *testing.T, which uint8, input []byte) {
		if len(input) > 512 {
			return
		}
		i := int(which) % len(gs)
		g, tc := gs[i], gbnfCases[i]
		m := NewMatcher(g, v)
		mask := NewBitset(v.Size())
		whole := true
		for j, b := range input {
			m.Mask(mask)
			err := m.Accept(int32(b))
			if mask.Has(int(b)) != (err == nil) {
				t.Fatalf("%s: input %q byte %d: mask %v, Accept error %v", tc.name, input, j, mask.Has(int(b)), err)
			}
			if err != nil {
				whole = false
				break
			}
		}
		if whole {
			m.Mask(mask)
			if mask.Has(256) != m.CanEnd() {
				t.Fatalf("%s: input %q: end in mask %v, CanEnd %v", tc.name, input, mask.Has(256), m.CanEnd())
			}
		}
		got, want := whole && m.CanEnd(), tc.oracle(string(input))
		if got && !want || tc.exact && got != want {
			t.Fatalf("%s: input %q: grammar %v, reference %v", tc.name, input, got, want)
		}
	})
}
