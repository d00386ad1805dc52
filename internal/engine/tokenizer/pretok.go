package tokenizer

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// This file holds the BPE pre-tokenizers: the code that cuts text into
// words before merges are applied. It follows llama.cpp's
// unicode_regex_split: the text is decoded to code points, then each regex
// of the pre-tokenizer's list splits every piece left by the previous one
// into matches and the gaps between them. The gpt-2, llama3 and qwen2
// regexes use lookahead, which Go's regexp lacks; they are hand-coded here
// as in llama.cpp's unicode.cpp (llama.cpp hand-codes gpt-2 and llama3 and
// runs qwen2 through std::regex; the qwen2 splitter here is the llama3 one
// with single digits, which is what that regex matches). Every other regex
// runs on Go's regexp after the same rewrite llama.cpp applies before
// handing it to std::regex.

// Regexes named by llama.cpp's pre-tokenizers. The first three are matched
// by string to pick a hand-coded splitter.
const (
	reGPT2   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`
	reLlama3 = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	reQwen2  = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// reO200k is the split regex of OpenAI's o200k encodings (gpt-4o,
	// gpt-oss's o200k_harmony), as their tokenizer.json writes it.
	reO200k = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`

	// reCJK is deepseek's "[一-龥ࠀ-一가-퟿]+", written with escapes.
	reCJK = `[\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+`
	// reDeepseekLetters is deepseek-llm's cased-letter class. It is spelled
	// with escapes because several of its characters (U+1FBE, U+2126,
	// U+212A, …) are canonical singletons that text tools silently replace.
	reDeepseekLetters = `\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}` +
		`\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}` +
		`\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}` +
		`\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}` +
		`\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}` +
		`\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}` +
		`\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}` +
		`\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}` +
		`\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}` +
		`\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}` +
		`\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}` +
		`\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+`
	// reDeepseekPunct is deepseek-llm's "\s?[!-/:-~！-／：-～‘-‟　-。]+".
	reDeepseekPunct = `\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+`
)

// preConfig describes one llama.cpp pre-tokenizer type.
type preConfig struct {
	regexes      []string
	ignoreMerges bool // a word that is itself a token is not merged (llama3)
	cleanSpaces  bool // Decode applies clean_up_tokenization_spaces
	spmStyle     bool // gemma4: "▁" for spaces, raw UTF-8, <0xXX> byte fallback
}

var (
	preDefault = preConfig{
		regexes:     []string{`[\p{P}\$\+<=>\^~\|]+`, reGPT2, `\p{N}+`, `[0-9][0-9][0-9]`},
		cleanSpaces: true,
	}
	preGPT2   = preConfig{regexes: []string{reGPT2}, cleanSpaces: true}
	preLlama3 = preConfig{regexes: []string{reLlama3}, ignoreMerges: true, cleanSpaces: true}
	preDBRX   = preConfig{regexes: []string{reLlama3}, cleanSpaces: true}
	preQwen2  = preConfig{regexes: []string{reQwen2}}
	preO200k  = preConfig{regexes: []string{reO200k}}
	preQwen2C = preConfig{regexes: []string{reQwen2}, cleanSpaces: true}
	preDSLLM  = preConfig{regexes: []string{"[\r\n]", reDeepseekLetters, reDeepseekPunct, `\s+$`, reCJK, `\p{N}+`}}
	// preGemma4 only splits runs of newlines from the rest: Gemma 4's
	// merges run over whole lines.
	preGemma4 = preConfig{regexes: []string{`[^\n]+|[\n]+`}, cleanSpaces: true, spmStyle: true}
	preDSCode = preConfig{regexes: []string{"[\r\n]", `\s?\p{L}+`, `\s?\p{P}+`, reCJK, `\p{N}`}}
)

