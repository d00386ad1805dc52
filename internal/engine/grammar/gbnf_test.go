package grammar

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// GBNF grammars of the shapes of llama.cpp's example grammars (written for
// these tests), each with an independent reference: encoding/json, Go's
// regexp package, or a recursive-descent parser.

// gbnfJSON is JSON with bounded whitespace after every token.
const gbnfJSON = `# JSON, as a GBNF grammar.
root   ::= ws value
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
    string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::= "[" ws ( value ("," ws value)* )? "]" ws

string ::= "\"" (
    [^"\\\x7F\x00-\x1F]                  # any character but a quote, a backslash or a control character
  | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= "-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]+)? ([eE] [-+]? [0-9]+)? ws
ws     ::= [ \t\n]{0,4}
`

// gbnfArith: lines of "expr = term", recursive through parentheses.
const gbnfArith = `root  ::= (expr "=" ws term "\n")+
expr  ::= term ([-+*/] term)*
term  ::= ident | num | "(" ws expr ")" ws
ident ::= [a-z] [a-z0-9_]* ws
num   ::= [0-9]+ ws
ws    ::= [ \t]*
`

// gbnfList: a bulleted list of one-line items.
const gbnfList = `root ::= item+
# one item per line
item ::= "- " [^\r\n\x0b\x0c\x85\u2028\u2029]+ "\n"
`

var gbnfListRE = regexp.MustCompile("^(- [^\r\n\v\f\u0085\u2028\u2029]+\n)+$")

// listOK: Go's regexp reads invalid UTF-8 as U+FFFD, which the class
// matches; the grammar (like llama.cpp) never matches invalid UTF-8.
func listOK(s string) bool { return utf8.ValidString(s) && gbnfListRE.MatchString(s) }

// gbnfChess: numbered turns of one or two moves in algebraic notation.
const gbnfChess = `root   ::= turn ("\n" turn){0,4}
turn   ::= [1-9] [0-9]? ". " move (" " move)?
move   ::= (pawn | piece | castle) [+#]?
pawn   ::= ([a-h] "x")? [a-h] [1-8] ("=" [NBRQ])?
piece  ::= [NBKRQ] [a-h]? [1-8]? "x"? [a-h] [1-8]
castle ::= "O-O" ("-O")?
`

var gbnfChessRE = func() *regexp.Regexp {
	move := `(([a-h]x)?[a-h][1-8](=[NBRQ])?|[NBKRQ][a-h]?[1-8]?x?[a-h][1-8]|O-O(-O)?)[+#]?`
	turn := `[1-9][0-9]?\. ` + move + `( ` + move + `)?`
	return regexp.MustCompile(`^` + turn + `(\n` + turn + `){0,4}$`)
}()

// arithOK is a recursive-descent reference for gbnfArith.
func arithOK(s string) bool {
	pos := 0
	ws := func() {
		for pos < len(s) && (s[pos] == ' ' || s[pos] == '\t') {
			pos++
		}
	}
	var expr func() bool
	term := func() bool {
		if pos >= len(s) {
			return false
		}
		switch c := s[pos]; {
		case c >= 'a' && c <= 'z':
			pos++
			for pos < len(s) && (s[pos] >= 'a' && s[pos] <= 'z' || s[pos] >= '0' && s[pos] <= '9' || s[pos] == '_') {
				pos++
			}
		case c >= '0' && c <= '9':
			for pos < len(s) && s[pos] >= '0' && s[pos] <= '9' {
				pos++
			}
		case c == '(':
			pos++
			ws()
			if !expr() || pos >= len(s) || s[pos] != ')' {
				return false
			}
			pos++
		default:
			return false
		}
		ws()
		return true
	}
	expr = func() bool {
		if !term() {
			return false
		}
		for pos < len(s) && strings.IndexByte("-+*/", s[pos]) >= 0 {
			pos++
			if !term() {
				return false
			}
		}
		return true
	}
	lines := 0
	for pos < len(s) {
		if !expr() || pos >= len(s) || s[pos] != '=' {
			return false
		}
		pos++
		ws()
		if !term() || pos >= len(s) || s[pos] != '\n' {
			return false
		}
		pos++
		lines++
	}
	return lines > 0
}

