package grammar

import (
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
)

// ErrTooCostly is wrapped by CheckCost's error for a grammar whose token
// masks cost more than the limit.
var ErrTooCostly = errors.New("grammar: the token masks of this grammar are too costly")

// CostLimit bounds the masks CheckCost computes. Work is counted in the
// units of MaskWithin, in multiples of the vocabulary's trie nodes
// (Vocab.Nodes, at least minCostNodes): one such multiple is about one
// walk of the whole trie with one reading, the most an ordinary mask needs
// (a mask inside a JSON string, where almost every token is allowed).
type CostLimit struct {
	Masks      int // masks computed along one generation
	MaskNodes  int // work of each, in trie-node multiples
	TotalNodes int // work of all of them together
}

// DefaultCostLimit is what CheckCost applies for a zero CostLimit: 8
// masks of at most 4 trie walks each, 16 in all. Measured on the 151k
// Qwen 3 vocabulary (333k trie nodes): the masks of ordinary schemas,
// the GBNF JSON grammar, a tool grammar and a 100-property object take
// at most 1.0 walk each; the ambiguous doubling grammar's first mask
// takes 28 and the recursive grammar of the red-team finding 1 (masks of
// 3 to 8 s) 290. The probe itself stays under 16 walks, about 0.2 s of
// one core.
var DefaultCostLimit = CostLimit{Masks: 8, MaskNodes: 4, TotalNodes: 16}

// CheckCost measures the masks of one generation under g over v: from
// the start, each mask computed within lim, then a token drawn from it by
// a fixed pseudo-random sequence, until lim.Masks masks are done or the
// document cannot go on. It returns an error wrapping ErrTooCostly when a
// mask or all of them together need more work than lim allows: a grammar
// whose masks are predictably expensive (an ambiguous one whose readings
// multiply) can be refused before any sequence runs under it. The work is
// counted, not timed, so the answer does not depend on the machine's
// load. The result is cached per (g, v, lim); the masks it computed stay
// in g's caches.
func (g *Grammar) CheckCost(v *Vocab, lim CostLimit) error {
	if lim == (CostLimit{}) {
		lim = DefaultCostLimit
	}
	t := g.tablesFor(v)
	t.costMu.Lock()
	defer t.costMu.Unlock()
	if err, ok := t.costs[lim]; ok {
		return err
	}
	err := probeCost(g, v, lim)
	if t.costs == nil {
		t.costs = map[CostLimit]error{}
	}
	t.costs[lim] = err
	return err
}

// minCostNodes is the least trie size CostLimit counts in: on a small
// vocabulary the fixed part of a mask (rule calls, closures) outweighs the
// trie walk, and an ordinary mask can take several walks of a 500-node
// trie.
const minCostNodes = 1 << 16

func probeCost(g *Grammar, v *Vocab, lim CostLimit) error {
	nodes := int64(max(v.Nodes(), minCostNodes))
	perMask, total := int64(lim.MaskNodes)*nodes, int64(lim.TotalNodes)*nodes
	m := NewMatcher(g, v)
	dst := NewBitset(v.Size())
	rng := rand.New(rand.NewPCG(0x7a6d, 0x3e1f))
	var spent int64
	var ids []int32
	for i := range lim.Masks {
		units, err := m.MaskWithin(dst, Limit{Work: min(perMask, total-spent)})
		spent += units
		if err != nil {
			what := fmt.Sprintf("mask %d of a sample generation needs more than %d units of work (%d walks of the vocabulary's trie, counted as %d nodes)",
				i+1, perMask, lim.MaskNodes, nodes)
			if spent >= total {
				what = fmt.Sprintf("the first %d masks of a sample generation need more than %d units of work (%d walks of the vocabulary's trie, counted as %d nodes)",
					i+1, total, lim.TotalNodes, nodes)
			}
			return fmt.Errorf("%w: %s; an ambiguous grammar (alternatives that read the same text, such as a rule that may or may not end) multiplies its readings: make its alternatives differ earlier", ErrTooCostly, what)
		}
		ids = ids[:0]
		for w, b := range dst {
			for ; b != 0; b &= b - 1 {
				id := int32(w*64 + bits.TrailingZeros64(b))
				if !v.IsEnd(id) {
					ids = append(ids, id)
				}
			}
		}
		if len(ids) == 0 {
			return nil
		}
		if err := m.Accept(ids[rng.IntN(len(ids))]); err != nil {
			return fmt.Errorf("grammar: cost probe: a masked token was rejected: %w", err)
		}
	}
	return nil
}
