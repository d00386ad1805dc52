package grammar

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// DefaultMaxDepth is the default bound on automaton stack frames (about
// three per level of JSON nesting).
const DefaultMaxDepth = 384

// MaxStacks bounds the parallel stacks a matcher follows (an ambiguous
// grammar, such as anyOf branches that agree on a long prefix, keeps one
// per live reading; equal stacks are one). Accept refuses a token after
// whose bytes more stacks would be live, and Mask leaves it out. The bound
// also bounds the time of a mask: about (live trie nodes) x MaxStacks
// configurations in the worst case.
const MaxStacks = 128

// Errors returned (wrapped) by Matcher methods; test with errors.Is.
var (
	// ErrRejected: the token or bytes cannot continue the document.
	ErrRejected = errors.New("grammar: rejected")
	// ErrEnded: an end token was accepted already; nothing may follow.
	ErrEnded = errors.New("grammar: document already ended")
	// ErrMaskBudget: MaskWithin stopped at its Limit (or after Interrupt)
	// before the mask was complete.
	ErrMaskBudget = errors.New("grammar: the token mask is over its budget")
)

// Matcher follows one generated sequence through a grammar. It is not safe
// for concurrent use (one per sequence); matchers of the same grammar and
// vocabulary share their mask caches, which are safe for concurrent use.
type Matcher struct {
	t      *tables
	w      *walker
	stacks [][]int32
	ended  bool
	hist   []snapshot
	intr   atomic.Bool // set by Interrupt
}

type snapshot struct {
	stacks [][]int32
	ended  bool
}

// NewMatcher returns a matcher at the start of a document. The first call
// for a (grammar, vocabulary) pair creates their shared caches.
func NewMatcher(g *Grammar, v *Vocab) *Matcher {
	m := &Matcher{t: g.tablesFor(v), w: newWalker(g)}
	m.Reset()
	return m
}

// Reset puts the matcher back at the start of a document and forgets its
// history.
func (m *Matcher) Reset() {
	m.stacks = [][]int32{{m.t.g.canon[m.t.g.ruleStart[m.t.g.root]]}}
	m.ended = false
	m.hist = m.hist[:0]
}

// Clone returns an independent copy of the matcher, history included.
func (m *Matcher) Clone() *Matcher {
	c := &Matcher{t: m.t, w: newWalker(m.t.g), stacks: m.stacks, ended: m.ended}
	c.hist = append([]snapshot(nil), m.hist...)
	c.intr.Store(m.intr.Load())
	return c
}

// Vocab returns the vocabulary the matcher masks.
func (m *Matcher) Vocab() *Vocab { return m.t.v }

// Accept advances over one token. An end token is accepted exactly when the
// document is complete (CanEnd); afterwards nothing more is. On error the
// matcher is unchanged.
func (m *Matcher) Accept(token int32) error {
	v := m.t.v
	if m.ended {
		return fmt.Errorf("accept token %d: %w", token, ErrEnded)
	}
	if token < 0 || int(token) >= v.Size() {
		return fmt.Errorf("accept token %d: outside the vocabulary of %d tokens: %w", token, v.Size(), ErrRejected)
	}
	if v.IsEnd(token) {
		if !m.CanEnd() {
			return fmt.Errorf("accept end token %d: the document is not complete: %w", token, ErrRejected)
		}
		m.push()
		m.ended = true
		return nil
	}
	b := v.tokens[token]
	if len(b) == 0 {
		return fmt.Errorf("accept token %d: it has no text: %w", token, ErrRejected)
	}
	if err := m.advance(b); err != nil {
		return fmt.Errorf("accept token %d %q: %w", token, b, err)
	}
	return nil
}

// AcceptBytes advances over raw bytes, as one step of history. On error the
// matcher is unchanged.
func (m *Matcher) AcceptBytes(b []byte) error {
	if m.ended {
		return fmt.Errorf("accept bytes: %w", ErrEnded)
	}
	return m.advance(b)
}

func (m *Matcher) advance(b []byte) error {
	m.w.limit(0, time.Time{}, nil)
	st := m.stacks
	for i := 0; i < len(b); i++ {
		st = m.w.stepStacks(st, b[i])
		if len(st) == 0 {
			return fmt.Errorf("byte %d (%q): %w", i, b[i], ErrRejected)
		}
		if len(st) > MaxStacks {
			return fmt.Errorf("byte %d: more than %d parallel readings (MaxStacks): the grammar is too ambiguous; make its alternatives differ earlier: %w", i, MaxStacks, ErrRejected)
		}
	}
	m.push()
	m.stacks = st
	return nil
}

func (m *Matcher) push() {
	m.hist = append(m.hist, snapshot{m.stacks, m.ended})
}

// Rollback undoes the last n successful Accept or AcceptBytes calls.
func (m *Matcher) Rollback(n int) error {
	if n < 0 || n > len(m.hist) {
		return fmt.Errorf("grammar: rollback %d steps: only %d in the history", n, len(m.hist))
	}
	if n == 0 {
		return nil
	}
	s := m.hist[len(m.hist)-n]
	m.hist = m.hist[:len(m.hist)-n]
	m.stacks, m.ended = s.stacks, s.ended
	return nil
}