// preConfigs maps tokenizer.ggml.pre values to pre-tokenizers, with the
// aliases llama.cpp accepts for each.
var preConfigs = map[string]preConfig{
	"":                 preDefault,
	"default":          preDefault,
	"gpt-2":            preGPT2,
	"phi-2":            preGPT2,
	"jina-es":          preGPT2,
	"jina-de":          preGPT2,
	"jina-v1-en":       preGPT2,
	"jina-v2-es":       preGPT2,
	"jina-v2-de":       preGPT2,
	"jina-v2-code":     preGPT2,
	"gigachat":         preGPT2,
	"roberta-bpe":      preGPT2,
	"mpt":              preGPT2,
	"olmo":             preGPT2,
	"jais":             preGPT2,
	"llama3":           preLlama3,
	"llama-v3":         preLlama3,
	"llama-bpe":        preLlama3,
	"falcon3":          preLlama3,
	"dbrx":             preDBRX,
	"smaug-bpe":        preDBRX,
	"qwen2":            preQwen2,
	"deepseek-r1-qwen": preQwen2,
	"stablelm2":        preQwen2C,
	"megrez":           preQwen2C,
	"deepseek-llm":     preDSLLM,
	"gpt-4o":           preO200k,
	"llama4":           preO200k,
	"deepseek-coder":   preDSCode,
	"gemma4":           preGemma4,
	// granite-embed-multi-311m is llama.cpp's other name for it.
	"granite-embed-multi-311m": preGemma4,
}

// addBOSPre lists the pre-tokenizers for which llama.cpp defaults
// add_bos_token to true on a BPE vocabulary.
var addBOSPre = map[string]struct{}{
	"llama3": {}, "llama-v3": {}, "llama-bpe": {}, "falcon3": {}, "tekken": {}, "chameleon": {},
}

// Code point classes, as llama.cpp's unicode_cpt_flags. Exactly one
// category bit is set for a code point; flagSpace may come on top.
const (
	flagSpace  uint8 = 1 << iota // Unicode White_Space
	flagLetter                   // L
	flagNumber                   // N
	flagPunct                    // P
	flagMark                     // M
	flagSymbol                   // S
	flagOther                    // anything else (controls, format, unassigned)
)

var asciiFlags = func() (t [128]uint8) {
	for r := rune(0); r < 128; r++ {
		t[r] = slowFlags(r)
	}
	return t
}()

func slowFlags(r rune) uint8 {
	var f uint8
	if unicode.IsSpace(r) {
		f = flagSpace
	}
	switch {
	case unicode.IsLetter(r):
		f |= flagLetter
	case unicode.IsNumber(r):
		f |= flagNumber
	case unicode.IsPunct(r):
		f |= flagPunct
	case unicode.IsMark(r):
		f |= flagMark
	case unicode.IsSymbol(r):
		f |= flagSymbol
	default:
		f |= flagOther
	}
	return f
}

// cptFlags returns the class bits of a code point (never zero).
func cptFlags(r rune) uint8 {
	if r >= 0 && r < 128 {
		return asciiFlags[r]
	}
	return slowFlags(r)
}

// utf8SeqLen is llama.cpp's unicode_len_utf8: the sequence length that a
// lead byte announces, 1 for continuation bytes.
func utf8SeqLen(c byte) int {
	switch c >> 4 {
	case 0xC, 0xD:
		return 2
	case 0xE:
		return 3
	case 0xF:
		return 4
	}
	return 1
}

// decodeCpts decodes text as llama.cpp's unicode_cpts_from_utf8 does: it
// trusts the lead byte's length and checks only that continuation bytes look
// like continuation bytes, so overlong forms and surrogates decode to their
// values. A byte that starts no valid sequence becomes U+FFFD and decoding
// moves on by one byte. (llama.cpp would later throw on values above
// U+10FFFF; they count as invalid here.)
func decodeCpts(text string, dst []rune) []rune {
	cont := func(i int) bool { return i < len(text) && text[i]&0xC0 == 0x80 }
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c < 0x80:
			dst = append(dst, rune(c))
			i++
			continue
		case c&0xE0 == 0xC0:
			if cont(i + 1) {
				dst = append(dst, rune(c&0x1F)<<6|rune(text[i+1]&0x3F))
				i += 2
				continue
			}
		case c&0xF0 == 0xE0:
			if cont(i+1) && cont(i+2) {
				dst = append(dst, rune(c&0x0F)<<12|rune(text[i+1]&0x3F)<<6|rune(text[i+2]&0x3F))
				i += 3
				continue
			}
		case c&0xF8 == 0xF0:
			if cont(i+1) && cont(i+2) && cont(i+3) {
				r := rune(c&0x07)<<18 | rune(text[i+1]&0x3F)<<12 | rune(text[i+2]&0x3F)<<6 | rune(text[i+3]&0x3F)
				if r <= unicode.MaxRune {
					dst = append(dst, r)
					i += 4
					continue
				}
			}
		}
		dst = append(dst, utf8.RuneError)
		i++
	}
	return dst
}

