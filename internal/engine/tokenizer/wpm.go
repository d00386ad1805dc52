package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// WordPiece, as llama.cpp's llm_tokenizer_wpm tokenizes a "bert"
// vocabulary: the converter writes word-initial pieces with a leading "▁"
// and continuation pieces without BERT's "##", so each word is looked up
// as "▁"+word, longest match first, left to right; a word with a part no
// piece matches becomes one [UNK].

// initWPM readies a WordPiece vocabulary: no byte fallback, and the
// longest token text in bytes (the widest match tried).
func (t *Tokenizer) initWPM() {
	for b := range t.byteTok {
		t.byteTok[b] = -1
	}
	for _, s := range t.texts {
		t.maxTokenLen = max(t.maxTokenLen, len(s))
	}
}

// encodeWPMText is Encode for WordPiece: with addSpecial, [CLS] (BOS)
// first and [SEP] last whatever the add_* keys say, as llama.cpp does.
func (t *Tokenizer) encodeWPMText(text string, addSpecial, parseSpecial bool) []int32 {
	out := make([]int32, 0, len(text)/3+2)
	if addSpecial && t.v.BOS >= 0 {
		out = append(out, t.v.BOS)
	}
	if text != "" {
		for _, f := range t.partition(text, parseSpecial) {
			if f.id >= 0 {
				out = append(out, f.id)
				continue
			}
			out = t.encodeWPM(f.text, out)
		}
	}
	if addSpecial && t.v.SEP >= 0 {
		out = append(out, t.v.SEP)
	}
	return out
}

// encodeWPM appends the WordPiece tokens of one raw text fragment.
func (t *Tokenizer) encodeWPM(text string, out []int32) []int32 {
	for _, word := range t.wpmWords(text) {
		w := spmSpace + word
		start := len(out)
		for i := 0; i < len(w); {
			match := false
			for j := min(len(w), i+t.maxTokenLen+1); j > i; j-- {
				if id, ok := t.toID[w[i:j]]; ok {
					out = append(out, id)
					i, match = j, true
					break
				}
			}
			if !match {
				out = out[:start]
				break
			}
		}
		if len(out) == start && t.v.UNK >= 0 {
			out = append(out, t.v.UNK)
		}
	}
	return out
}

// wpmWords is llama.cpp's WordPiece preprocessing: optional NFD and
// accent stripping, split on white space, control characters dropped,
// optional lower-casing, and every punctuation mark, ASCII symbol and CJK
// ideograph a word of its own.
func (t *Tokenizer) wpmWords(text string) []string {
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	if t.v.StripAccents {
		text = norm.NFD.String(text)
	}
	var words []string
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			words = append(words, cur.String())
			cur.Reset()
		}
	}
	for _, r := range text {
		switch {
		case unicode.IsSpace(r):
			flush()
			continue
		case r == 0 || r == utf8.RuneError || unicode.Is(unicode.C, r):
			continue
		case t.v.StripAccents && unicode.Is(unicode.Mn, r):
			continue
		}
		if t.v.Lowercase {
			r = unicode.ToLower(r)
		}
		if unicode.IsPunct(r) || (r < 0x7F && unicode.IsSymbol(r)) || isCJK(r) {
			flush()
			words = append(words, string(r))
			continue
		}
		cur.WriteRune(r)
	}
	flush()
	return words
}

// isCJK is llama.cpp's is_chinese_char (with its 0x2B920 quirk).
func isCJK(r rune) bool {
	return (r >= 0x4E00 && r <= 0x9FFF) || (r >= 0x3400 && r <= 0x4DBF) ||
		(r >= 0x20000 && r <= 0x2A6DF) || (r >= 0x2A700 && r <= 0x2B73F) ||
		(r >= 0x2B740 && r <= 0x2B81F) || (r >= 0x2B920 && r <= 0x2CEAF) ||
		(r >= 0xF900 && r <= 0xFAFF) || (r >= 0x2F800 && r <= 0x2FA1F)
}
