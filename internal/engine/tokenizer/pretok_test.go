package tokenizer

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

func splitWith(t *testing.T, pre, text string) []string {
	t.Helper()
	cfg, ok := preConfigs[pre]
	if !ok {
		t.Fatalf("no pre-tokenizer %q", pre)
	}
	p, err := newPreTokenizer(cfg.regexes)
	if err != nil {
		t.Fatalf("newPreTokenizer(%q): %v", pre, err)
	}
	return p.split(text)
}

// TestPreTokenizerSplit checks each pre-tokenizer on cases whose expected
// split follows from its regex (see the comments for the deciding rule).
func TestPreTokenizerSplit(t *testing.T) {
	cases := []struct {
		pre, in string
		want    []string
	}{
		// gpt-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
		{"gpt-2", "Hello world", []string{"Hello", " world"}},
		{"gpt-2", "I'm here's", []string{"I", "'m", " here", "'s"}},
		{"gpt-2", "it'S", []string{"it", "'", "S"}}, // case-sensitive contractions
		{"gpt-2", "  hi", []string{" ", " hi"}},     // \s+(?!\S) leaves the last space
		{"gpt-2", "a   ", []string{"a", "   "}},     // at the end all spaces go together
		{"gpt-2", "x\t\ty", []string{"x", "\t", "\t", "y"}},
		{"gpt-2", "123abc 45", []string{"123", "abc", " 45"}},
		{"gpt-2", "a ,,b", []string{"a", " ,,", "b"}},
		{"gpt-2", "🦙.cpp", []string{"🦙.", "cpp"}},
		{"gpt-2", "", nil},

		// llama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
		//  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
		{"llama3", "Hello world", []string{"Hello", " world"}},
		{"llama3", "it'S we'RE", []string{"it", "'S", " we", "'RE"}}, // case-insensitive
		{"llama3", "1234567", []string{"123", "456", "7"}},
		{"llama3", "a\n\nb", []string{"a", "\n\n", "b"}},
		{"llama3", "  \n  x", []string{"  \n", " ", " x"}},
		{"llama3", "hello!!\n\nworld", []string{"hello", "!!\n\n", "world"}},
		{"llama3", "$x (y)", []string{"$x", " (", "y", ")"}}, // any non-letter prefix joins a word
		{"llama3", "\tfoo", []string{"\tfoo"}},
		{"llama3", "x  ", []string{"x", "  "}},
		{"llama3", "x \t", []string{"x", " \t"}},
		{"llama3", "🦙.cpp", []string{"🦙.", "cpp"}},
		{"llama3", "3.14", []string{"3", ".", "14"}},
		{"llama3", "a\r\n", []string{"a", "\r\n"}},
		{"llama3", "нещо на", []string{"нещо", " на"}},

		// qwen2: the llama3 regex with single digits
		{"qwen2", "1234 ab", []string{"1", "2", "3", "4", " ab"}},
		{"qwen2", "it'S", []string{"it", "'S"}},

		// default: [\p{P}\$\+<=>\^~\|]+, then gpt-2, then \p{N}+, then [0-9][0-9][0-9]
		{"default", "Hello, world!", []string{"Hello", ",", " world", "!"}},
		{"default", "12345", []string{"123", "45"}},
		{"default", "a+b", []string{"a", "+", "b"}},
		{"default", "a  b", []string{"a", " ", " b"}},

		// deepseek-coder: [\r\n], \s?\p{L}+, \s?\p{P}+, CJK runs, \p{N}
		{"deepseek-coder", "Hello world\n123", []string{"Hello", " world", "\n", "1", "2", "3"}},
		{"deepseek-coder", "a, b", []string{"a", ",", " b"}},
		{"deepseek-coder", "我想在apple", []string{"我想在", "apple"}},
		{"deepseek-coder", "x  +y", []string{"x", "  +", "y"}}, // "+" is a symbol, not \p{P}: left as a gap

		// deepseek-llm: [\r\n], \s?(cased letters)+, \s?(ASCII/fullwidth punct)+,
		// \s+$, CJK runs, \p{N}+
		{"deepseek-llm", "Hello 123", []string{"Hello", " ", "123"}},
		{"deepseek-llm", "a  ", []string{"a", "  "}},
		{"deepseek-llm", "Ωmega", []string{"Ω", "mega"}}, // the punct class's ":-~" range holds A-Z and a-z
		{"deepseek-llm", "ΩΣ", []string{"ΩΣ"}},
		{"deepseek-llm", "a+b", []string{"a", "+", "b"}},
		{"deepseek-llm", "我想x", []string{"我想", "x"}},

		// gpt-4o (o200k): [^\r\n\p{L}\p{N}]?UPPER*LOWER+(?i:'s|…)?|[^\r\n\p{L}\p{N}]?UPPER+LOWER*(?i:'s|…)?|
		// \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
		{"gpt-4o", "Hello world", []string{"Hello", " world"}},
		{"gpt-4o", "HTTPServer helloWorld", []string{"HTTPServer", " hello", "World"}}, // UPPER* gives back until LOWER+ starts
		{"gpt-4o", "HELLO", []string{"HELLO"}},                                         // the second alternative
		{"gpt-4o", "I'M we'Re it's", []string{"I'M", " we'Re", " it's"}},               // contractions stay with the word
		{"gpt-4o", "'s", []string{"'s"}},                                               // the quote is the prefix of "s"
		{"gpt-4o", "1234567", []string{"123", "456", "7"}},
		{"gpt-4o", "a//b\n", []string{"a", "//", "b", "\n"}},
		{"gpt-4o", "x:/\n/y", []string{"x", ":/\n/", "y"}}, // [\r\n/]* after the punctuation
		{"gpt-4o", "ÉCOLE École éCOLE", []string{"ÉCOLE", " École", " é", "COLE"}},
		{"gpt-4o", "e\u0301t\u0301", []string{"e\u0301t\u0301"}}, // marks join both classes
		{"gpt-4o", "\u0301x", []string{"\u0301x"}},               // a leading mark is the prefix
		{"gpt-4o", "  \n  x", []string{"  \n", " ", " x"}},
		{"gpt-4o", "x  ", []string{"x", "  "}},
		{"gpt-4o", "你好世界 안녕", []string{"你好世界", " 안녕"}},
		{"gpt-4o", "<|channel|>analysis", []string{"<|", "channel", "|>", "analysis"}},
	}
	for _, c := range cases {
		got := splitWith(t, c.pre, c.in)
		if strings.Join(got, "|") != strings.Join(c.want, "|") || len(got) != len(c.want) {
			t.Errorf("%s split(%q) = %q, want %q", c.pre, c.in, got, c.want)
		}
	}
}