// appendCpt encodes a code point as llama.cpp's unicode_cpt_to_utf8:
// surrogate values get their three-byte form rather than U+FFFD.
func appendCpt(dst []byte, r rune) []byte {
	switch {
	case r < 0x80:
		return append(dst, byte(r))
	case r < 0x800:
		return append(dst, 0xC0|byte(r>>6), 0x80|byte(r&0x3F))
	case r < 0x10000:
		return append(dst, 0xE0|byte(r>>12), 0x80|byte(r>>6&0x3F), 0x80|byte(r&0x3F))
	}
	return append(dst, 0xF0|byte(r>>18), 0x80|byte(r>>12&0x3F), 0x80|byte(r>>6&0x3F), 0x80|byte(r&0x3F))
}

// splitStage splits every piece (given as code point counts over cpts) into
// smaller pieces.
type splitStage interface {
	split(in *splitInput, pieces []int) []int
}

// splitInput is one text being pre-tokenized, with the views the regex
// stages need, built on first use.
type splitInput struct {
	cpts      []rune
	collapsed []rune // code points ≥ 128 replaced by their class
	wide      []rune // non-ASCII white space replaced by \v
	buf       []byte
}

// Stand-ins for the bytes 0xD0–0xD5 that llama.cpp puts in its collapsed
// text: a code point ≥ 128 becomes the stand-in of its class.
const (
	colOther  = 0xF0D0
	colNumber = 0xF0D1
	colLetter = 0xF0D2
	colPunct  = 0xF0D3
	colMark   = 0xF0D4
	colSymbol = 0xF0D5
)

func (in *splitInput) collapsedView() []rune {
	if in.collapsed == nil {
		v := make([]rune, len(in.cpts))
		for i, r := range in.cpts {
			if r < 128 {
				v[i] = r
				continue
			}
			f := cptFlags(r)
			switch {
			case f&flagSpace != 0:
				v[i] = '\v'
			case f&flagLetter != 0:
				v[i] = colLetter
			case f&flagNumber != 0:
				v[i] = colNumber
			case f&flagPunct != 0:
				v[i] = colPunct
			case f&flagMark != 0:
				v[i] = colMark
			case f&flagSymbol != 0:
				v[i] = colSymbol
			default:
				v[i] = colOther
			}
		}
		in.collapsed = v
	}
	return in.collapsed
}

func (in *splitInput) wideView() []rune {
	if in.wide == nil {
		v := make([]rune, len(in.cpts))
		for i, r := range in.cpts {
			if r > 0x7F && cptFlags(r)&flagSpace != 0 {
				r = '\v'
			}
			v[i] = r
		}
		in.wide = v
	}
	return in.wide
}

// regexStage runs a translated regex over each piece: matches and the gaps
// between them both become pieces (llama.cpp's unicode_regex_split_stl).
type regexStage struct {
	re        *regexp.Regexp
	collapsed bool
}

func (s *regexStage) split(in *splitInput, pieces []int) []int {
	view := in.wideView
	if s.collapsed {
		view = in.collapsedView
	}
	text := view()
	out := make([]int, 0, len(pieces))
	start := 0
	for _, n := range pieces {
		buf := in.buf[:0]
		for _, r := range text[start : start+n] {
			buf = utf8.AppendRune(buf, r)
		}
		in.buf = buf
		pos := 0
		for _, m := range s.re.FindAllIndex(buf, -1) {
			if m[0] > pos {
				out = append(out, utf8.RuneCount(buf[pos:m[0]]))
			}
			if m[1] > m[0] {
				out = append(out, utf8.RuneCount(buf[m[0]:m[1]]))
			}
			pos = m[1]
		}
		if pos < len(buf) {
			out = append(out, utf8.RuneCount(buf[pos:]))
		}
		start += n
	}
	return out
}

