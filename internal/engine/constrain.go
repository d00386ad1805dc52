package engine

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"tandem/internal/engine/grammar"
	"tandem/internal/engine/sample"
)

// MaxLogitBias bounds the magnitude of a Request.LogitBias value (OpenAI's
// logit_bias range is [-100, 100]).
const MaxLogitBias = 100

// ErrConstraint is wrapped by the error that ends a constrained sequence
// when the grammar rejects a token it was handed (the first token of a
// resumed sequence computed elsewhere) or allows none at all.
var ErrConstraint = errors.New("engine: constrained decoding failed")

// grammarVocab is the model's vocabulary indexed for the grammar package,
// built on the first constrained request and shared by all of them.
type grammarVocab struct {
	once    sync.Once
	v       *grammar.Vocab
	err     error
	eogOnce sync.Once
	eog     []int32 // the tokenizer's end-of-generation ids
}

// grammarVocab returns the engine's grammar vocabulary, building it once.
func (e *Engine) grammarVocab() (*grammar.Vocab, error) {
	g := &e.gv
	g.once.Do(func() {
		g.v, g.err = grammar.FromTokenizer(e.r.Model().Tokenizer)
		if g.err != nil {
			g.err = fmt.Errorf("engine: this model's vocabulary cannot be used for constrained decoding: %w", g.err)
		}
	})
	return g.v, g.err
}

// eogTokens returns the tokenizer's end-of-generation ids, computed once.
func (e *Engine) eogTokens() []int32 {
	e.gv.eogOnce.Do(func() {
		tok := e.r.Model().Tokenizer
		for i := range int32(tok.VocabSize()) {
			if tok.IsEOG(i) {
				e.gv.eog = append(e.gv.eog, i)
			}
		}
	})
	return e.gv.eog
}

// constraint is one sequence's sampling constraints: its grammar matcher,
// its logit bias and its min-tokens ban. A sequence without any has none
// (seq.con == nil) and pays nothing for them.
type constraint struct {
	m    *grammar.Matcher // nil: no grammar
	mask grammar.Bitset   // scratch for the grammar's mask
	bias []sample.TokenBias
	// ban lists the tokens masked while fewer than minTokens tokens have
	// been generated (end-of-generation and stop tokens).
	ban       []int32
	minTokens int
	open      grammar.Bitset // every logit row token except ban: the mask under min_tokens without a grammar
	was       []int32        // scratch: banned tokens the grammar allowed
}

// checkConstraint validates the constraint fields of req.
func (e *Engine) checkConstraint(req *Request) error {
	vocab := e.r.Model().Config.Vocab
	switch {
	case req.MinTokens < 0:
		return fmt.Errorf("%w: min tokens must be at least 0, got %d", ErrBadRequest, req.MinTokens)
	case req.MinTokens > req.MaxTokens:
		return fmt.Errorf("%w: min tokens (%d) must not exceed max tokens (%d)", ErrBadRequest, req.MinTokens, req.MaxTokens)
	}
	for id, b := range req.LogitBias {
		if id < 0 || int(id) >= vocab {
			return fmt.Errorf("%w: logit bias token id %d is out of range 0..%d", ErrBadRequest, id, vocab-1)
		}
		if math.IsNaN(float64(b)) || b < -MaxLogitBias || b > MaxLogitBias {
			return fmt.Errorf("%w: logit bias for token %d must be in [-%d, %d], got %v", ErrBadRequest, id, MaxLogitBias, MaxLogitBias, b)
		}
	}
	return nil
}

// newConstraint returns req's constraint state, or nil when req has none.
func (e *Engine) newConstraint(req *Request) (*constraint, error) {
	if req.Grammar == nil && len(req.LogitBias) == 0 && req.MinTokens == 0 {
		return nil, nil
	}
	c := &constraint{minTokens: req.MinTokens}
	if req.Grammar != nil {
		v, err := e.grammarVocab()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
		}
		c.m = grammar.NewMatcher(req.Grammar, v)
		c.mask = grammar.NewBitset(v.Size())
	}
	for id, b := range req.LogitBias {
		if b != 0 {
			c.bias = append(c.bias, sample.TokenBias{ID: id, Bias: b})
		}
	}
	// Sorted, so that the draw does not depend on map order.
	slices.SortFunc(c.bias, func(a, b sample.TokenBias) int { return int(a.ID - b.ID) })
	if req.MinTokens > 0 {
		if !req.IgnoreEOS {
			c.ban = append(c.ban, e.eogTokens()...)
		}
		c.ban = append(c.ban, req.StopTokens...)
		if c.m == nil {
			n := e.r.Model().Config.Vocab
			c.open = grammar.NewBitset(n)
			for i := range c.open {
				c.open[i] = math.MaxUint64
			}
			if r := n % 64; r != 0 {
				c.open[len(c.open)-1] = 1<<r - 1
			}
			for _, t := range c.ban {
				clearBit(c.open, t)
			}
		}
	}
	return c, nil
}

func clearBit(b grammar.Bitset, t int32) {
	if t >= 0 && int(t)/64 < len(b) {
		b[t/64] &^= 1 << (uint(t) % 64)
	}
}

// sample draws s's next token under its constraint.
func (c *constraint) sample(smp *sample.Sampler, logits []float32, s *seq) (int32, float32) {
	con := sample.Constraint{Bias: c.bias}
	banning := len(s.tokens)-s.nPrompt < c.minTokens && len(c.ban) > 0
	switch {
	case c.m != nil:
		c.m.Mask(c.mask)
		if banning {
			c.was = c.was[:0]
			for _, t := range c.ban {
				if c.mask.Has(int(t)) {
					c.was = append(c.was, t)
					clearBit(c.mask, t)
				}
			}
			if !anySet(c.mask) {
				// Only an end is possible: the grammar's end wins over
				// min_tokens (the document is complete).
				for _, t := range c.was {
					c.mask.Set(int(t))
				}
			}
		}
		con.Allow = c.mask
	case banning:
		con.Allow = c.open
	}
	return smp.SampleConstrained(logits, s.tokens, con)
}

func anySet(b grammar.Bitset) bool {
	for _, w := range b {
		if w != 0 {
			return true
		}
	}
	return false
}

// advance feeds an accepted token to the grammar. It returns an error when
// the grammar rejects it, and whether the document is finished.
func (c *constraint) advance(id int32) (done bool, err error) {
	if c == nil || c.m == nil {
		return false, nil
	}
	if err := c.m.Accept(id); err != nil {
		return false, fmt.Errorf("%w: the grammar rejects token %d: %w", ErrConstraint, id, err)
	}
	return c.m.Done(), nil
}
