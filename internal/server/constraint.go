package server

import (
	"bytes"
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"tandem/internal/api/openai"
	"tandem/internal/engine/grammar"
)

// GrammarCacheEntries bounds the compiled grammars a server keeps. Each
// grammar holds its own mask caches (bounded by grammar.Options, 40 MiB at
// most by default), so this also bounds their memory.
const GrammarCacheEntries = 32

// compileRetryAfter is the Retry-After of a request refused because every
// compile slot is busy: a compile takes from milliseconds to about a
// second (the automaton limits and the compile budget stop it there).
const compileRetryAfter = time.Second

// errCompileBusy is returned by grammarCache.get when every compile slot
// is taken: the request is answered 429 with a Retry-After.
var errCompileBusy = errors.New("every grammar compile slot is busy")

// errCompileAbandoned marks a compile stopped because every request
// waiting for it left; it is never cached, and a request that came for it
// meanwhile compiles again.
var errCompileAbandoned = errors.New("the grammar compile was abandoned")

// grammarCache keeps compiled grammars by a hash of what compiled them
// (kind, options, schema bytes), least recently used out first, across
// requests. Requests for a grammar being compiled wait for that
// compilation instead of starting their own. Compilation errors are cached
// too: they are deterministic, and some (a pattern whose automaton
// explodes) take a second to find.
//
// Compiles are admitted like work: at most slots run at once (each within
// the compile memory budget, grammar.Options.MaxCompileBytes); a request
// that needs one more is refused with errCompileBusy at once rather than
// queued behind them. A compile runs under a context of its own that ends
// when every request waiting for it has gone, so a client that leaves
// stops its compile (within a few hundred states of work); such a compile
// is not cached. The zero value is ready to use, with GOMAXPROCS slots.
type grammarCache struct {
	mu    sync.Mutex
	ll    *list.List // of *grammarEntry, most recent first
	m     map[[32]byte]*list.Element
	slots int // compile slots (0: GOMAXPROCS)
	busy  int // compile slots in use
	// compiles counts compilations, for tests.
	compiles int
}

type grammarEntry struct {
	key   [32]byte
	ready chan struct{} // closed when g and err are set
	g     *grammar.Grammar
	err   error
	// Under the cache's mutex: done once g and err are set; waiters are
	// the requests waiting for the compile (the one running it included);
	// cancel ends the compile's context.
	done    bool
	waiters int
	cancel  context.CancelFunc
}

// get returns the grammar for key, compiling it with compile on a miss
// (compile must stop soon after its context is done).
func (c *grammarCache) get(ctx context.Context, key [32]byte, compile func(context.Context) (*grammar.Grammar, error)) (*grammar.Grammar, error) {
	for {
		c.mu.Lock()
		if c.m == nil {
			c.ll, c.m = list.New(), make(map[[32]byte]*list.Element)
		}
		if el, ok := c.m[key]; ok {
			c.ll.MoveToFront(el)
			e := el.Value.(*grammarEntry)
			if !e.done {
				e.waiters++
			}
			c.mu.Unlock()
			select {
			case <-e.ready:
				if e.err == errCompileAbandoned && ctx.Err() == nil {
					continue // its requests left as it started: compile it here
				}
				return e.g, e.err
			case <-ctx.Done():
				c.leave(e)
				return nil, ctx.Err()
			}
		}
		slots := c.slots
		if slots <= 0 {
			slots = runtime.GOMAXPROCS(0)
		}
		if c.busy >= slots {
			c.mu.Unlock()
			return nil, fmt.Errorf("%w (%d compiles at once)", errCompileBusy, slots)
		}
		c.busy++
		cctx, cancel := context.WithCancel(context.Background())
		e := &grammarEntry{key: key, ready: make(chan struct{}), waiters: 1, cancel: cancel}
		el := c.ll.PushFront(e)
		c.m[key] = el
		for c.ll.Len() > GrammarCacheEntries {
			old := c.ll.Remove(c.ll.Back()).(*grammarEntry)
			delete(c.m, old.key) // waiters on it keep their pointer
		}
		c.compiles++
		c.mu.Unlock()
		return c.compile(ctx, cctx, e, el, compile)
	}
}

