package tokenizer

// bigram is a candidate merge of two adjacent symbols, for BPE and SPM
// alike. The queue serves the lowest key first, then the leftmost pair; BPE
// keys by merge rank (int32), SPM by the negated score of the merged token
// (float32), so that the highest score comes first. Negation keeps every
// comparison's outcome, signed zeros and NaN included.
type bigram[K int32 | float32] struct {
	key         K
	left, right int32
	size        int32
}

func (a bigram[K]) before(b bigram[K]) bool {
	if a.key != b.key {
		return a.key < b.key
	}
	return a.left < b.left
}

// mergeQueue is a binary min-heap of bigrams in before order. It is generic
// over the key type rather than over an ordering function so that the
// comparisons compile to direct, inlined code in both instantiations.
type mergeQueue[K int32 | float32] []bigram[K]

func (q *mergeQueue[K]) push(b bigram[K]) {
	*q = append(*q, b)
	h := *q
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h[i].before(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

// pop removes and returns the first bigram; the queue must not be empty.
func (q *mergeQueue[K]) pop() bigram[K] {
	h := *q
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		m := l
		if r := l + 1; r < len(h) && h[r].before(h[l]) {
			m = r
		}
		if !h[m].before(h[i]) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*q = h
	return top
}
