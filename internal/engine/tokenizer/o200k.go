package tokenizer

import "unicode"

// The o200k pre-tokenizer (tokenizer.ggml.pre "gpt-4o", "llama4"): gpt-4o's
// and gpt-oss's split regex, reO200k,
//
//	[^\r\n\p{L}\p{N}]?[UPPER]*[LOWER]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|[^\r\n\p{L}\p{N}]?[UPPER]+[LOWER]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// with UPPER = \p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M} and LOWER =
// \p{Ll}\p{Lm}\p{Lo}\p{M}, hand-coded because Go's regexp has no
// lookahead. It follows the regex as the tokenizer.json states it (what
// Hugging Face's tokenizers and tiktoken run). llama.cpp runs a rewrite of
// it through std::regex whose letter classes leave combining marks out; the
// two agree on Latin, Greek, Cyrillic, CJK, Hangul, digits, emoji and
// harmony's markers (recorded in internal/synth's
// TestHFVocabMatchesLlamaCpp) and differ on words with combining marks in
// scripts such as Devanagari and Thai, which llama.cpp cuts at the marks.

// o200kStage is the o200k splitter as a split stage.
type o200kStage struct{}

func (o200kStage) split(in *splitInput, pieces []int) []int {
	out := make([]int, 0, len(pieces))
	start := 0
	for _, n := range pieces {
		out = splitO200k(in.cpts, start, start+n, out)
		start += n
	}
	return out
}

// isO200kUpper and isO200kLower are the UPPER and LOWER classes.
func isO200kUpper(r rune) bool {
	if r < 128 {
		return 'A' <= r && r <= 'Z'
	}
	return unicode.In(r, unicode.Lu, unicode.Lt, unicode.Lm, unicode.Lo, unicode.M)
}

func isO200kLower(r rune) bool {
	if r < 128 {
		return 'a' <= r && r <= 'z'
	}
	return unicode.In(r, unicode.Ll, unicode.Lm, unicode.Lo, unicode.M)
}

// splitO200k splits cpts[ini:end] like reO200k, appending piece lengths.
func splitO200k(cpts []rune, ini, end int, out []int) []int {
	sp := customSplit{cpts: cpts, ini: ini, end: end, prev: ini, out: out}
	const wln = flagSpace | flagLetter | flagNumber
	// run is the length of the run of class members at p.
	run := func(p int, member func(rune) bool) int {
		n := 0
		for p+n < end && member(cpts[p+n]) {
			n++
		}
		return n
	}
	// word matches [UPPER]*[LOWER]+ (upperFirst false) or
	// [UPPER]+[LOWER]* (upperFirst true) at p, then the optional
	// contraction, and returns the match's end or -1. The star and plus
	// are greedy with backtracking: [UPPER]* gives back code points until
	// [LOWER]+ can start.
	word := func(p int, upperFirst bool) int {
		nu := run(p, isO200kUpper)
		e := -1
		if upperFirst {
			if nu == 0 {
				return -1
			}
			e = p + nu + run(p+nu, isO200kLower)
		} else {
			for k := nu; k >= 0; k-- {
				if nl := run(p+k, isO200kLower); nl > 0 {
					e = p + k + nl
					break
				}
			}
			if e < 0 {
				return -1
			}
		}
		return e + sp.contraction(e, true)
	}
	for pos := ini; pos < end; {
		c, f := sp.get(pos), sp.flags(pos)
		// The two word alternatives, each with then without the prefix
		// [^\r\n\p{L}\p{N}]?.
		prefix := c != '\r' && c != '\n' && f&(flagLetter|flagNumber) == 0
		e := -1
		for _, upperFirst := range []bool{false, true} {
			if prefix {
				if e = word(pos+1, upperFirst); e >= 0 {
					break
				}
			}
			if e = word(pos, upperFirst); e >= 0 {
				break
			}
		}
		if e >= 0 {
			pos = e
			sp.add(pos)
			continue
		}
		// \p{N}{1,3}
		if f&flagNumber != 0 {
			n := 1
			for n < 3 && sp.flags(pos+n)&flagNumber != 0 {
				n++
			}
			pos += n
			sp.add(pos)
			continue
		}
		// ' ?[^\s\p{L}\p{N}]+[\r\n/]*'
		f2 := f
		if c == ' ' {
			f2 = sp.flags(pos + 1)
		}
		if f2&wln == 0 && f2 != 0 {
			pos = sp.symbols(pos, "\r\n/")
			continue
		}
		pos = sp.lineBreaksOrSpaces(pos)
	}
	return sp.out
}
