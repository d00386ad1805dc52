// Package grammar is Tandem's constrained-decoding engine: it compiles a JSON
// schema (or a regular expression, a list of choices, a GBNF grammar with
// CompileGBNF, or a grammar built from parts with CompileParts) into a
// pushdown automaton over bytes, and tells, for each step of a generation,
// which tokens of a vocabulary may come next, so that the output is always a
// document the grammar accepts.
//
// # API
//
//   - Compile(schema []byte, Options) (*Grammar, error);
//     CompileAnyObject(Options) for {"type":"json_object"};
//     CompileRegex(pattern, Options) (the whole output matches) and
//     CompileChoice([]string, Options) for vLLM's structured_outputs regex and
//     choice.
//   - CompileParts(Part, Options) builds a grammar from parts (tool calling:
//     the model's tool-call syntax around the tools' parameter schemas):
//     Lit(s) (exact bytes), Schema(json) (one JSON value valid against the
//     schema, with no whitespace around it; its $refs resolve within it),
//     Regex(pattern) (the whole text matches, as CompileRegex), Seq(parts...),
//     Alt(parts...) (at least one), Repeat(p, min, max, sep) (max -1: no
//     bound; sep between consecutive items, Part{} for none; counts up to
//     MaxPartRepeat, 4096) and Optional(p). Nothing is added around or between
//     parts. Example, Hermes with 1 to 3 calls of either of two tools:
//     Repeat(Seq(Lit("<tool_call>\n"), Alt(call("a", sa), call("b", sb)),
//     Lit("\n</tool_call>")), 1, 3, Lit("\n")) where call(n, s) is
//     Seq(Lit("{\"name\": \"" + n + "\", \"arguments\": "), Schema(s),
//     Lit("}")). A part used in several places is compiled once. Errors of a
//     schema or regex part wrap its error (ErrUnsupported naming the keyword)
//     and give the part's number (depth-first from 1); such an error is a
//     *PartError (Part, comparable with ==, and Index), and so is a grammar
//     too large as a whole (ErrTooLarge), naming the schema or regex part
//     whose automaton takes the most of it (tool calling names the failing
//     tool from it, without compiling any schema again). A literal must be
//     text the vocabulary can spell: a control token such as Mistral's
//     [TOOL_CALLS] in vocabularies where it is one has no bytes in a Vocab
//     from FromTokenizer and is never in a mask: emit it outside the grammar
//     and constrain what follows.
//   - CompileGBNF(src, Options) compiles llama.cpp's GBNF (vLLM's
//     structured_outputs.grammar): rules name ::= ... (names of letters,
//     digits, -, _), start rule root, strings "...", classes [a-z] [^...], .
//     (any character, newline included), ( ), |, * + ?, {m} {m,} {m,n}, #
//     comments; escapes \xHH \uHHHH \UHHHHHHHH \t \n \r and escaped
//     punctuation (\" \\ \[ \] \-, …). Characters are code points matched as
//     UTF-8, as in llama.cpp: "\xE9" is é (two bytes); invalid UTF-8 never
//     matches. Rules may recurse (each is a rule of the pushdown automaton;
//     non-recursive rules up to 128 NFA states are inlined into their callers,
//     so a nullable ws rule costs no parallel readings). A newline does not
//     end a rule; the next name ::= does (a superset of llama.cpp, which ends
//     a rule at a newline outside parentheses). Refused, each with line L,
//     column C (characters, from 1): undefined or twice-defined rules, no
//     root, left recursion (naming the rule and the cycle, e.g. expr -> term
//     -> expr), a root that can never finish (naming the rules that never
//     finish), bad escapes, surrogate code points, unterminated strings and
//     classes, unbalanced parentheses, {m,n} with m > n or a count above
//     MaxGBNFRepeat (4096), {,n}; token references <...>/!<...> wrap
//     ErrUnsupported. Only MaxDepth and the cache sizes of Options apply: the
//     grammar spells out its own whitespace.
//   - Options: DisableAnyWhitespace (vLLM's disable_any_whitespace: compact
//     JSON only), MaxWhitespace (0, the default: compact whitespace, each gap
//     between JSON tokens empty, one space, or a newline and at most
//     CompactIndentMax (20) spaces or tabs, as llama.cpp's converter; N > 0:
//     any run of space/tab/newline/CR up to N bytes; never before or after the
//     whole document, so a generation starts with its value and ends with it).
//     Numbers a schema does not bound take llama.cpp's digit bounds: at most
//     MaxIntegerDigits (16) integer digits, MaxFractionDigits (16) fraction
//     digits, MaxExponentDigits (3) exponent digits (a bounded range keeps
//     unbounded fraction digits next to its bounds), LooseProperties (JSON
//     Schema's default of allowing unlisted properties when
//     additionalProperties is absent; off by default, as xgrammar's strict
//     mode in vLLM), MaxDepth (stack frames, default 384), MaskCacheBytes /
//     StateCacheBytes (cache bounds per grammar and vocabulary; defaults 8 MiB
//     / 32 MiB; negative disables), MaxCompileBytes (the memory one
//     compilation may allocate, counted as it builds expression nodes, NFA and
//     DFA states and sets; default DefaultMaxCompileBytes, 128 MiB; past it
//     ErrTooLarge naming the compile budget). opts.WithContext(ctx): the
//     compilation stops with ctx's error (wrapped) soon after ctx is done; the
//     grammar does not keep the context. A caller that keeps compiled grammars
//     (by schema hash) must bound how many it keeps: each holds its own
//     caches.
//   - NewVocab(tokens [][]byte, endTokens []int32) (*Vocab, error): tokens[i]
//     must be the exact bytes token i adds to the output (SentencePiece: ▁
//     already a space and <0xNN> already the byte; GPT-2 byte-level BPE: the
//     byte mapping undone); empty tokens (control tokens) are never allowed;
//     endTokens are allowed exactly when the document is complete.
//     FromTokenizer(*tokenizer.Tokenizer) does this with TokenPiece and every
//     IsEOG token.
//   - NewMatcher(g, v) *Matcher; Mask(dst Bitset) (NewBitset(v.Size())),
//     Accept(token) error (wraps ErrRejected, or ErrEnded after an end token;
//     the matcher is unchanged on error), AcceptBytes, CanEnd(), Done()
//     (ended, or complete with no byte possible), Ended(), Clone(),
//     Rollback(n), Steps(), Reset(). MaskWithin(dst, Limit{Deadline, Work})
//     (work, error) is Mask within a deadline and a bound on work units (one
//     per automaton step: a rule call or return expanded, a reading tried
//     against a trie node): it stops past either, or after Interrupt() (the
//     one method safe to call from another goroutine; sticky), with an error
//     wrapping ErrMaskBudget, having cached nothing; the work bound is exact,
//     the clock is looked at every 256 units. Grammar.Stats(v) returns cache
//     counters. Grammar.CheckCost(v, CostLimit{Masks, MaskNodes, TotalNodes})
//     computes the masks of a sample generation (a fixed pseudo-random walk)
//     within a work bound counted in walks of the vocabulary trie
//     (Vocab.Nodes, at least 65536), and fails with ErrTooCostly naming the
//     work when one mask or all need more; cached per (grammar, vocabulary,
//     limit). DefaultCostLimit: 8 masks, 4 walks each, 16 in all.
//
// # Invariants
//
//   - Every live matcher state can complete a document: compilation prunes
//     automaton states from which no end is reachable (a contradictory schema
//     fails with "admits no value"), so masked sampling never gets stuck,
//     given a vocabulary that can spell every byte (byte fallback or single-
//     byte tokens) and a grammar that stays within MaxStacks readings (see
//     Limits).
//   - Mask and Accept agree exactly: a token is in the mask iff Accept takes
//     it; end tokens iff CanEnd. This holds at the MaxStacks bound too: a
//     token whose bytes would leave more than MaxStacks readings live is
//     refused by Accept and left out of the mask.
//   - A keyword the grammar cannot honour is an error wrapping ErrUnsupported
//     that names it (with its JSON pointer), never silently dropped.
//     Annotations (title, description, default, examples, $comment, …) are
//     ignored.
//   - A Grammar and a Vocab are safe for concurrent use; a Matcher belongs to
//     one sequence. Caches are shared by all matchers of a (grammar,
//     vocabulary) pair behind one mutex.
//
// # How it is fast
//
// Each rule is a DFA whose edges are bytes or calls of other rules; a matcher
// state is a set of stacks of DFA states. The vocabulary is indexed once as a
// byte trie. For each DFA state, the first time it is on top of a stack, one
// trie walk (pruning every subtree the automaton rejects) records the tokens
// the rule on top can read entirely, whatever lies below (context-
// independent), and the trie nodes after which the rule can end. A mask is
// then that precomputed bitset OR-ed with walks of only those subtrees against
// the real stack below. Whole masks are also cached (maskcache.go), keyed by
// what the mask read of the stacks: each computation records the lowest frame
// each walk popped into, and the key is every stack's top K frames (K the most
// frames read on any stack), written as a graph (frames several stacks share
// stay shared) over canonically numbered frames below, plus, checked at
// lookup, how far above the stacks its walks pushed (near MaxDepth the depth
// limit shapes a mask; such masks are not cached). A lookup tries each key
// depth the cache holds (at most 8). A mask deep in a JSON document or in a
// recursive grammar thus comes from the cache when the same top frames recur
// at another depth (a whole-stack key never repeated there). Both caches are
// bounded (an arbitrary entry is evicted when full).
//
// Tail calls push no frame: a call whose return state has nothing left to do
// (final, no bytes, no calls) returns straight to the caller's caller, and a
// state whose only move is such a call is stored as the callee's start state,
// as llama.cpp's grammar does. Right recursion (list ::= item list | "", root
// ::= a "!" root | ...) thus keeps the stack flat, and the stacks after each
// round of the red-team grammar of finding 1 are the same.
//
// That fast path does not see MaxStacks, so it also adds up, over the walks it
// does, the most readings each had after a byte: an upper bound on the stacks
// Accept can hold after any byte of any token. Within MaxStacks (every
// unambiguous or mildly ambiguous state) the fast mask is exact. Past it, or
// when the fast path would walk more trie nodes against real stacks than the
// trie has (many readings, each walked down its own frames), the mask is
// computed by an exact walk instead: the whole stack set is stepped along the
// trie byte by byte as Accept steps it, a subtree pruned when no stack or more
// than MaxStacks stacks survive its byte. Its frames are hash-consed (one
// frame per state over frame), so equal stacks are one configuration and the
// count at a node is exactly the stack count Accept checks; it visits only
// trie nodes some reading can spell.
//
// # Coverage of JSON Schema and regular expressions
//
//   - type (one or a list, e.g. ["string","null"]; absent means every type, as
//     JSON Schema says), nullable: true.
//   - Objects: properties emitted in schema order (as vLLM/xgrammar do),
//     required ones mandatory, others optional; additionalProperties
//     false/true/schema (extra keys after the listed ones, never a listed
//     name); required names without a property schema take the
//     additionalProperties schema.
//   - Arrays: items, prefixItems, minItems, maxItems; the draft-4 tuple form
//     items: [...] with additionalItems.
//   - Strings: minLength, maxLength (code points; an escape counts as one),
//     pattern, format date, time, date-time, uuid, email; strings accept every
//     JSON escape.
//   - Numbers: integer and number with minimum, maximum, exclusiveMinimum,
//     exclusiveMaximum (also draft 4's boolean form), exact: integer ranges
//     are digit automata (arbitrary size), number bounds may be decimals
//     (0.01, -2.5); bounded numbers are written without an exponent. Integers
//     are written without a fraction (1, never 1.0, which JSON Schema also
//     counts as an integer), so generation cannot run on in trailing zeros.
//   - enum, const (a number in its one shortest spelling: 1 for 1.0, 0.5 for
//     0.50), anyOf, oneOf (as anyOf), allOf (merged: properties, required,
//     types, bounds), sibling keywords of anyOf/oneOf/$ref merged into each
//     branch, local $ref (#, #/$defs/…, #/definitions/…, any JSON pointer)
//     including recursion, boolean schemas.
//   - Regex subset (pattern, CompileRegex): literals, ., classes with ranges
//     and negation, \d \w \s \D \W \S, \n \t \r \f \v \0 \xHH \uHHHH, groups
//     (…), (?:…), (?<name>…), |, * + ? {m} {m,} {m,n} (lazy forms too), ^/$ at
//     the ends of top-level alternatives; a pattern without ^/$ matches
//     anywhere in the string, as JSON Schema says.
//
// # Limits
//
//   - Refused with ErrUnsupported: not, if/then/else, dependentSchemas,
//     dependentRequired, dependencies, patternProperties, propertyNames,
//     minProperties, maxProperties, unevaluated*, contains and friends,
//     multipleOf, uniqueItems: true, $dynamicRef/$recursiveRef, remote or $id-
//     relative $ref, anchors, a number range whose two bounds have fractions
//     inside one unit interval (0.1 to 0.9; other decimal bounds are exact),
//     other formats, pattern or format together with length bounds, enum/const
//     with other validation keywords, allOf branches with different values for
//     the same keyword it cannot merge (pattern, format, …), and
//     additionalProperties/items in one branch with properties/prefixItems in
//     another. Regex: lookaround, backreferences, \b, \p{…}.
//   - Narrower than JSON Schema (deliberate, documented): property order
//     fixed; oneOf accepts a value matching several branches; formats are
//     asserted (not annotations); email is a dot-atom subset (no quoted local
//     parts, no address literals); object literals in enum/const keep their
//     key order; pattern characters and literal strings use one canonical
//     escaping (only ", \ and control characters escaped); a listed property
//     name written with a \u escape is not recognised as that name; second 60
//     is allowed at any hh:mm; numbers never use an exponent when bounded.
//   - Sizes: bounds above 4096 (MaxLengthBound) are refused for minimums and
//     ignored for maximums; compilation stops with ErrTooLarge past 2^20 NFA
//     states, 2^17 DFA states or 2^22 units of subset-construction work (a
//     pattern whose DFA explodes fails in about a second). MaxStacks (128)
//     bounds parallel readings of an ambiguous grammar (see below). The
//     matcher history for Rollback grows by one entry per accepted token.
//   - GBNF: at most MaxGBNFBytes (1 MiB) of source, MaxGBNFRules (16384)
//     rules, 128 nested parentheses, 16 repetition operators on one item; past
//     the automaton limits above it fails with ErrTooLarge (the worst inputs
//     the fuzzer found take under a second). Recursion deeper than MaxDepth
//     frames is rejected at the byte that would exceed it (tail calls push no
//     frame, so right recursion has no depth limit).
//   - Compile memory: MaxCompileBytes (above). seq keeps sequences of more
//     than 16 items as children rather than flattening each into the next, so
//     a schema of 10,000 properties fails at the budget after about 50 MB
//     instead of copying its property chain per property (about 870 MB).
//   - Ambiguous grammars (GBNF makes them easy to write: a ::= ("x" | "xx") a
//     b | "" with a nullable b, or a ::= [a-z] a "1" | [a-z] b "2" | "" with b
//     alike, which doubles its readings at every letter) keep one stack per
//     reading. Equal stacks are always merged (Accept keys them; the exact
//     mask hash-conses frames); the readings that remain differ in what they
//     still expect (how many b are pending), so no canonical form merges them:
//     only a graph-structured stack (GLR style: readings as a shared DAG)
//     would make such grammars cost linear, which this package does not have.
//     Whether a context-free grammar is ambiguous is undecidable, so
//     compilation cannot refuse them in general. Instead MaxStacks caps the
//     readings: a byte that would leave more live is refused by Accept (an
//     error naming MaxStacks: "the grammar is too ambiguous") and every token
//     containing it is out of the mask, so a masked sampler never picks a
//     token Accept refuses. The matcher stays where it was, so the document
//     can still be completed in principle, but in a grammar where every
//     continuation multiplies the readings past the cap the mask can be empty
//     while CanEnd is false: a caller should treat an empty mask as the end of
//     constrained generation (too ambiguous), as it treats an Accept error.
//     The cap is 128: it bounds the exact mask's work to about (trie nodes
//     some reading can spell) x 128 configurations; at 1024 the doubling
//     grammar's masks took 0.6 to 2 s each. Uncached masks at the cap,
//     measured on the 32k vocabulary (BenchmarkMaskAmbiguous32k, shared
//     machine), take 0.5 to 99 ms; on the 128k Llama 3 vocabulary the doubling
//     grammar takes about 0.5 s at 8 readings, the worst case left. A grammar
//     that needs more readings than the cap (the nested one after 64 x) is
//     refused at that byte: rewrite it so that its alternatives differ
//     earlier.
//   - Left recursion through $ref (a schema that refers to itself before any
//     value is read, e.g. anyOf whose first branch is the schema itself) is
//     refused with ErrUnsupported.
package grammar