type gbnfCase struct {
	name   string
	src    string
	oracle func(string) bool
	exact  bool // the oracle decides the same language (else: grammar implies oracle)
}

var gbnfCases = []gbnfCase{
	{"json", gbnfJSON, func(s string) bool { return json.Valid([]byte(s)) }, false},
	{"arith", gbnfArith, arithOK, true},
	{"list", gbnfList, listOK, true},
	{"chess", gbnfChess, gbnfChessRE.MatchString, true},
}

func mustGBNF(t testing.TB, src string) *Grammar {
	t.Helper()
	g, err := CompileGBNF(src, Options{})
	if err != nil {
		t.Fatalf("CompileGBNF: %v\n%s", err, src)
	}
	return g
}

func TestGBNFExamples(t *testing.T) {
	v := byteVocab(t)
	good := map[string][]string{
		"json":  {`{}`, ` {"a": [1, -2.5e3, "x\"y", true, null], "b": {"c": "é\u00e9"}}`, `[]`, `"s"`, `0`, "[1,\n 2]"},
		"arith": {"1+2=3\n", "(a +b) *c = x1\n", "x=y\n((1))/2 = (q)\n", "foo_bar -12 =7\n"},
		"list":  {"- milk\n", "- milk\n- eggs, 12\n- crème fraîche\n"},
		"chess": {"1. e4 e5", "1. e4 e5\n2. Nf3 Nc6\n3. Bb5 a6\n4. Ba4 Nf6\n5. O-O Be7", "12. exd8=Q+ Kxd8#", "1. Nbd2 R1a3", "3. O-O-O"},
	}
	bad := map[string][]string{
		"json":  {``, `{`, `{"a" 1}`, `[1,]`, `01`, `{"a":1}}`, "\"a\nb\"", `[1]     `},
		"arith": {"", "1+2=3", "1+=3\n", "(1=2\n", "1 = 2 + 3\n", "A=b\n", "1==2\n"},
		"list":  {"", "- \n", "-milk\n", "- milk", "- a\r\n", "- a\u2028b\n"},
		"chess": {"", "1. e9", "1. e4 e5 d4", "0. e4", "1. Pe4", "1. O-O-O-O", "1. e4\n2. e5\n3. d4\n4. d5\n5. c4\n6. c5"},
	}
	for _, tc := range gbnfCases {
		g := mustGBNF(t, tc.src)
		for _, d := range good[tc.name] {
			if !accepts(g, v, d) {
				t.Errorf("%s: rejects %q, want accepted", tc.name, d)
			}
			if !tc.oracle(d) {
				t.Errorf("%s: the reference rejects good example %q", tc.name, d)
			}
		}
		for _, d := range bad[tc.name] {
			if accepts(g, v, d) {
				t.Errorf("%s: accepts %q, want rejected", tc.name, d)
			}
			if tc.exact && tc.oracle(d) {
				t.Errorf("%s: the reference accepts bad example %q", tc.name, d)
			}
		}
	}
}

