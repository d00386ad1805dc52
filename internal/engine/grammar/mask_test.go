package grammar

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// synthVocab is a small vocabulary whose tokens span several JSON
// elements, split UTF-8 characters and repeat byte strings, with an empty
// control token and an end token.
func synthVocab(t testing.TB) (*Vocab, []string) {
	t.Helper()
	words := []string{
		"{", "}", "[", "]", ",", ":", `"`, `{"`, `":`, `":"`, `"},{"`, `",`, `"}`, `"]`, `"],`, `},`, `}]`, `]}`,
		`[{"`, `["`, `","`, `":[`, `":{"`, `"}}`, " ", "  ", "\n", "\n  ", ` "`, `: `, `, "`,
		"0", "1", "2", "9", "12", "34", "100", "-", "-1", ".", ".5", "e", "e+", "E-", "0.", "1.0",
		"true", "tr", "ue", "false", "fal", "se", "null", "nu", "ll",
		"a", "b", "c", "name", "age", "id", "abc", "x", "y", "ok", "tags", "red", "green", "blue",
		`\`, `\"`, `\\`, `\n`, `\u`, `\u00`, "e9", "é", "\xc3", "\xa9", "😀", "\xf0\x9f", "\x98\x80",
		"-0", "2024", "-02-", "29", "T", "12:", "00:", "00Z", "Z", "@", "@x.com", "a.b", ".com",
		"name", // duplicate bytes, different id
	}
	// Every printable ASCII character too, so that any document can be
	// spelled (real vocabularies have byte tokens for this).
	for c := byte(' '); c < 0x7f; c++ {
		words = append(words, string([]byte{c}))
	}
	toks := make([][]byte, 0, len(words)+2)
	for _, w := range words {
		toks = append(toks, []byte(w))
	}
	toks = append(toks, nil)      // control token: never allowed
	toks = append(toks, []byte{}) // end token
	v, err := NewVocab(toks, []int32{int32(len(toks) - 1)})
	if err != nil {
		t.Fatal(err)
	}
	return v, words
}

var maskSchemas = []string{
	`{"type":"object","properties":{"name":{"type":"string","maxLength":8},"age":{"type":"integer","minimum":0,"maximum":120},"tags":{"type":"array","items":{"enum":["red","green","blue"]},"maxItems":3}},"required":["name","age"]}`,
	`{"type":"array","items":{"type":"object","properties":{"id":{"type":"integer"},"ok":{"type":"boolean"}},"required":["id"]},"minItems":1,"maxItems":4}`,
	`{"$defs":{"t":{"type":"object","properties":{"x":{"type":"number"},"c":{"type":"array","items":{"$ref":"#/$defs/t"},"maxItems":2}},"required":["x"]}},"$ref":"#/$defs/t"}`,
	`{"anyOf":[{"type":"string","format":"date"},{"type":"string","format":"email"},{"type":"null"}]}`,
	`{"type":"object","additionalProperties":{"type":["string","null"]}}`,
	`true`,
}

// checkMaskAgrees compares m.Mask with Accept on a clone for every token.
func checkMaskAgrees(t *testing.T, m *Matcher, v *Vocab, where string) Bitset {
	t.Helper()
	mask := NewBitset(v.Size())
	m.Mask(mask)
	for id := 0; id < v.Size(); id++ {
		c := m.Clone()
		err := c.Accept(int32(id))
		if got, want := mask.Has(id), err == nil; got != want {
			t.Fatalf("%s: token %d %q: mask %v, Accept error %v", where, id, v.Token(int32(id)), got, err)
		}
		if err != nil && !errors.Is(err, ErrRejected) {
			t.Fatalf("%s: Accept(%d) error %v does not wrap ErrRejected", where, id, err)
		}
	}
	return mask
}

