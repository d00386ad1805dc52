package grammar

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// gbnfRecursive is the grammar of the red-team finding 1 (2026-12-03): the
// doubling grammar widened to any letter and made right-recursive, so that
// each round ("x1!") used to push one more frame under the next.
const gbnfRecursive = "root ::= a \"!\" root | \".\" \".\" \".\"\n" +
	"a ::= [^1-4!.] a \"1\" | [^1-4!.] b \"2\" | \"\"\n" +
	"b ::= [^1-4!.] a \"3\" | [^1-4!.] b \"4\" | \"\"\n"

// wordVocab is printable ASCII plus the multi-byte words, with an end
// token.
func wordVocab(t testing.TB, words ...string) *Vocab {
	t.Helper()
	var toks [][]byte
	for c := byte(' '); c < 0x7f; c++ {
		toks = append(toks, []byte{c})
	}
	toks = append(toks, []byte("\n"))
	for _, w := range words {
		toks = append(toks, []byte(w))
	}
	toks = append(toks, []byte{}) // end
	v, err := NewVocab(toks, []int32{int32(len(toks) - 1)})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestRecursiveGrammarHitsMaskCache: the masks of the recursive grammar of
// finding 1 come from the cache at the start of every round after the
// first. Its stack used to grow by a frame per round (the return into
// root after its last item), so the whole-stack key never repeated; the
// tail call no longer pushes that frame, and the key holds only the frames
// a mask reads.
func TestRecursiveGrammarHitsMaskCache(t *testing.T) {
	v := wordVocab(t, "...", "x1", "1!", "!x", "xy", "12", "34", "!.", "..")
	g := mustGBNF(t, gbnfRecursive)
	m := NewMatcher(g, v)
	mask := NewBitset(v.Size())
	m.Mask(mask)
	first := append(Bitset(nil), mask...)
	for round := 1; round <= 5; round++ {
		if err := m.AcceptBytes([]byte("xy11!")); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		before := g.Stats(v)
		m.Mask(mask)
		after := g.Stats(v)
		if after.MaskHits != before.MaskHits+1 {
			t.Errorf("round %d (%d frames): mask hits %d -> %d, want a hit", round, len(m.stacks[0]), before.MaskHits, after.MaskHits)
		}
		for i := range mask {
			if mask[i] != first[i] {
				t.Fatalf("round %d: the mask differs from the first round's", round)
			}
		}
	}
	checkMaskAgrees(t, m, v, "after 5 rounds")
}

// TestDeepNestingHitsMaskCache: a mask inside nesting 20 deep comes from
// the one computed 10 deep, since no token can close more than a few
// levels; near the depth limit it is computed again (it differs there).
func TestDeepNestingHitsMaskCache(t *testing.T) {
	v := wordVocab(t, "]]", "]]]", "[[", "x]", "x]]]")
	g, err := CompileGBNF(`root ::= "[" root "]" | "x"`, Options{MaxDepth: 40})
	if err != nil {
		t.Fatal(err)
	}
	m := NewMatcher(g, v)
	mask := NewBitset(v.Size())
	if err := m.AcceptBytes([]byte(strings.Repeat("[", 10))); err != nil {
		t.Fatal(err)
	}
	m.Mask(mask)
	at10 := append(Bitset(nil), mask...)
	if err := m.AcceptBytes([]byte(strings.Repeat("[", 10))); err != nil {
		t.Fatal(err)
	}
	before := g.Stats(v)
	m.Mask(mask)
	if after := g.Stats(v); after.MaskHits != before.MaskHits+1 {
		t.Errorf("20 deep: mask hits %d -> %d, want a hit", before.MaskHits, after.MaskHits)
	}
	for i := range mask {
		if mask[i] != at10[i] {
			t.Fatalf("20 deep: the mask differs from 10 deep")
		}
	}
	checkMaskAgrees(t, m, v, "20 deep")
	// At the limit "[" is refused: the cached mask must not be served.
	for m.AcceptBytes([]byte("[")) == nil {
	}
	got := checkMaskAgrees(t, m, v, fmt.Sprintf("%d deep, at the limit", len(m.stacks[0])))
	if got.Has(int('[' - ' ')) {
		t.Errorf("at the depth limit: [ in the mask")
	}
}

// TestMaskCacheAgreesWithUncached walks random masked generations through
// grammars whose stacks grow (recursion, ambiguity, a small depth limit)
// with the shared mask cache and compares every mask with one computed
// without any cache.
func TestMaskCacheAgreesWithUncached(t *testing.T) {
	vs, _ := synthVocab(t)
	vw := wordVocab(t, "...", "x1", "1!", "!x", "xy", "12", "34", "!.", "]]", "]]]", "[[", "x]", "x]]]", "((", "))")
	cases := []struct {
		name string
		v    *Vocab
		src  string // GBNF, or a schema when it starts with {
		opts Options
	}{
		{"recursive", vw, gbnfRecursive, Options{}},
		{"nesting", vw, `root ::= "[" root "]" | "x" | "(" root ")" root`, Options{MaxDepth: 24}},
		{"doubling", vw, gbnfDoubling, Options{}},
		{"nested", vw, gbnfNested, Options{}},
		{"tree-schema", vs, maskSchemas[2], Options{MaxDepth: 30}},
		{"array-schema", vs, maskSchemas[1], Options{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			compile := func(o Options) *Grammar {
				if strings.HasPrefix(tc.src, "{") {
					return mustCompile(t, tc.src, o)
				}
				g, err := CompileGBNF(tc.src, o)
				if err != nil {
					t.Fatal(err)
				}
				return g
			}
			shared := compile(tc.opts)
			o := tc.opts
			o.MaskCacheBytes, o.StateCacheBytes = -1, -1
			private := compile(o)
			rng := rand.New(rand.NewPCG(3, 4))
			got, want := NewBitset(tc.v.Size()), NewBitset(tc.v.Size())
			for walk := range 12 {
				ms, mp := NewMatcher(shared, tc.v), NewMatcher(private, tc.v)
				for step := range 60 {
					ms.Mask(got)
					mp.Mask(want)
					for i := range got {
						if got[i] != want[i] {
							t.Fatalf("walk %d step %d (%d stacks): the cached mask differs from the uncached one", walk, step, len(mp.stacks))
						}
					}
					var ids []int32
					for id := range tc.v.Size() {
						if want.Has(id) && !tc.v.IsEnd(int32(id)) {
							ids = append(ids, int32(id))
						}
					}
					if len(ids) == 0 {
						break
					}
					id := ids[rng.IntN(len(ids))]
					if err := ms.Accept(id); err != nil {
						t.Fatal(err)
					}
					if err := mp.Accept(id); err != nil {
						t.Fatal(err)
					}
				}
			}
			st := shared.Stats(tc.v)
			t.Logf("mask cache: %d hits, %d misses", st.MaskHits, st.MaskMisses)
			if st.MaskHits == 0 {
				t.Errorf("no mask cache hit in 12 walks")
			}
		})
	}
}

// TestCheckCost: on the 32k Llama 2 vocabulary the benchmark grammars
// (a schema, the GBNF JSON grammar, a tool grammar) and the nested
// ambiguous one pass the default probe; the doubling grammar and the
// recursive one of finding 1 (first masks of seconds on a 151k vocabulary)
// are refused, naming the work; the answer is cached.
func TestCheckCost(t *testing.T) {
	v := vocab32k(t)
	for _, mg := range maskGrammars {
		g, err := mg.compile(Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.CheckCost(v, CostLimit{}); err != nil {
			t.Errorf("%s: %v", mg.name, err)
		}
	}
	if err := mustGBNF(t, gbnfNested).CheckCost(v, CostLimit{}); err != nil {
		t.Errorf("nested: %v", err)
	}
	for _, src := range []string{gbnfDoubling, gbnfRecursive} {
		g := mustGBNF(t, src)
		err := g.CheckCost(v, CostLimit{})
		if !errors.Is(err, ErrTooCostly) || !strings.Contains(err.Error(), "units of work") {
			t.Errorf("%.30q: %v, want ErrTooCostly naming the work", src, err)
		}
		if again := g.CheckCost(v, CostLimit{}); again != err {
			t.Errorf("%.30q: the second answer %v is not the cached one", src, again)
		}
	}
}

// TestMaskCached: MaskCached serves a state's mask only once it is cached
// (the same as Mask), and says no, computing nothing, before.
func TestMaskCached(t *testing.T) {
	v, _ := synthVocab(t)
	g := mustCompile(t, maskSchemas[0], Options{})
	m := NewMatcher(g, v)
	got, want := NewBitset(v.Size()), NewBitset(v.Size())
	if m.MaskCached(got) {
		t.Fatalf("a mask served before any was computed")
	}
	if st := g.Stats(v); st.MaskHits+st.MaskMisses+st.StateMisses != 0 {
		t.Errorf("MaskCached computed or counted something: %+v", st)
	}
	m.Mask(want)
	if !m.MaskCached(got) || !slices.Equal(got, want) {
		t.Fatalf("the cached mask is not served as Mask computed it")
	}
}
