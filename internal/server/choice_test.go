package server

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"tandem/internal/engine"
)

// runChoice feeds token texts through a choiceState as follow does and
// returns the text of each piece handed out, whether a stop string matched,
// the number of tokens consumed and the token count handed out per piece.
func runChoice(t *testing.T, stops []string, texts []string) (pieces []string, stopped bool, consumed int, perPiece []int) {
	t.Helper()
	tok := testVocab(t, "", true)
	c := newChoiceState(tok.NewContinuationDecoder(), stops)
	for _, id := range tokenIDs(t, tok, texts...) {
		if c.add(engine.Token{ID: id}) {
			text, toks := c.take()
			return append(pieces, text), true, c.tokens, append(perPiece, len(toks))
		}
		if c.ready() {
			text, toks := c.take()
			pieces, perPiece = append(pieces, text), append(perPiece, len(toks))
		}
	}
	c.end()
	text, toks := c.take()
	return append(pieces, text), false, c.tokens, append(perPiece, len(toks))
}

func TestChoiceStopStrings(t *testing.T) {
	tests := []struct {
		name     string
		stops    []string
		texts    []string
		pieces   []string
		stopped  bool
		consumed int
		perPiece []int
	}{
		{"no stops", nil, []string{"▁Hello", "▁world"}, []string{" Hello", " world", ""}, false, 2, []int{1, 1, 0}},
		{"stop split over 3 tokens", []string{"STOP"}, []string{"a", "S", "TO", "P", "b"},
			[]string{"a", ""}, true, 4, []int{1, 0}},
		{"stop inside one token, text before it kept", []string{"OP"}, []string{"a", "▁STOP", "b"},
			[]string{"a", " ST"}, true, 2, []int{1, 1}},
		{"false prefix released intact when it diverges", []string{"STOP"}, []string{"a", "ST", "O", "x", "y"},
			[]string{"a", "STOx", "y", ""}, false, 5, []int{1, 3, 1, 0}},
		{"false prefix at the end is released", []string{"STOP"}, []string{"a", "ST", "O"},
			[]string{"a", "STO"}, false, 3, []int{1, 2}},
		{"earliest of several stops wins", []string{"xyz", "b"}, []string{"a", "x", "y", "b", "z"},
			[]string{"a", "xy"}, true, 4, []int{1, 2}},
		{"prefix of one stop, match of another", []string{"abc", "bq"}, []string{"a", "b", "q"},
			[]string{"a"}, true, 3, []int{1}},
		{"stop right at the start", []string{"ST"}, []string{"ST", "x"}, []string{""}, true, 1, []int{0}},
		{"emoji from byte tokens comes out whole", nil, []string{"a", "<0xF0>", "<0x9F>", "<0x98>", "<0x80>", "b"},
			[]string{"a", "😀", "b", ""}, false, 6, []int{1, 4, 1, 0}},
		{"stop after multibyte text", []string{"é!"}, []string{"é", "é", "!"}, []string{"é", ""}, true, 3, []int{1, 0}},
	}
	for _, tc := range tests {
		pieces, stopped, consumed, perPiece := runChoice(t, tc.stops, tc.texts)
		if !reflect.DeepEqual(pieces, tc.pieces) || stopped != tc.stopped || consumed != tc.consumed || !reflect.DeepEqual(perPiece, tc.perPiece) {
			t.Errorf("%s: pieces %q stopped %v consumed %d tokens/piece %v, want %q %v %d %v",
				tc.name, pieces, stopped, consumed, perPiece, tc.pieces, tc.stopped, tc.consumed, tc.perPiece)
		}
		for _, p := range pieces {
			if !utf8.ValidString(p) {
				t.Errorf("%s: piece %q is not valid UTF-8", tc.name, p)
			}
			for _, s := range tc.stops {
				if strings.Contains(p, s) {
					t.Errorf("%s: piece %q contains stop string %q", tc.name, p, s)
				}
			}
		}
	}
}

// TestChoiceIncompleteCharacter checks that bytes that never complete a
// character come out, at the end, as valid UTF-8 with U+FFFD.
func TestChoiceIncompleteCharacter(t *testing.T) {
	pieces, _, _, _ := runChoice(t, nil, []string{"a", "<0xE2>", "<0x82>"})
	if len(pieces) != 2 || pieces[0] != "a" || !utf8.ValidString(pieces[1]) || !strings.Contains(pieces[1], "\uFFFD") {
		t.Errorf("pieces = %q, want [\"a\" U+FFFD...]", pieces)
	}
}

// TestChoiceTextOffsets checks the rune offsets recorded for logprobs.
func TestChoiceTextOffsets(t *testing.T) {
	tok := testVocab(t, "", true)
	c := newChoiceState(tok.NewContinuationDecoder(), nil)
	var got []int
	for _, id := range tokenIDs(t, tok, "é", "<0xC3>", "<0xA9>", "▁Hello") {
		c.add(engine.Token{ID: id})
		_, toks := c.take()
		for _, r := range toks {
			got = append(got, r.runeStart)
		}
	}
	c.end()
	if _, toks := c.take(); len(toks) != 0 {
		t.Errorf("take() after end handed out %d more tokens, want 0", len(toks))
	}
	if want := []int{0, 1, 1, 2}; !reflect.DeepEqual(got, want) {
		t.Errorf("rune offsets = %v, want %v", got, want)
	}
	if string(c.text) != "éé Hello" {
		t.Errorf("text = %q, want %q", c.text, "éé Hello")
	}
}
