package grammar

import (
	"encoding/json"
	"testing"
)

// FuzzCompile compiles arbitrary schemas: Compile must return a grammar or
// an error, never panic or hang, and a compiled grammar must mask its
// first byte and agree with Accept on it. Seeds: the table-test schemas
// and testdata/fuzz/FuzzCompile.
func FuzzCompile(f *testing.F) {
	for _, s := range maskSchemas {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"type":"string","pattern":"^(a|b)*[^x-z]{2,4}\\d$"}`))
	f.Add([]byte(`{"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"null"}]}},"$ref":"#/$defs/a"}`))
	f.Add([]byte(`{"allOf":[{"$ref":"#"}]}`))
	v := byteVocab(f)
	f.Fuzz(func(t *testing.T, schema []byte) {
		if len(schema) > 2048 {
			return
		}
		g, err := Compile(schema, Options{MaxWhitespace: 2})
		if err != nil {
			return
		}
		m := NewMatcher(g, v)
		mask := NewBitset(v.Size())
		m.Mask(mask)
		for b := 0; b < 256; b++ {
			c := m.Clone()
			if got, want := mask.Has(b), c.Accept(int32(b)) == nil; got != want {
				t.Fatalf("schema %s: byte %#x: mask %v, Accept %v", schema, b, got, want)
			}
		}
	})
}

// fuzzSchemas are the grammars FuzzAccept feeds input to.
var fuzzSchemas = []string{
	`true`,
	maskSchemas[0],
	`{"type":"object","properties":{"a":{"type":"number","minimum":-5,"exclusiveMaximum":7}},"additionalProperties":{"type":"array","items":{"type":"string","format":"date-time"}}}`,
	`{"anyOf":[{"type":"string","pattern":"^[a-f0-9]{4,8}$"},{"type":"integer","minimum":100}]}`,
}

// FuzzAccept feeds arbitrary bytes to matchers. At every byte the mask
// must agree with Accept, and a document the grammar completes must be
// valid JSON according to encoding/json (an independent parser).
func FuzzAccept(f *testing.F) {
	f.Add(uint8(0), []byte(`{"a":[1,2,{"b":null}]}`))
	f.Add(uint8(1), []byte(`{"name":"ab","age":7,"tags":["red"]}`))
	f.Add(uint8(2), []byte(`{"a":-4.5,"x":["2024-01-01T00:00:00Z"]}`))
	f.Add(uint8(3), []byte(`"deadbeef"`))
	f.Add(uint8(3), []byte(`1000`))
	v := byteVocab(f)
	var gs []*Grammar
	for _, s := range fuzzSchemas {
		gs = append(gs, mustCompile(f, s, Options{MaxWhitespace: 2}))
	}
	f.Fuzz(func(t *testing.T, which uint8, input []byte) {
		if len(input) > 512 {
			return
		}
		g := gs[int(which)%len(gs)]
		m := NewMatcher(g, v)
		mask := NewBitset(v.Size())
		for i, b := range input {
			m.Mask(mask)
			err := m.Accept(int32(b))
			if mask.Has(int(b)) != (err == nil) {
				t.Fatalf("input %q byte %d: mask %v, Accept error %v", input, i, mask.Has(int(b)), err)
			}
			if err != nil {
				return
			}
		}
		m.Mask(mask)
		if mask.Has(256) != m.CanEnd() {
			t.Fatalf("input %q: end in mask %v, CanEnd %v", input, mask.Has(256), m.CanEnd())
		}
		if m.CanEnd() && !json.Valid(input) {
			t.Fatalf("grammar completes %q, which encoding/json rejects", input)
		}
	})
}