// TestMaskAgreesWithAccept walks random masked generations through each
// schema in both whitespace modes and checks, at every step, that the mask
// holds exactly the tokens Accept takes, that end is allowed exactly when
// CanEnd, and that finished documents are valid JSON (encoding/json).
func TestMaskAgreesWithAccept(t *testing.T) {
	v, _ := synthVocab(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for si, schema := range maskSchemas {
		for _, opts := range []Options{{DisableAnyWhitespace: true}, {MaxWhitespace: 3}} {
			g := mustCompile(t, schema, opts)
			for run := 0; run < 6; run++ {
				m := NewMatcher(g, v)
				var out []byte
				for step := 0; step < 60; step++ {
					mask := checkMaskAgrees(t, m, v, fmt.Sprintf("schema %d %+v after %q", si, opts, out))
					var allowed []int32
					for id := 0; id < v.Size(); id++ {
						if mask.Has(id) {
							allowed = append(allowed, int32(id))
						}
					}
					if len(allowed) == 0 {
						t.Fatalf("schema %d: empty mask after %q", si, out)
					}
					end := int32(v.Size() - 1)
					tok := allowed[rng.IntN(len(allowed))]
					// Prefer ending once possible, half of the time, so that
					// documents finish.
					if mask.Has(int(end)) && rng.IntN(2) == 0 {
						tok = end
					}
					if err := m.Accept(tok); err != nil {
						t.Fatalf("schema %d: Accept(%d) of a masked token: %v", si, tok, err)
					}
					if tok == end {
						break
					}
					out = append(out, v.Token(tok)...)
				}
				if m.Ended() && !json.Valid(out) {
					t.Errorf("schema %d: generated %q, not valid JSON", si, out)
				}
			}
		}
	}
}

func TestTokensSpanElements(t *testing.T) {
	v, words := synthVocab(t)
	id := func(w string) int32 {
		for i, x := range words {
			if x == w {
				return int32(i)
			}
		}
		t.Fatalf("no token %q", w)
		return -1
	}
	g := mustCompile(t, `{"type":"array","items":{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a"]}}`, Options{DisableAnyWhitespace: true})
	m := NewMatcher(g, v)
	for _, w := range []string{`[{"`, "a", `":"`, "x", `"},{"`, "a", `":"`, "y", `",`, `"`, "b", `":"`, "é", `"}`, "]"} {
		if err := m.Accept(id(w)); err != nil {
			t.Fatalf("Accept(%q): %v", w, err)
		}
	}
	if !m.CanEnd() || !m.Done() {
		t.Fatalf("after a complete array: CanEnd %v Done %v, want both true", m.CanEnd(), m.Done())
	}
	if err := m.Accept(int32(v.Size() - 1)); err != nil {
		t.Fatalf("Accept(end): %v", err)
	}
	if err := m.Accept(id("a")); !errors.Is(err, ErrEnded) {
		t.Fatalf("Accept after end: %v, want ErrEnded", err)
	}
	// Rollback to before the end token and the closing bracket.
	if err := m.Rollback(2); err != nil {
		t.Fatal(err)
	}
	if m.CanEnd() {
		t.Fatalf("CanEnd after rolling back the closing bracket = true")
	}
	mask := NewBitset(v.Size())
	m.Mask(mask)
	if !mask.Has(int(id("]"))) || !mask.Has(int(id(","))) || mask.Has(int(id("}"))) {
		t.Fatalf("mask after rollback: ] %v , %v } %v", mask.Has(int(id("]"))), mask.Has(int(id(","))), mask.Has(int(id("}"))))
	}
	// Split UTF-8: the two halves of é are accepted one after the other
	// inside a string, not outside.
	m2 := NewMatcher(mustCompile(t, `{"type":"string"}`, Options{DisableAnyWhitespace: true}), v)
	for _, w := range []string{`"`, "\xc3", "\xa9", "\xf0\x9f", "\x98\x80", `"`} {
		if err := m2.Accept(id(w)); err != nil {
			t.Fatalf("Accept(%q): %v", w, err)
		}
	}
	m3 := NewMatcher(mustCompile(t, `{"type":"string"}`, Options{DisableAnyWhitespace: true}), v)
	_ = m3.Accept(id(`"`))
	if err := m3.Accept(id("\xa9")); err == nil {
		t.Fatalf("a lone continuation byte was accepted in a string")
	}
	// The control token (empty bytes) is never allowed.
	if err := m3.Accept(int32(len(words))); err == nil {
		t.Fatalf("the empty control token was accepted")
	}
}

func TestMaskCacheHits(t *testing.T) {
	v, words := synthVocab(t)
	g := mustCompile(t, maskSchemas[1], Options{DisableAnyWhitespace: true})
	a, b := NewMatcher(g, v), NewMatcher(g, v)
	m1, m2 := NewBitset(v.Size()), NewBitset(v.Size())
	a.Mask(m1)
	before := g.Stats(v)
	b.Mask(m2)
	after := g.Stats(v)
	if after.MaskHits != before.MaskHits+1 {
		t.Fatalf("second matcher in the same state: mask hits %d -> %d, want one more", before.MaskHits, after.MaskHits)
	}
	for i := range m1 {
		if m1[i] != m2[i] {
			t.Fatalf("cached mask differs from computed one")
		}
	}
	_ = words
	// Disabled caches still give the same masks.
	g2 := mustCompile(t, maskSchemas[1], Options{DisableAnyWhitespace: true, MaskCacheBytes: -1, StateCacheBytes: -1})
	m3 := NewBitset(v.Size())
	NewMatcher(g2, v).Mask(m3)
	for i := range m1 {
		if m1[i] != m3[i] {
			t.Fatalf("mask without caches differs")
		}
	}
}

// TestConcurrentMatchers runs matchers of one grammar on several
// goroutines (run with -race): the shared caches must give every goroutine
// the masks a private grammar gives.
func TestConcurrentMatchers(t *testing.T) {
	v, _ := synthVocab(t)
	doc := []byte(`{"name":"abc","age":42,"tags":["red","blue"]}`)
	private := mustCompile(t, maskSchemas[0], Options{MaskCacheBytes: -1, StateCacheBytes: -1})
	want := make([]Bitset, len(doc))
	m := NewMatcher(private, v)
	for i := range doc {
		want[i] = NewBitset(v.Size())
		m.Mask(want[i])
		if err := m.AcceptBytes(doc[i : i+1]); err != nil {
			t.Fatal(err)
		}
	}
	shared := mustCompile(t, maskSchemas[0], Options{MaskCacheBytes: 1 << 12, StateCacheBytes: 1 << 14})
	errs := make(chan error, 4)
	for w := 0; w < 4; w++ {
		go func() {
			m := NewMatcher(shared, v)
			got := NewBitset(v.Size())
			for i := range doc {
				m.Mask(got)
				for j := range got {
					if got[j] != want[i][j] {
						errs <- fmt.Errorf("byte %d: shared-cache mask differs from the private one", i)
						return
					}
				}
				if err := m.AcceptBytes(doc[i : i+1]); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for w := 0; w < 4; w++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
