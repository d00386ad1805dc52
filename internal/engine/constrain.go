package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

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

// ErrGrammarTooCostly is wrapped by the error of a request whose grammar
// costs too much to enforce: refused at Submit (with ErrBadRequest) when
// its first masks need more work than Config.GrammarCost allows, or ending
// a sequence (FinishGrammarBudget) whose mask ran past Config.MaskBudget
// or whose masks together ran past Config.RequestMaskBudget.
var ErrGrammarTooCostly = errors.New("engine: the grammar is too costly to enforce")

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
	mask grammar.Bitset   // the grammar's mask (see maskpool.go for who owns it when)
	bias []sample.TokenBias
	// ban lists the tokens masked while fewer than minTokens tokens have
	// been generated (end-of-generation and stop tokens).
	ban       []int32
	minTokens int
	open      grammar.Bitset // every logit row token except ban: the mask under min_tokens without a grammar
	was       []int32        // scratch: banned tokens the grammar allowed

	// The mask job (maskpool.go).
	id        string       // the request's ID, for logs and test hooks
	job       atomic.Int32 // maskIdle ... maskFailed
	started   atomic.Int64 // when the worker began the job (UnixNano)
	left      time.Duration
	byRequest bool // left is what RequestMaskBudget leaves, less than MaskBudget
	took      time.Duration
	err       error
	// Loop-owned: the mask time spent so far, and the logits of a step
	// whose mask was late (held while holding).
	spent   time.Duration
	held    []float32
	holding bool
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
// A grammar is first checked for the cost of its masks (checkGrammarCost).
func (e *Engine) newConstraint(ctx context.Context, req *Request) (*constraint, error) {
	if req.Grammar == nil && len(req.LogitBias) == 0 && req.MinTokens == 0 {
		return nil, nil
	}
	c := &constraint{minTokens: req.MinTokens, id: req.ID}
	if req.Grammar != nil {
		v, err := e.grammarVocab()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
		}
		if err := e.checkGrammarCost(ctx, req.Grammar, v); err != nil {
			return nil, err
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

// checkGrammarCost refuses a grammar whose first masks on this model's
// vocabulary need more work than Config.GrammarCost allows
// (grammar.CheckCost: counted work, so the answer does not depend on the
// load; cached per grammar, so only a grammar's first request pays). Its
// probes run on the caller's goroutine, at most MaskWorkers at once.
func (e *Engine) checkGrammarCost(ctx context.Context, g *grammar.Grammar, v *grammar.Vocab) error {
	select {
	case e.probes <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	err := g.CheckCost(v, e.cfg.GrammarCost)
	<-e.probes
	if err == nil {
		return nil
	}
	e.mu.Lock()
	e.stats.GrammarRefused++
	e.mu.Unlock()
	return fmt.Errorf("%w: %w: %w", ErrBadRequest, ErrGrammarTooCostly, err)
}

// dispatchMask starts the mask of s's next token on the mask workers,
// unless one is already there or ready; a mask the grammar's cache holds
// (grammar.Matcher.MaskCached, a bounded lookup and a copy) is taken at
// once, as the loop took every mask before. Loop only.
func (e *Engine) dispatchMask(s *seq) {
	c := s.con
	if c == nil || c.m == nil || c.job.Load() != maskIdle {
		return
	}
	c.left = min(e.cfg.MaskBudget, e.cfg.RequestMaskBudget-c.spent)
	c.byRequest = c.left < e.cfg.MaskBudget
	if c.left <= 0 {
		c.err = fmt.Errorf("%w: its masks took %v in all (the budget per request is %v)", ErrGrammarTooCostly, c.spent.Round(time.Millisecond), e.cfg.RequestMaskBudget)
		c.job.Store(maskFailed)
		return
	}
	if c.m.MaskCached(c.mask) { // a cached mask costs a copy: no worker
		c.took, c.err = 0, nil
		c.job.Store(maskReady)
		return
	}
	c.started.Store(0)
	c.job.Store(maskQueued)
	e.masks.submit(c)
}

// maskState says whether s may sample now (maskReady), must end
// (maskFailed, err says why), or must wait for its mask (maskQueued or
// maskRunning). A mask that ran past its budget fails, even when the
// worker has not noticed yet (it is interrupted). Loop only.
func (e *Engine) maskState(s *seq, now time.Time) (int32, error) {
	c := s.con
	st := c.job.Load()
	switch st {
	case maskIdle:
		e.dispatchMask(s)
		return c.job.Load(), c.err
	case maskReady:
		if c.took > c.left {
			c.spent += c.took
			return maskFailed, c.budgetErr()
		}
		return maskReady, nil
	case maskFailed:
		if errors.Is(c.err, grammar.ErrMaskBudget) {
			c.spent += c.took
			return maskFailed, c.budgetErr()
		}
		return maskFailed, c.err
	case maskRunning:
		if at := c.started.Load(); at != 0 && now.Sub(time.Unix(0, at)) > c.left+maskGrace {
			c.m.Interrupt()
			c.spent += now.Sub(time.Unix(0, at))
			return maskFailed, c.budgetErr()
		}
	}
	return st, nil
}

// budgetErr is the error of a sequence whose last mask (c.took, already
// in c.spent) ran past what it had left.
func (c *constraint) budgetErr() error {
	if c.byRequest {
		return fmt.Errorf("%w: its token masks took %v in all, past the budget of the request", ErrGrammarTooCostly, c.spent.Round(time.Millisecond))
	}
	return fmt.Errorf("%w: one token mask took longer than %v", ErrGrammarTooCostly, c.left)
}

// maskDone marks the mask used: the next one is for the next token.
func (c *constraint) maskDone() {
	c.spent += c.took
	c.took, c.err = 0, nil
	c.job.Store(maskIdle)
}
