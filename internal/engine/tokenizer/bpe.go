package tokenizer

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// byteToUnicode is GPT-2's bytes_to_unicode table: printable Latin-1 bytes
// stand for themselves, the other 68 bytes map to U+0100 onwards in order.
// unicodeToByte is its inverse.
var byteToUnicode, unicodeToByte = func() (enc [256]string, dec map[rune]byte) {
	dec = make(map[rune]byte, 256)
	next := rune(256)
	for b := 0; b < 256; b++ {
		r := rune(b)
		if !((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) {
			r = next
			next++
		}
		enc[b] = string(r)
		dec[r] = byte(b)
	}
	return enc, dec
}()

// bpeDecodeText undoes the byte mapping of a BPE token text (llama.cpp's
// llama_decode_text), including its odd marker for characters outside the
// mapping.
func bpeDecodeText(text string) string {
	b := make([]byte, 0, len(text))
	var cpts []rune
	if utf8.ValidString(text) {
		cpts = []rune(text)
	} else {
		cpts = decodeCpts(text, nil)
	}
	for _, r := range cpts {
		if c, ok := unicodeToByte[r]; ok {
			b = append(b, c)
			continue
		}
		b = append(b, "[UNK_BYTE_0x"...)
		for _, c := range appendCpt(nil, r) {
			b = append(b, fmt.Sprintf("%02x", c)...)
		}
		b = append(b, text...)
		b = append(b, ']')
	}
	return string(b)
}

// encodeBPE tokenizes one text fragment (llama.cpp's
// llm_tokenizer_bpe_session): pre-tokenize into words, map each word's
// bytes through the GPT-2 table, merge adjacent symbols by lowest merge
// rank (leftmost on ties), and emit each symbol's id. A symbol that is not a
// token falls back to tokens for its single raw bytes where those exist.
// The gemma4 (SentencePiece-style) variant skips the byte mapping, keeps a
// word of newlines whole when it is a token, and falls back to "<0xXX>"
// byte tokens.
func (t *Tokenizer) encodeBPE(text string, out []int32) []int32 {
	var sb strings.Builder
	var syms []symbol
	var q mergeQueue[int32]
	for _, w := range t.pre.split(text) {
		word := w
		if !t.spmStyle {
			sb.Reset()
			for i := 0; i < len(w); i++ {
				sb.WriteString(byteToUnicode[w[i]])
			}
			word = sb.String()
		}
		if t.ignoreMerges || (t.spmStyle && strings.Trim(word, "\n") == "") {
			// gemma4: a run of newlines that is a token stays whole.
			if id, ok := t.toID[word]; ok {
				out = append(out, id)
				continue
			}
		}
		syms = splitSymbols(word, syms)
		q = q[:0]
		add := func(left, right int32) {
			if left < 0 || right < 0 {
				return
			}
			l, r := syms[left], syms[right]
			rank, ok := t.ranks[mergePair{word[l.start : l.start+l.n], word[r.start : r.start+r.n]}]
			if !ok {
				return
			}
			q.push(bigram[int32]{key: rank, left: left, right: right, size: l.n + r.n})
		}
		for i := int32(1); i < int32(len(syms)); i++ {
			add(i-1, i)
		}
		for len(q) > 0 {
			b := q.pop()
			l, r := &syms[b.left], &syms[b.right]
			if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
				continue // stale
			}
			l.n += r.n
			r.n = 0
			l.next = r.next
			if r.next >= 0 {
				syms[r.next].prev = b.left
			}
			add(l.prev, b.left)
			add(b.left, l.next)
		}
		for _, s := range syms {
			if s.n == 0 {
				continue
			}
			piece := word[s.start : s.start+s.n]
			if id, ok := t.toID[piece]; ok {
				out = append(out, id)
				continue
			}
			for j := 0; j < len(piece); j++ {
				if t.spmStyle {
					if id := t.byteTok[piece[j]]; id >= 0 {
						out = append(out, id)
					}
				} else if id, ok := t.toID[piece[j:j+1]]; ok {
					out = append(out, id)
				}
			}
		}
	}
	return out
}