// TestGBNFAgainstReferences mutates valid texts (and generates texts by
// masked sampling) and compares the grammar with its reference on each.
func TestGBNFAgainstReferences(t *testing.T) {
	v := byteVocab(t)
	rng := rand.New(rand.NewPCG(5, 6))
	alphabet := []byte("-+*/=()\n \t.x0123456789abcdeghNBKRQO#\"{}[],:\\ué")
	for _, tc := range gbnfCases {
		g := mustGBNF(t, tc.src)
		agree, total := 0, 0
		for run := 0; run < 150; run++ {
			// A random masked generation of up to 80 bytes.
			m := NewMatcher(g, v)
			mask := NewBitset(v.Size())
			var out []byte
			for len(out) < 80 && !m.Ended() {
				m.Mask(mask)
				var allowed []int32
				for id := 0; id < v.Size(); id++ {
					if mask.Has(id) {
						allowed = append(allowed, int32(id))
					}
				}
				if len(allowed) == 0 {
					t.Fatalf("%s: empty mask after %q", tc.name, out)
				}
				tok := allowed[rng.IntN(len(allowed))]
				if mask.Has(256) && rng.IntN(4) == 0 {
					tok = 256
				}
				if err := m.Accept(tok); err != nil {
					t.Fatalf("%s: masked token %d rejected: %v", tc.name, tok, err)
				}
				if tok != 256 {
					out = append(out, byte(tok))
				}
			}
			if m.Ended() && !tc.oracle(string(out)) {
				t.Errorf("%s: generated %q, which the reference rejects", tc.name, out)
			}
			// Mutations of it: both must agree (exact references) or the
			// grammar must imply the reference.
			for k := 0; k < 20; k++ {
				d := []byte(string(out))
				switch op := rng.IntN(3); {
				case op == 0 && len(d) > 0:
					d = append(d[:rng.IntN(len(d))], d[rng.IntN(len(d)):]...)
				case op == 1:
					i := rng.IntN(len(d) + 1)
					d = append(d[:i], append([]byte{alphabet[rng.IntN(len(alphabet))]}, d[i:]...)...)
				case len(d) > 0:
					d[rng.IntN(len(d))] = alphabet[rng.IntN(len(alphabet))]
				}
				got, want := accepts(g, v, string(d)), tc.oracle(string(d))
				total++
				if got == want {
					agree++
				}
				if got && !want || tc.exact && got != want {
					t.Errorf("%s: %q: grammar %v, reference %v", tc.name, d, got, want)
				}
			}
		}
		t.Logf("%s: %d of %d mutated texts decided as the reference does", tc.name, agree, total)
	}
}

// TestGBNFMaskAgreesWithAccept: random generations with multi-byte tokens
// through every example grammar; the mask equals what Accept takes.
func TestGBNFMaskAgreesWithAccept(t *testing.T) {
	v, _ := synthVocab(t)
	rng := rand.New(rand.NewPCG(7, 8))
	end := int32(v.Size() - 1)
	for _, tc := range gbnfCases {
		g := mustGBNF(t, tc.src)
		for run := 0; run < 4; run++ {
			m := NewMatcher(g, v)
			var out []byte
			for step := 0; step < 40 && !m.Ended(); step++ {
				mask := checkMaskAgrees(t, m, v, fmt.Sprintf("%s after %q", tc.name, out))
				var allowed []int32
				for id := 0; id < v.Size(); id++ {
					if mask.Has(id) {
						allowed = append(allowed, int32(id))
					}
				}
				if len(allowed) == 0 {
					t.Fatalf("%s: empty mask after %q", tc.name, out)
				}
				tok := allowed[rng.IntN(len(allowed))]
				if mask.Has(int(end)) && rng.IntN(2) == 0 {
					tok = end
				}
				if err := m.Accept(tok); err != nil {
					t.Fatal(err)
				}
				out = append(out, v.Token(tok)...)
			}
			if m.Ended() && !tc.oracle(string(out)) {
				t.Errorf("%s: generated %q, which the reference rejects", tc.name, out)
			}
		}
	}
}