// customStage is one of the hand-coded splitters.
type customStage struct {
	llama3    bool // llama3/qwen2 rules rather than gpt-2's
	maxDigits int  // longest digit run in one piece (llama3 3, qwen2 1)
}

const outOfRange = -1

// customSplit is what the hand-coded splitters share: it walks the piece
// cpts[ini:end] and collects the lengths of the words cut from it.
type customSplit struct {
	cpts     []rune
	ini, end int
	prev     int   // where the last word ended
	out      []int // word lengths
}

// get is the code point at p, or outOfRange outside the piece.
func (s *customSplit) get(p int) rune {
	if p >= s.ini && p < s.end {
		return s.cpts[p]
	}
	return outOfRange
}

// flags is cptFlags of the code point at p, or 0 outside the piece.
func (s *customSplit) flags(p int) uint8 {
	if p >= s.ini && p < s.end {
		return cptFlags(s.cpts[p])
	}
	return 0
}

// add ends a word at e, dropping it when empty, and returns its length.
func (s *customSplit) add(e int) int {
	l := e - s.prev
	if l > 0 {
		s.out = append(s.out, l)
	}
	s.prev = e
	return l
}

// contraction is the length of the match of 's|'t|'re|'ve|'m|'ll|'d at
// pos, case-insensitive when fold is set, or 0 when there is none.
func (s *customSplit) contraction(pos int, fold bool) int {
	if s.get(pos) != '\'' || pos+1 >= s.end {
		return 0
	}
	next := s.get(pos + 1)
	if fold {
		next = unicode.ToLower(next)
	}
	if next == 's' || next == 't' || next == 'm' || next == 'd' {
		return 2
	}
	if pos+2 < s.end {
		nn := s.get(pos + 2)
		if fold {
			nn = unicode.ToLower(nn)
		}
		if (next == 'r' && nn == 'e') || (next == 'v' && nn == 'e') || (next == 'l' && nn == 'l') {
			return 3
		}
	}
	return 0
}

// spaces ends a step of a splitter at pos, where nws white spaces start and
// no other alternative matched: \s+(?!\S), which leaves the last of several
// white spaces for the next word unless the piece ends with them; else
// \s+; else the single code point at pos. It returns the new position.
func (s *customSplit) spaces(pos, nws int) int {
	switch {
	case nws > 1 && s.get(pos+nws) != outOfRange:
		pos += nws - 1
	case nws > 0:
		pos += nws
	default:
		pos++
	}
	s.add(pos)
	return pos
}

// symbols ends a step of a splitter at ' ?[^\s\p{L}\p{N}]+' followed by a
// run of the code points of trail (llama3's [\r\n]*, o200k's [\r\n/]*),
// whose match at pos the caller has checked. It returns the new position.
func (s *customSplit) symbols(pos int, trail string) int {
	const wln = flagSpace | flagLetter | flagNumber
	if s.get(pos) == ' ' {
		pos++
	}
	for f := s.flags(pos); f&wln == 0 && f != 0; f = s.flags(pos) {
		pos++
	}
	for strings.ContainsRune(trail, s.get(pos)) { // never outOfRange
		pos++
	}
	s.add(pos)
	return pos
}

// lineBreaksOrSpaces ends a step of a splitter at pos where no other
// alternative matched: \s*[\r\n]+ (the white spaces at pos up to the last
// line break among them) when there is one, else as spaces does. It
// returns the new position.
func (s *customSplit) lineBreaksOrSpaces(pos int) int {
	nws, lastRN := 0, 0
	for s.flags(pos+nws)&flagSpace != 0 {
		if c := s.get(pos + nws); c == '\r' || c == '\n' {
			lastRN = pos + nws + 1
		}
		nws++
	}
	if lastRN > 0 {
		s.add(lastRN)
		return lastRN
	}
	return s.spaces(pos, nws)
}

