// Package grammar is Tandem's constrained-decoding engine: it compiles a
// JSON schema (or a regular expression, a list of choices, a GBNF grammar
// with [CompileGBNF], or a grammar built from parts with [CompileParts])
// into a pushdown automaton over bytes, and tells, for each step of a
// generation, which tokens of a vocabulary may come next.
//
// Place in the data flow: the API layer compiles a request's schema with
// [Compile] (once per schema; a caller may cache the *Grammar by schema
// hash), the engine creates one [Matcher] per sequence with [NewMatcher]
// over the model's [Vocab] (built once with [FromTokenizer] or [NewVocab]),
// and before each sampling step the sampler asks [Matcher.Mask] for the
// allowed tokens, then reports the chosen one with [Matcher.Accept].
//
// How it is fast: each grammar rule is a DFA whose edges are bytes or
// calls of other rules. For each DFA state, the tokens its rule can read
// entirely, whatever lies below on the stack, are computed once by walking
// the vocabulary's byte trie and pruning every subtree the automaton
// rejects; only the tokens that run past the end of the rule are walked
// against the real stack. Whole masks are cached under the top frames of
// the stacks that their computation read. Both caches are bounded.
//
// Cost: Matcher.MaskWithin bounds one mask's work and time (and stops on
// Interrupt), Grammar.CheckCost measures the first masks of a grammar
// before it is used, and Options.MaxCompileBytes and Options.WithContext
// bound a compilation's memory and let it be cancelled.
//
// Invariants:
//   - Every live matcher state can still complete a document: compilation
//     prunes automaton states from which no end is reachable, so a masked
//     sampler never paints itself into a corner.
//   - Mask and Accept agree: a token is in the mask exactly when Accept
//     takes it; end tokens exactly when CanEnd holds.
//   - A schema keyword the grammar cannot honour is an error naming it
//     (wrapping ErrUnsupported), never silently ignored.
//
// Limits: see README.md.
package grammar
