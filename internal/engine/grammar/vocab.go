package grammar

import (
	"bytes"
	"errors"
	"fmt"
	"math/bits"
	"slices"

	"tandem/internal/engine/tokenizer"
)

// Bitset is a token mask: bit i (word i/64, bit i%64) set means token i is
// allowed. NewBitset sizes one for a vocabulary.
type Bitset []uint64

// NewBitset returns a zeroed bitset for n tokens.
func NewBitset(n int) Bitset { return make(Bitset, (n+63)/64) }

// Has reports whether bit i is set; out-of-range bits are unset.
func (b Bitset) Has(i int) bool {
	if i < 0 || i/64 >= len(b) {
		return false
	}
	return b[i/64]&(1<<(uint(i)%64)) != 0
}

// Set sets bit i.
func (b Bitset) Set(i int) { b[i/64] |= 1 << (uint(i) % 64) }

// Count returns the number of set bits.
func (b Bitset) Count() int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}

func (b Bitset) clear() {
	for i := range b {
		b[i] = 0
	}
}

func (b Bitset) or(o Bitset) {
	for i := range o {
		b[i] |= o[i]
	}
}

// Vocab is the one-time index of a tokenizer's vocabulary: every token's
// bytes in a trie, and the tokens that end a generation. It is immutable
// and safe for concurrent use; build it once per model and share it.
type Vocab struct {
	tokens [][]byte
	isEnd  Bitset
	ends   []int32
	maxLen int

	// trie, node 0 is the root; children of a node are linked through sib
	// in increasing byte order; nodes are in depth-first order.
	nodes []trieNode
	ids   []int32
}

// trieNode is one trie node, packed so that a walk loads one cache line
// per node: its byte, first child, next sibling, and the range of ids
// (tokens whose bytes end here).
type trieNode struct {
	first, sib, tokS, tokE int32
	b                      byte
}

// NewVocab indexes a vocabulary. tokens[i] is the exact byte string token i
// adds to the output (for SentencePiece vocabularies "▁" already turned into
// a space and <0xNN> byte tokens into the byte; for GPT-2 byte-level BPE the
// byte mapping undone); tokens with no bytes (control tokens) are never
// allowed, except those listed in endTokens (at least one), which are
// allowed exactly when the document is complete. Use FromTokenizer for a tokenizer.Tokenizer.
func NewVocab(tokens [][]byte, endTokens []int32) (*Vocab, error) {
	if len(tokens) == 0 {
		return nil, errors.New("grammar: empty vocabulary")
	}
	if len(tokens) > 1<<30 {
		return nil, fmt.Errorf("grammar: vocabulary of %d tokens is too large", len(tokens))
	}
	if len(endTokens) == 0 {
		return nil, errors.New("grammar: no end token: a complete document could not be ended (pass the EOS/EOT ids)")
	}
	v := &Vocab{tokens: tokens, isEnd: NewBitset(len(tokens))}
	for _, e := range endTokens {
		if e < 0 || int(e) >= len(tokens) {
			return nil, fmt.Errorf("grammar: end token %d outside the vocabulary of %d tokens", e, len(tokens))
		}
		if !v.isEnd.Has(int(e)) {
			v.isEnd.Set(int(e))
			v.ends = append(v.ends, e)
		}
	}
	order := make([]int32, 0, len(tokens))
	for i, t := range tokens {
		if len(t) > 0 && !v.isEnd.Has(i) {
			order = append(order, int32(i))
			v.maxLen = max(v.maxLen, len(t))
		}
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := bytes.Compare(tokens[a], tokens[b]); c != 0 {
			return c
		}
		return int(a - b)
	})
	v.buildTrie(order)
	return v, nil
}

// buildTrie builds the trie from token ids sorted by their bytes.
func (v *Vocab) buildTrie(order []int32) {
	v.newNode(0)
	// path[d] is the node at depth d of the current token; last[d] the last
	// child added under path[d].
	path := []int32{0}
	last := []int32{-1}
	var prev []byte
	v.ids = order
	for i, id := range order {
		t := v.tokens[id]
		lcp := 0
		for lcp < len(prev) && lcp < len(t) && prev[lcp] == t[lcp] {
			lcp++
		}
		path, last = path[:lcp+1], last[:lcp+1]
		for d := lcp; d < len(t); d++ {
			n := v.newNode(t[d])
			parent := path[d]
			if last[d] < 0 {
				v.nodes[parent].first = n
			} else {
				v.nodes[last[d]].sib = n
			}
			last[d] = n
			path = append(path, n)
			last = append(last, -1)
		}
		node := path[len(t)]
		if v.nodes[node].tokE == 0 {
			v.nodes[node].tokS = int32(i)
		}
		v.nodes[node].tokE = int32(i + 1)
		prev = t
	}
}

func (v *Vocab) newNode(b byte) int32 {
	v.nodes = append(v.nodes, trieNode{first: -1, sib: -1, b: b})
	return int32(len(v.nodes) - 1)
}

// Size returns the number of tokens.
func (v *Vocab) Size() int { return len(v.tokens) }

// Nodes returns the number of trie nodes (for sizing and benchmarks).
func (v *Vocab) Nodes() int { return len(v.nodes) }

// Token returns the bytes of token id (nil for an invalid id).
func (v *Vocab) Token(id int32) []byte {
	if id < 0 || int(id) >= len(v.tokens) {
		return nil
	}
	return v.tokens[id]
}

// IsEnd reports whether id is one of the end tokens.
func (v *Vocab) IsEnd(id int32) bool { return v.isEnd.Has(int(id)) }

// FromTokenizer indexes a tokenizer's vocabulary: each token's bytes are
// its TokenPiece (the bytes it adds to decoded text), and every token the
// tokenizer treats as end of generation (IsEOG: EOS, EOT, …) is an end
// token.
func FromTokenizer(t *tokenizer.Tokenizer) (*Vocab, error) {
	n := t.VocabSize()
	toks := make([][]byte, n)
	var ends []int32
	for i := 0; i < n; i++ {
		toks[i] = t.TokenPiece(int32(i))
		if t.IsEOG(int32(i)) {
			ends = append(ends, int32(i))
		}
	}
	if len(ends) == 0 {
		return nil, errors.New("grammar: tokenizer has no end-of-generation token; pass one to NewVocab")
	}
	return NewVocab(toks, ends)
}