func (s *customStage) split(in *splitInput, pieces []int) []int {
	out := make([]int, 0, len(pieces))
	cpts := in.cpts
	start := 0
	for _, n := range pieces {
		ini, end := start, start+n
		start = end
		if s.llama3 {
			out = splitLlama3(cpts, ini, end, s.maxDigits, out)
		} else {
			out = splitGPT2(cpts, ini, end, out)
		}
	}
	return out
}

// splitGPT2 splits cpts[ini:end] like the regex
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
// (llama.cpp's unicode_regex_split_custom_gpt2), appending piece lengths.
func splitGPT2(cpts []rune, ini, end int, out []int) []int {
	sp := customSplit{cpts: cpts, ini: ini, end: end, prev: ini, out: out}
	const wln = flagSpace | flagLetter | flagNumber
	for pos := ini; pos < end; {
		c, f := sp.get(pos), sp.flags(pos)
		// 's|'t|'re|'ve|'m|'ll|'d
		if n := sp.contraction(pos, false); n > 0 {
			pos += sp.add(pos + n)
			continue
		}
		f2 := f
		if c == ' ' {
			f2 = sp.flags(pos + 1)
		}
		// ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+'
		var class uint8
		switch {
		case f2&flagLetter != 0:
			class = flagLetter
		case f2&flagNumber != 0:
			class = flagNumber
		case f2&wln == 0 && f2 != 0:
			class = 0
		default:
			class = 0xFF
		}
		if class != 0xFF {
			if c == ' ' {
				pos++
			}
			for {
				g := sp.flags(pos)
				if class == 0 {
					if g&wln != 0 || g == 0 {
						break
					}
				} else if g&class == 0 {
					break
				}
				pos++
			}
			sp.add(pos)
			continue
		}
		nws := 0
		for sp.flags(pos+nws)&flagSpace != 0 {
			nws++
		}
		pos = sp.spaces(pos, nws)
	}
	return sp.out
}

// splitLlama3 splits cpts[ini:end] like the llama3 regex (or qwen2's when
// maxDigits is 1):
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
// ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// (llama.cpp's unicode_regex_split_custom_llama3).
func splitLlama3(cpts []rune, ini, end, maxDigits int, out []int) []int {
	sp := customSplit{cpts: cpts, ini: ini, end: end, prev: ini, out: out}
	const wln = flagSpace | flagLetter | flagNumber
	for pos := ini; pos < end; {
		c, f := sp.get(pos), sp.flags(pos)
		// (?i:'s|'t|'re|'ve|'m|'ll|'d)
		if n := sp.contraction(pos, true); n > 0 {
			pos += sp.add(pos + n)
			continue
		}
		// [^\r\n\p{L}\p{N}]?\p{L}+
		if !(c == '\r' || c == '\n' || f&flagNumber != 0) {
			if f&flagLetter != 0 || sp.flags(pos+1)&flagLetter != 0 {
				pos++
				for sp.flags(pos)&flagLetter != 0 {
					pos++
				}
				sp.add(pos)
				continue
			}
		}
		// \p{N}{1,3}
		if f&flagNumber != 0 {
			run := pos
			for sp.flags(pos)&flagNumber != 0 {
				pos++
				if pos-run >= maxDigits {
					sp.add(pos)
					run = pos
				}
			}
			sp.add(pos)
			continue
		}
		// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
		f2 := f
		if c == ' ' {
			f2 = sp.flags(pos + 1)
		}
		if f2&wln == 0 && f != 0 {
			pos = sp.symbols(pos, "\r\n")
			continue
		}
		pos = sp.lineBreaksOrSpaces(pos)
	}
	return sp.out
}

// Class bodies that llama.cpp substitutes for \p{…} in collapsed regexes:
// the stand-in for non-ASCII members plus the ASCII members.
var collapsedClass = map[byte]string{
	'N': `\x{F0D1}0-9`,
	'L': `\x{F0D2}A-Za-z`,
	'P': `\x{F0D3}!-#%-*,-/:-;?-@\[-\]_\{\}`,
	'M': `\x{F0D4}`,
	'S': `\x{F0D5}\$\+<-\x{3E}\^` + "`" + `\|`,
}

// spaceClass is what \s matches in std::regex under the C locale.
const spaceClass = `\t\n\v\f\r `