func TestGBNFSyntax(t *testing.T) {
	v := byteVocab(t)
	cases := []struct {
		src       string
		good, bad []string
	}{
		{`root ::= "a" . "b"`, []string{"a\nb", "aéb", "a😀b", "a\x00b"}, []string{"ab", "a\xffb", "aééb"}},
		{`root ::= [^a-c\n]`, []string{"d", "é", "\x00"}, []string{"a", "c", "\n", "dd"}},
		{`root ::= "\xE9" [\u00e0-\u00e2] "\U0001F600" "\t\\\"\[\]"`, []string{"éà😀\t\\\"[]", "éâ😀\t\\\"[]"}, []string{"\xe9\xe0😀\t\\\"[]"}},
		{`root ::= "a"{3} "b"{2,} "c"{1,2} "d"{0,1}`, []string{"aaabbc", "aaabbbbccd"}, []string{"aabbc", "aaabc", "aaabbcccd", "aaabbcdd"}},
		{`root ::= ( "x" | ) "y"`, []string{"y", "xy"}, []string{"xxy"}},
		{"root ::=\n  part-1\n  part_2 # comment \"x\"\n\npart-1 ::= \"p\"\n  | \"q\"\npart_2 ::= [0-9]+", []string{"p1", "q42"}, []string{"p", "1"}},
		{"root ::= a b\r\na ::= \"a\"\r\nb ::= \"b\"\r\n", []string{"ab"}, []string{"a"}},
		{`root ::= "" | "z"`, []string{"", "z"}, []string{"zz"}},
		{`root ::= [\-\]]+`, []string{"-]-"}, []string{"a"}},
		{`root ::= [a-] [-b]`, []string{"ab", "--"}, []string{"bb"}},
		{`root ::= ("a" "b"*)+`, []string{"a", "abbab"}, []string{"b", ""}},
		{`root ::= list
list ::= "(" (item (" " item)*)? ")"
item ::= [a-z]+ | list`, []string{"()", "(a (b c) (()))"}, []string{"(", "(a))", "(a  b)"}},
	}
	for _, tc := range cases {
		g := mustGBNF(t, tc.src)
		for _, d := range tc.good {
			if !accepts(g, v, d) {
				t.Errorf("%q: rejects %q, want accepted", tc.src, d)
			}
		}
		for _, d := range tc.bad {
			if accepts(g, v, d) {
				t.Errorf("%q: accepts %q, want rejected", tc.src, d)
			}
		}
	}
}