// TestSplitCoversInput checks, for every pre-tokenizer, that the words
// concatenate back to the input (after invalid UTF-8 becomes U+FFFD).
func TestSplitCoversInput(t *testing.T) {
	inputs := []string{
		"", " ", "Hello, y'all! How are you 😁 ?我想在apple工作1314151天～",
		"\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n", "3..3 3...3 ------=======",
		"bad \xff\xfe bytes \xe2\x82", "\u00a0\u2003x\u3000y\u0085", "Ω\u212A\u1FBE",
	}
	for pre := range preConfigs {
		for _, in := range inputs {
			got := strings.Join(splitWith(t, pre, in), "")
			// each invalid byte becomes one U+FFFD
			var b []byte
			for _, r := range decodeCpts(in, nil) {
				b = utf8.AppendRune(b, r)
			}
			want := string(b)
			if got != want {
				t.Errorf("%s: words of %q join to %q, want %q", pre, in, got, want)
			}
		}
	}
}

func TestDecodeCpts(t *testing.T) {
	cases := []struct {
		in   string
		want []rune
	}{
		{"aé€🦙", []rune{'a', 'é', '€', '🦙'}},
		{"\xff", []rune{0xFFFD}},
		{"\xe2\x82", []rune{0xFFFD, 0xFFFD}},
		{"\xc0\x80", []rune{0}},          // overlong NUL accepted, as in llama.cpp
		{"\xed\xa0\x80", []rune{0xD800}}, // surrogate accepted, as in llama.cpp
		{"\xf4\x90\x80\x80", []rune{0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD}},
	}
	for _, c := range cases {
		got := decodeCpts(c.in, nil)
		if string(got) != string(c.want) || len(got) != len(c.want) {
			t.Errorf("decodeCpts(%q) = %U, want %U", c.in, got, c.want)
		}
	}
	if got := string(appendCpt(nil, 0xD800)); got != "\xed\xa0\x80" {
		t.Errorf("appendCpt(U+D800) = %q, want %q", got, "\xed\xa0\x80")
	}
}

func TestTranslateRegex(t *testing.T) {
	cases := []struct {
		in, want  string
		collapsed bool
	}{
		{`\s?\p{L}+`, `[\t\n\v\f\r ]?[\x{F0D2}A-Za-z]+`, true},
		{`[^\s\p{N}]`, `[^\t\n\v\f\r \x{F0D1}0-9]`, true},
		{`\s+$`, `[\t\n\v\f\r ]+$`, false},
		{`[\r\n]`, `[\r\n]`, false},
	}
	for _, c := range cases {
		got, collapsed, err := translateRegex(c.in)
		if err != nil || got != c.want || collapsed != c.collapsed {
			t.Errorf("translateRegex(%q) = %q, %v, %v; want %q, %v, nil", c.in, got, collapsed, err, c.want, c.collapsed)
		}
	}
	for _, bad := range []string{`\s+(?!\S)`, `\p{Lu}`, `[\S]`, `\w+`, `\p{L}é`} {
		if _, _, err := translateRegex(bad); err == nil {
			t.Errorf("translateRegex(%q) error = nil, want an error", bad)
		}
	}
}

// TestPreTokenizerRegexOracle compares every pre-tokenizer with splits that
// an independent regex engine (Python's regex module, which has lookahead)
// computed from llama.cpp's regex lists: testdata/gen_splits.py says how.
func TestPreTokenizerRegexOracle(t *testing.T) {
	data, err := os.ReadFile("testdata/splits.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Text   string              `json:"text"`
		Splits map[string][]string `json:"splits"`
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatalf("testdata/splits.json: %v", err)
	}
	if len(cases) < 100 {
		t.Fatalf("testdata/splits.json has %d cases, want at least 100", len(cases))
	}
	for _, c := range cases {
		if len(c.Splits) != 6 {
			t.Fatalf("case %q has splits for %d pre-tokenizers, want 6", c.Text, len(c.Splits))
		}
		for pre, want := range c.Splits {
			got := splitWith(t, pre, c.Text)
			if strings.Join(got, "\x00") != strings.Join(want, "\x00") || len(got) != len(want) {
				t.Errorf("%s split(%q) = %q, want %q", pre, c.Text, got, want)
			}
		}
	}
}