// Steps returns how many steps Rollback can undo.
func (m *Matcher) Steps() int { return len(m.hist) }

// CanEnd reports whether the bytes so far form a complete document, so that
// an end token is allowed.
func (m *Matcher) CanEnd() bool {
	m.w.limit(0, time.Time{}, nil)
	return !m.ended && m.w.canEnd(m.stacks, nil)
}

// Ended reports whether an end token was accepted.
func (m *Matcher) Ended() bool { return m.ended }

// Done reports whether generation must stop: an end token was accepted, or
// the document is complete and no byte may follow.
func (m *Matcher) Done() bool {
	return m.ended || (m.CanEnd() && !m.w.canContinue(m.stacks))
}

// Limit bounds one MaskWithin call. A zero field sets no bound.
type Limit struct {
	// Deadline is when the mask gives up (checked every few hundred
	// units of work: the overshoot is well under a millisecond).
	Deadline time.Time
	// Work bounds the units of work: one per vocabulary trie node walked
	// and per grammar rule call expanded. It is deterministic, where the
	// deadline depends on the machine and its load.
	Work int64
}

// Mask writes into dst (at least NewBitset(vocab.Size()) long) the tokens
// allowed next: those whose bytes continue the document, plus the end
// tokens when it is complete. After an end token nothing is allowed. The
// result for a matcher state is cached and shared with other matchers.
// Mask has no bound on its time: see MaskWithin.
func (m *Matcher) Mask(dst Bitset) {
	m.mask(dst, 0, time.Time{}, nil)
}

// MaskWithin is Mask within lim, and it stops after Interrupt. It returns
// the units of work it took (0 for a cached mask) and, when it stopped
// before the end, an error wrapping ErrMaskBudget: dst is then cleared
// and nothing it computed is cached; the matcher is unchanged and may be
// masked again.
func (m *Matcher) MaskWithin(dst Bitset, lim Limit) (work int64, err error) {
	if err := m.mask(dst, lim.Work, lim.Deadline, &m.intr); err != nil {
		return m.w.units, err
	}
	return m.w.units, nil
}

// Limits of MaskCached: the states whose lookup is cheap enough to try
// anywhere (a key of at most cachedMaxFrames frames per key depth).
const (
	cachedMaxStacks = 4
	cachedMaxFrames = 256
)

// MaskCached writes the mask into dst and reports true when the whole-mask
// cache holds it for the matcher's state (or the document has ended); it
// never computes a mask, and it does not look when the state has more than
// 4 stacks or 256 frames, so its cost is a few key lookups and one copy. A
// caller that computes masks on other goroutines (the engine's mask
// workers) uses it to take the cached ones at once.
func (m *Matcher) MaskCached(dst Bitset) bool {
	dst = dst[:(m.t.v.Size()+63)/64]
	if m.ended {
		dst.clear()
		return true
	}
	if len(m.stacks) > cachedMaxStacks {
		return false
	}
	n := 0
	for _, st := range m.stacks {
		n += len(st)
	}
	if n > cachedMaxFrames {
		return false
	}
	c := m.t.lookup(m.stacks, m.w, false)
	if c == nil {
		return false
	}
	copy(dst, c)
	return true
}

// Interrupt makes a MaskWithin running on another goroutine stop within a
// few hundred units of work, and every later MaskWithin of this matcher
// fail at once, both with ErrMaskBudget. It is the one Matcher method that
// is safe to call concurrently with the others.
func (m *Matcher) Interrupt() { m.intr.Store(true) }

func (m *Matcher) mask(dst Bitset, unitMax int64, deadline time.Time, intr *atomic.Bool) error {
	dst = dst[:(m.t.v.Size()+63)/64]
	w := m.w
	w.limit(unitMax, deadline, intr)
	if intr != nil && intr.Load() {
		dst.clear()
		return fmt.Errorf("mask: interrupted: %w", ErrMaskBudget)
	}
	if m.ended {
		dst.clear()
		return nil
	}
	if c := m.t.lookup(m.stacks, w, true); c != nil {
		copy(dst, c)
		return nil
	}
	dst.clear()
	tr := w.startTrace(m.stacks)
	m.t.computeMask(m.stacks, dst, w)
	end := !w.stopped && w.canEnd(m.stacks, tr)
	if w.stopped {
		dst.clear()
		return m.budgetError(unitMax, deadline)
	}
	if end {
		for _, e := range m.t.v.ends {
			dst.Set(int(e))
		}
	}
	m.t.store(m.stacks, dst, w)
	return nil
}

func (m *Matcher) budgetError(unitMax int64, deadline time.Time) error {
	switch {
	case m.intr.Load():
		return fmt.Errorf("mask: interrupted: %w", ErrMaskBudget)
	case !deadline.IsZero() && time.Now().After(deadline):
		return fmt.Errorf("mask: past its deadline after %d units of work: %w", m.w.units, ErrMaskBudget)
	}
	return fmt.Errorf("mask: more than %d units of work: %w", unitMax, ErrMaskBudget)
}