func TestGBNFErrors(t *testing.T) {
	cases := []struct {
		src  string
		is   error
		want string
	}{
		{`root ::= foo`, nil, `line 1, column 10: rule "foo" is used but not defined`},
		{`start ::= "a"`, nil, "no rule named root"},
		{"root ::= \"a\"\nroot ::= \"b\"", nil, `line 2, column 1: rule "root" is defined twice (first at line 1, column 1)`},
		{"root ::= \"abc", nil, "line 1, column 10: unterminated string"},
		{"root ::= [a-", nil, "line 1, column 10: unterminated character class"},
		{"root ::= [z-a]", nil, "out of order"},
		{"root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"", nil, `line 2, column 1: rule "expr" is left-recursive (expr -> expr`},
		{"root ::= a\na ::= b \"x\"\nb ::= a | \"y\"", nil, `rule "a" is left-recursive (a -> b -> a`},
		{"root ::= e\ne ::= n e \"x\" | \"y\"\nn ::= \"a\"?", nil, `rule "e" is left-recursive`},
		{`root ::= "a"{3,2}`, nil, "minimum above its maximum"},
		{`root ::= "a"{5000}`, nil, "above 4096"},
		{`root ::= "a"{2`, nil, "expected } to close"},
		{`root ::= "a"{,2}`, nil, "expected a number"},
		{`root ::= <think> "x"`, ErrUnsupported, "line 1, column 10: token references"},
		{`root ::= "\q"`, nil, `line 1, column 11: unknown escape \q`},
		{`root ::= "\x4"`, nil, `\x needs 2 hexadecimal digits`},
		{`root ::= "\uD800"`, nil, "not a Unicode character"},
		{`root ::= ("a"`, nil, "line 1, column 10: missing ) for this ("},
		{`root ::= "a" )`, nil, "line 1, column 14: unmatched )"},
		{"root ::= a\na ::= \"x\" a", nil, `rule root matches no text: rules "root", "a" never finish`},
		{`root ::= * "a"`, nil, "nothing to repeat"},
		{`root ::= "a" = "b"`, nil, `line 1, column 14: unexpected "="`},
		{"root ::= \"a\"\n  ::= \"b\"", nil, `line 2, column 3: unexpected ":"`},
		{"root \"a\"", nil, "expected ::= after rule name"},
		{"root ::= \"\xff\"", nil, "line 1, column 11: invalid UTF-8"},
		{"# é\nroot ::= \"é\" ]", nil, `line 2, column 14: unexpected "]"`},
		{`root ::= "a"` + strings.Repeat("?", 17), nil, "more than 16 repetition operators"},
		{`root ::= ` + strings.Repeat("(", 200) + `"a"` + strings.Repeat(")", 200), nil, "nested more than 128"},
		{`root ::= ("a"{1000}){1000}`, ErrTooLarge, "gbnf"},
	}
	for _, tc := range cases {
		_, err := CompileGBNF(tc.src, Options{})
		if err == nil {
			t.Errorf("%q: no error, want %q", tc.src, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %q does not contain %q", tc.src, err, tc.want)
		}
		if tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("%q: error %q does not wrap %v", tc.src, err, tc.is)
		}
	}
}

// TestGBNFInlining: small non-recursive rules are inlined (the nullable ws
// rule then causes no parallel readings), recursive ones stay rules.
func TestGBNFInlining(t *testing.T) {
	g := mustGBNF(t, gbnfJSON)
	// value, object, array are mutually recursive; string, number and ws
	// are small enough to inline; root is the start rule.
	if got := g.Rules(); got != 4 {
		t.Errorf("json grammar compiled to %d rules (%v), want 4", got, g.ruleNames)
	}
	v := byteVocab(t)
	m := NewMatcher(mustGBNF(t, "root ::= ws ws ws \"x\"\nws ::= [ ]*"), v)
	if err := m.AcceptBytes([]byte("      ")); err != nil {
		t.Fatal(err)
	}
	if len(m.stacks) != 1 {
		t.Errorf("ws ws ws after 6 spaces: %d parallel stacks, want 1 (inlined into one DFA)", len(m.stacks))
	}
}

// TestGBNFDeepRecursion: nesting beyond MaxDepth is refused at the byte
// that would exceed it, never a crash; below it works.
func TestGBNFDeepRecursion(t *testing.T) {
	v := byteVocab(t)
	g, err := CompileGBNF(`root ::= "(" root ")" | "x"`, Options{MaxDepth: 50})
	if err != nil {
		t.Fatal(err)
	}
	if !accepts(g, v, strings.Repeat("(", 30)+"x"+strings.Repeat(")", 30)) {
		t.Errorf("30 levels rejected")
	}
	if accepts(g, v, strings.Repeat("(", 100)+"x"+strings.Repeat(")", 100)) {
		t.Errorf("100 levels accepted with MaxDepth 50")
	}
}

// TestRealVocabularyGrammars checks Mask against Accept on the real 32k
// Llama 2 vocabulary for a GBNF grammar and a tool-call grammar built from
// parts, at several prefixes of their benchmark documents.
func TestRealVocabularyGrammars(t *testing.T) {
	v := vocab32k(t)
	for _, mg := range maskGrammars[1:] {
		g, err := mg.compile(Options{})
		if err != nil {
			t.Fatal(err)
		}
		ms := docPrefixMatchers(t, g, v, mg.doc)
		for _, i := range []int{0, 1, 13, 40, 77, len(ms) - 1} {
			checkMaskAgrees(t, ms[i], v, mg.name+" prefix "+mg.doc[:i])
		}
	}
}

// TestGBNFAmbiguousMask: an ambiguous grammar keeps many parallel stacks
// that share their lower parts (each is masked once); the mask must still
// equal what Accept takes at every step.
func TestGBNFAmbiguousMask(t *testing.T) {
	v, _ := synthVocab(t)
	g := mustGBNF(t, "root ::= a\na ::= (\"x\" | \"xx\") a b | \"\"\nb ::= \"\" | \"x\" | \"y\"")
	m := NewMatcher(g, v)
	for i := 0; i < 24; i++ {
		checkMaskAgrees(t, m, v, fmt.Sprintf("after %d x", i))
		if err := m.AcceptBytes([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if len(m.stacks) < 20 {
		t.Errorf("%d parallel stacks after 24 x; the test wants an ambiguous state", len(m.stacks))
	}
}

// gbnfDoubling is ambiguous without bound: every letter doubles the readings
// (rule a or rule b may take the rest), so MaxStacks is reached after a few
// letters.
const gbnfDoubling = "root ::= a\na ::= [a-z] a \"1\" | [a-z] b \"2\" | \"\"\nb ::= [a-z] a \"3\" | [a-z] b \"4\" | \"\""

// gbnfNested is ambiguous with readings that grow with the input (one per
// way to split the x's and place the b's); its stacks share lower parts.
const gbnfNested = "root ::= a\na ::= (\"x\" | \"xx\") a b | \"\"\nb ::= \"\" | \"x\" | \"y\""

// TestGBNFStackLimitMask drives grammars to MaxStacks readings and checks,
// for every token of the 32k Llama 2 vocabulary, that the mask holds the
// token exactly when Accept takes it: a token whose bytes would make more
// than MaxStacks readings is refused by Accept, so it must be out of the
// mask too.
func TestGBNFStackLimitMask(t *testing.T) {
	v := vocab32k(t)
	for _, tc := range []struct {
		name, src, step string
		steps           int
	}{
		{"doubling", gbnfDoubling, "q", 8},
		{"nested", gbnfNested, "x", 24},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := mustGBNF(t, tc.src)
			m := NewMatcher(g, v)
			limited := false
			for i := 0; i <= tc.steps; i++ {
				if i == 0 || i >= tc.steps-1 {
					mask := checkMaskAgrees(t, m, v, fmt.Sprintf("after %d %q (%d stacks)", i, tc.step, len(m.stacks)))
					for id := 0; id < v.Size() && !limited; id++ {
						c := m.Clone()
						if err := c.AcceptBytes(v.Token(int32(id))); err != nil && strings.Contains(err.Error(), "parallel readings") {
							limited = true
							if mask.Has(id) {
								t.Fatalf("token %d in the mask past the limit", id)
							}
						}
					}
				}
				if i < tc.steps {
					if err := m.AcceptBytes([]byte(tc.step)); err != nil {
						t.Fatalf("after %d %q: %v", i, tc.step, err)
					}
				}
			}
			if tc.name == "doubling" && !limited {
				t.Errorf("no token reached MaxStacks; the test wants the limit")
			}
		})
	}
}

// TestExactMaskAgreesWithFast: on the benchmark grammars (a schema, the GBNF
// JSON grammar, the Hermes tool grammar) and the 32k vocabulary, the exact
// stack-set walk and the per-state fast path give the same mask at every
// byte prefix of their documents, where neither hits MaxStacks.
func TestExactMaskAgreesWithFast(t *testing.T) {
	v := vocab32k(t)
	for _, mg := range maskGrammars {
		t.Run(mg.name, func(t *testing.T) {
			g, err := mg.compile(Options{})
			if err != nil {
				t.Fatal(err)
			}
			ms := docPrefixMatchers(t, g, v, mg.doc)
			fast, exact := NewBitset(v.Size()), NewBitset(v.Size())
			wide := 0 // masks of more than 10000 tokens (inside strings)
			for i, m := range ms {
				if i%3 != 0 {
					continue
				}
				fast.clear()
				exact.clear()
				m.w.work, m.w.workMax = 0, 1<<62
				fan := 0
				var done map[string]int32
				if len(m.stacks) > 1 {
					done = map[string]int32{}
				}
				m.w.startTrace(m.stacks)
				for i, st := range m.stacks {
					fan += m.t.maskStack(st, fast, m.w, done, i)
				}
				if fan > MaxStacks {
					t.Fatalf("prefix %d: fast path bound %d past MaxStacks", i, fan)
				}
				m.t.exactMask(m.stacks, exact, m.w)
				for id := 0; id < v.Size(); id++ {
					if fast.Has(id) != exact.Has(id) {
						t.Fatalf("prefix %d %q (%d stacks): token %d %q: fast %v, exact %v", i, mg.doc[:i], len(m.stacks), id, v.Token(int32(id)), fast.Has(id), exact.Has(id))
					}
				}
				if exact.Count() > 10000 {
					wide++
				}
			}
			if wide == 0 {
				t.Errorf("no prefix inside a string; the test wants wide masks")
			}
			t.Logf("%d prefixes compared, %d with wide masks", (len(ms)+2)/3, wide)
		})
	}
}