// compile runs e's compile on the calling goroutine and publishes it.
func (c *grammarCache) compile(ctx, cctx context.Context, e *grammarEntry, el *list.Element, compile func(context.Context) (*grammar.Grammar, error)) (*grammar.Grammar, error) {
	stop := context.AfterFunc(ctx, func() { c.leave(e) })
	var g *grammar.Grammar
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				g, err = nil, fmt.Errorf("grammar compiler failed: %v", r)
			}
		}()
		g, err = compile(cctx)
	}()
	stop()
	abandoned := cctx.Err() != nil
	e.cancel()
	c.mu.Lock()
	c.busy--
	e.done = true
	e.g, e.err = g, err
	if abandoned {
		e.g, e.err = nil, errCompileAbandoned
		if c.m[e.key] == el {
			c.ll.Remove(el)
			delete(c.m, e.key)
		}
	}
	c.mu.Unlock()
	close(e.ready)
	if abandoned {
		return nil, context.Cause(ctx)
	}
	return g, err
}

// leave drops a request from e's waiters; the last one out cancels the
// compile.
func (c *grammarCache) leave(e *grammarEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.done {
		return
	}
	if e.waiters--; e.waiters == 0 {
		e.cancel()
	}
}

// len returns the number of cached entries.
func (c *grammarCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ll == nil {
		return 0
	}
	return c.ll.Len()
}

// compileRefusal maps what the grammar cache returned for a request that
// did not get its grammar (busy, or the client left) to an API error; nil
// for any other error.
func (s *Server) compileRefusal(ctx context.Context, err error) *openai.Error {
	switch {
	case errors.Is(err, errCompileBusy):
		s.met.compileBusy.Inc()
		e := openai.RateLimited(err.Error() + "; retry shortly")
		e.RetryAfter = compileRetryAfter
		return e
	case ctx.Err() != nil:
		return openai.Unavailable("the request ended while its grammar was being compiled")
	}
	return nil
}

// constraintKey hashes what determines a compiled grammar: its kind, the
// options and its content.
func constraintKey(con *openai.Constraint, opts grammar.Options) [32]byte {
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field([]byte(con.Kind))
	o, _ := json.Marshal(opts) // plain numbers and booleans: cannot fail
	field(o)
	switch con.Kind {
	case openai.ConstraintJSONSchema:
		// By content: whitespace between JSON tokens changes nothing the
		// compiler sees (key order and string bytes stay as sent).
		var c bytes.Buffer
		if json.Compact(&c, con.Schema) == nil {
			field(c.Bytes())
		} else {
			field(con.Schema)
		}
	case openai.ConstraintRegex:
		field([]byte(con.Regex))
	case openai.ConstraintChoice:
		for _, s := range con.Choice {
			field([]byte(s))
		}
	case openai.ConstraintGrammar:
		field([]byte(con.Grammar))
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// compileConstraint returns the grammar for a request's constraint (nil
// for none), from the cache when it has it. A constraint that does not
// compile is a 400 naming the member it came from; a schema keyword the
// grammar cannot enforce says so, never leaving the output unconstrained.
// No free compile slot is a 429 (see grammarCache).
func (s *Server) compileConstraint(ctx context.Context, con *openai.Constraint) (*grammar.Grammar, *openai.Error) {
	if con == nil {
		return nil, nil
	}
	opts := grammar.Options{DisableAnyWhitespace: con.DisableAnyWhitespace, MaxWhitespace: s.o.JSONMaxWhitespace}
	g, err := s.grammars.get(ctx, constraintKey(con, opts), func(cctx context.Context) (*grammar.Grammar, error) {
		opts := opts.WithContext(cctx)
		switch con.Kind {
		case openai.ConstraintJSONSchema:
			return grammar.Compile(con.Schema, opts)
		case openai.ConstraintJSONObject:
			return grammar.CompileAnyObject(opts)
		case openai.ConstraintRegex:
			return grammar.CompileRegex(con.Regex, opts)
		case openai.ConstraintChoice:
			return grammar.CompileChoice(con.Choice, opts)
		case openai.ConstraintGrammar:
			return grammar.CompileGBNF(con.Grammar, opts)
		}
		return nil, errors.New("unknown constraint kind " + con.Kind)
	})
	if err == nil {
		return g, nil
	}
	if e := s.compileRefusal(ctx, err); e != nil {
		return nil, e
	}
	switch {
	case errors.Is(err, grammar.ErrUnsupported):
		return nil, openai.Invalid(con.Param, openai.CodeUnsupported,
			"%s uses a feature this server cannot enforce while generating: %v. Remove or rewrite it.", con.Param, err)
	case errors.Is(err, grammar.ErrTooLarge):
		return nil, openai.Invalid(con.Param, openai.CodeInvalidValue, "%s is too large to compile: %v.", con.Param, err)
	}
	return nil, openai.Invalid(con.Param, openai.CodeInvalidValue, "%s cannot be compiled: %v.", con.Param, err)
}
