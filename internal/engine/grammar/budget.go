package grammar

import (
	"context"
	"fmt"
)

// DefaultMaxCompileBytes is the memory budget of one compilation when
// Options.MaxCompileBytes is 0.
//
// A server compiles a few grammars at once (its compile slots), so the
// budget times the slots, doubled for the garbage collector's headroom,
// is what compilations can add to its heap: 128 MiB keeps that under
// 1 GiB on an 8-core machine with half its cores compiling. The automaton
// limits (MaxNFAStates, MaxDFAStates) already keep the largest accepted
// grammars near 100 MB; the budget catches what they do not count (the
// expression trees of a large schema, the subset construction's sets).
const DefaultMaxCompileBytes = 128 << 20

// WithContext returns o with ctx attached: a compilation with these
// options stops with ctx's error (wrapped) soon after ctx is done. The
// context is not part of the compiled grammar (Grammar keeps its options
// without it) and is not serialized with the options.
func (o Options) WithContext(ctx context.Context) Options {
	o.ctx = ctx
	return o
}

// budget follows what one compilation allocates, approximately but never
// much below the truth: expression nodes as they are defined (each node
// once), the NFA of each rule before it is built (from its size bound),
// and the subset construction's states, tables and sets. Past max bytes,
// or once the context is done, err is set and every later charge fails;
// the compiler checks it between its phases and inside its loops.
type budget struct {
	ctx   context.Context
	max   int64
	used  int64
	calls int
	err   error
	seen  map[*expr]struct{}
}

func newBudget(o Options) *budget {
	b := &budget{ctx: o.ctx, max: o.MaxCompileBytes, seen: map[*expr]struct{}{}}
	if b.max == 0 {
		b.max = DefaultMaxCompileBytes
	}
	return b
}

// Approximate sizes of what the compiler allocates, in bytes.
const (
	exprBytes    = 112 // an expr node with its slice header, rounded up to its size class
	seenBytes    = 48  // its entry in budget.seen
	nfaStateByte = 96  // per NFA state: epsilon edges, byte and call edges, closure sets
	dfaStateByte = 96  // per DFA state besides its transition row: final, calls, map entry, queue item
)

// charge counts n bytes and reports the budget's error, if any.
func (b *budget) charge(n int64) error {
	if b == nil {
		return nil
	}
	if b.err != nil {
		return b.err
	}
	b.used += n
	if b.max > 0 && b.used > b.max {
		b.err = fmt.Errorf("%w: compiling it takes more than %d MiB of memory (the compile budget); simplify it or bound its sizes", ErrTooLarge, b.max>>20)
		return b.err
	}
	if b.calls++; b.calls%64 == 1 && b.ctx != nil { // the first call, then every 64th
		if err := b.ctx.Err(); err != nil {
			b.err = fmt.Errorf("grammar: compilation stopped: %w", err)
		}
	}
	return b.err
}

// exprs charges the nodes of e not charged before.
func (b *budget) exprs(e *expr) error {
	if b == nil {
		return nil
	}
	var walk func(x *expr)
	walk = func(x *expr) {
		if _, ok := b.seen[x]; ok || b.err != nil {
			return
		}
		b.seen[x] = struct{}{}
		b.charge(exprBytes + seenBytes + 8*int64(cap(x.subs)))
		for _, s := range x.subs {
			walk(s)
		}
	}
	walk(e)
	return b.err
}
