package tokenizer

// spmSpace is SentencePiece's visible space, U+2581 "▁".
const spmSpace = "\u2581"

// symbol is a run of input bytes in a doubly linked list of symbols; a
// merged-away symbol has n == 0.
type symbol struct {
	start, n   int32
	prev, next int32
}

// splitSymbols cuts text into one symbol per UTF-8 character, using the
// lead byte's announced length as llama.cpp does (no validation).
func splitSymbols(text string, syms []symbol) []symbol {
	syms = syms[:0]
	for off := 0; off < len(text); {
		l := min(utf8SeqLen(text[off]), len(text)-off)
		i := int32(len(syms))
		next := i + 1
		if off+l == len(text) {
			next = -1
		}
		syms = append(syms, symbol{start: int32(off), n: int32(l), prev: i - 1, next: next})
		off += l
	}
	return syms
}

// encodeSPM tokenizes one fragment whose spaces are already "▁"
// (llama.cpp's llm_tokenizer_spm_session): start from characters, merge the
// adjacent pair whose concatenation is the highest-scoring token (leftmost
// on ties) until no pair is a token, then emit each symbol's id, or byte
// tokens for a character that is not in the vocabulary.
func (t *Tokenizer) encodeSPM(text string, out []int32) []int32 {
	syms := splitSymbols(text, make([]symbol, 0, len(text)))
	if len(syms) == 0 {
		return out
	}
	q := make(mergeQueue[float32], 0, len(syms))
	tryAdd := func(left, right int32) {
		if left < 0 || right < 0 {
			return
		}
		l, r := syms[left], syms[right]
		s := text[l.start : l.start+l.n+r.n]
		id, ok := t.toID[s]
		if !ok {
			return
		}
		var score float32
		if t.v.Scores != nil {
			score = t.v.Scores[id]
		}
		q.push(bigram[float32]{key: -score, left: left, right: right, size: int32(len(s))})
	}
	for i := int32(1); i < int32(len(syms)); i++ {
		tryAdd(i-1, i)
	}
	for len(q) > 0 {
		b := q.pop()
		l, r := &syms[b.left], &syms[b.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
			continue // stale: one side was merged since
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = b.left
		}
		tryAdd(l.prev, b.left)
		tryAdd(b.left, l.next)
	}
	for i := int32(0); i != -1; i = syms[i].next {
		s := syms[i]
		piece := text[s.start : s.start+s.n]
		if id, ok := t.toID[piece]; ok {
			out = append(out, id)
			continue
		}
		// Merged symbols are always tokens, so this is one character
		// missing from the vocabulary: byte fallback.
		for j := 0; j < len(piece); j++ {
			if id := t.byteTok[piece[j]]; id >= 0 {
				out = append(out, id)
			} else if t.v.UNK >= 0 {
				out = append(out, t.v.UNK)
			}
		}
	}
	return out
}
