package server

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"tandem/internal/api/openai"
	"tandem/internal/engine/grammar"
)

// GrammarCacheEntries bounds the compiled grammars a server keeps. Each
// grammar holds its own mask caches (bounded by grammar.Options, 40 MiB at
// most by default), so this also bounds their memory.
const GrammarCacheEntries = 32

// grammarCache keeps compiled grammars by a hash of what compiled them
// (kind, options, schema bytes), least recently used out first. Requests
// for a grammar being compiled wait for that compilation instead of
// starting their own. Compilation errors are cached too: they are
// deterministic, and some (a pattern whose automaton explodes) take a
// second to find. The zero value is ready to use.
type grammarCache struct {
	mu sync.Mutex
	ll *list.List // of *grammarEntry, most recent first
	m  map[[32]byte]*list.Element
	// compiles counts compilations, for tests.
	compiles int
}

type grammarEntry struct {
	key   [32]byte
	ready chan struct{} // closed when g and err are set
	g     *grammar.Grammar
	err   error
}

// get returns the grammar for key, compiling it with compile on a miss.
func (c *grammarCache) get(ctx context.Context, key [32]byte, compile func() (*grammar.Grammar, error)) (*grammar.Grammar, error) {
	c.mu.Lock()
	if c.m == nil {
		c.ll, c.m = list.New(), make(map[[32]byte]*list.Element)
	}
	if el, ok := c.m[key]; ok {
		c.ll.MoveToFront(el)
		e := el.Value.(*grammarEntry)
		c.mu.Unlock()
		select {
		case <-e.ready:
			return e.g, e.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	e := &grammarEntry{key: key, ready: make(chan struct{})}
	c.m[key] = c.ll.PushFront(e)
	for c.ll.Len() > GrammarCacheEntries {
		old := c.ll.Remove(c.ll.Back()).(*grammarEntry)
		delete(c.m, old.key) // waiters on it keep their pointer
	}
	c.compiles++
	c.mu.Unlock()
	defer close(e.ready)
	func() {
		defer func() {
			if r := recover(); r != nil {
				e.g, e.err = nil, fmt.Errorf("grammar compiler failed: %v", r)
			}
		}()
		e.g, e.err = compile()
	}()
	return e.g, e.err
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

// constraintKey hashes what determines a compiled grammar.
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
		field(con.Schema)
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
func (s *Server) compileConstraint(ctx context.Context, con *openai.Constraint) (*grammar.Grammar, *openai.Error) {
	if con == nil {
		return nil, nil
	}
	opts := grammar.Options{DisableAnyWhitespace: con.DisableAnyWhitespace}
	g, err := s.grammars.get(ctx, constraintKey(con, opts), func() (*grammar.Grammar, error) {
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
	switch {
	case err == nil:
		return g, nil
	case ctx.Err() != nil:
		return nil, openai.Unavailable("the request ended while its grammar was being compiled")
	case errors.Is(err, grammar.ErrUnsupported):
		return nil, openai.Invalid(con.Param, openai.CodeUnsupported,
			"%s uses a feature this server cannot enforce while generating: %v. Remove or rewrite it.", con.Param, err)
	case errors.Is(err, grammar.ErrTooLarge):
		return nil, openai.Invalid(con.Param, openai.CodeInvalidValue, "%s is too large to compile: %v. Simplify it or bound its sizes.", con.Param, err)
	}
	return nil, openai.Invalid(con.Param, openai.CodeInvalidValue, "%s cannot be compiled: %v.", con.Param, err)
}