// translateRegex rewrites one llama.cpp pre-tokenizer regex for Go's regexp:
// \p{N}, \p{L}, \p{P}, \p{M}, \p{S} become classes over the collapsed view
// (collapsed reports that the regex must run on it), and \s, \S get
// std::regex's meaning. Constructs Go lacks (lookaround) are an error.
func translateRegex(expr string) (goExpr string, collapsed bool, err error) {
	for _, c := range "NLPMS" {
		if strings.Contains(expr, `\p{`+string(c)+`}`) {
			collapsed = true
		}
	}
	if collapsed {
		for _, r := range expr {
			if r >= 128 {
				return "", false, fmt.Errorf("translate regex %q: unicode classes mixed with non-ASCII characters", expr)
			}
		}
	}
	if strings.Contains(expr, "(?=") || strings.Contains(expr, "(?!") || strings.Contains(expr, "(?<") {
		return "", false, fmt.Errorf("translate regex %q: lookaround is not supported", expr)
	}
	var b strings.Builder
	inside := false
	for i := 0; i < len(expr); i++ {
		c := expr[i]
		switch {
		case c == '[' && !inside:
			inside = true
			b.WriteByte(c)
		case c == ']' && inside:
			inside = false
			b.WriteByte(c)
		case c == '\\' && i+1 < len(expr):
			e := expr[i+1]
			switch {
			case e == 'p' && i+4 < len(expr) && expr[i+2] == '{' && expr[i+4] == '}' && collapsedClass[expr[i+3]] != "":
				body := collapsedClass[expr[i+3]]
				if inside {
					b.WriteString(body)
				} else {
					b.WriteString("[" + body + "]")
				}
				i += 4
				continue
			case e == 'p' || e == 'P':
				return "", false, fmt.Errorf("translate regex %q: unsupported unicode class at offset %d", expr, i)
			case e == 's':
				if inside {
					b.WriteString(spaceClass)
				} else {
					b.WriteString("[" + spaceClass + "]")
				}
			case e == 'S':
				if inside {
					return "", false, fmt.Errorf("translate regex %q: \\S inside a class is not supported", expr)
				}
				b.WriteString("[^" + spaceClass + "]")
			case strings.IndexByte("dDwWbB", e) >= 0:
				return "", false, fmt.Errorf("translate regex %q: \\%c is not supported", expr, e)
			default:
				b.WriteByte(c)
				b.WriteByte(e)
			}
			i++
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), collapsed, nil
}

// preTokenizer is a compiled list of split stages.
type preTokenizer struct {
	stages []splitStage
}

func newPreTokenizer(regexes []string) (*preTokenizer, error) {
	p := &preTokenizer{}
	for _, expr := range regexes {
		switch expr {
		case reGPT2:
			p.stages = append(p.stages, &customStage{})
		case reLlama3:
			p.stages = append(p.stages, &customStage{llama3: true, maxDigits: 3})
		case reQwen2:
			p.stages = append(p.stages, &customStage{llama3: true, maxDigits: 1})
		case reO200k:
			p.stages = append(p.stages, o200kStage{})
		default:
			goExpr, collapsed, err := translateRegex(expr)
			if err != nil {
				return nil, err
			}
			re, err := regexp.Compile(goExpr)
			if err != nil {
				return nil, fmt.Errorf("compile regex %q: %w", expr, err)
			}
			p.stages = append(p.stages, &regexStage{re: re, collapsed: collapsed})
		}
	}
	return p, nil
}

// split cuts text into words, each returned as UTF-8 re-encoded from the
// decoded code points (invalid input bytes have become U+FFFD).
func (p *preTokenizer) split(text string) []string {
	in := &splitInput{cpts: decodeCpts(text, make([]rune, 0, len(text)))}
	pieces := []int{len(in.cpts)}
	for _, s := range p.stages {
		pieces = s.split(in, pieces)
	}
	words := make([]string, 0, len(pieces))
	var buf []byte
	start := 0
	for _, n := range pieces {
		if n == 0 {
			continue
		}
		buf = buf[:0]
		for _, r := range in.cpts[start : start+n] {
			buf = appendCpt(buf, r)
		}
		words = append(words, string(buf))
		start += n
	}
	return words
}
