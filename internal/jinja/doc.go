// Package jinja renders chat templates: the Jinja language as Hugging
// Face chat templates use it, rendered as transformers renders them
// (Python's Jinja2 in an ImmutableSandboxedEnvironment with trim_blocks,
// lstrip_blocks, loop controls, the {% generation %} tag, raise_exception,
// strftime_now and its tojson), within budgets, and with the provenance of
// every output byte.
//
// # Why it is written by hand
//
// Templates come from model files (a hub download, a GGUF's
// tokenizer.chat_template) or from --chat-template, and are rendered for
// every chat request: they are untrusted input. The Go Jinja library
// Tandem used (github.com/ardanlabs/jinja v1.8.0) has no budget of any
// kind: infinite macro recursion overflows the Go stack (a fatal error no
// recover catches), "x" * 3000000000 and range(2000000000) exhaust memory,
// and nothing stops on cancellation; its newer versions need Go 1.27 and
// add no limits, and no maintained Go Jinja library offers budgets. A
// wrapper cannot make such a library safe, so the renderer is Tandem's
// own.
//
// # Contract
//
// Parse reads a template once (at model load); the Template is immutable
// and safe for concurrent use. Parse refuses a source over 1 MiB, nesting
// deeper than 128 levels, and tags, filters or tests it does not have
// (include, import, extends and block have nothing to read from, as in
// transformers); it never panics.
//
// Template.Render renders with the caller's variables and Options:
//
//   - Budgets (Limits): evaluation steps, output bytes, call depth (macros,
//     caller(), recursive loops; counted, never the Go stack's limit), the
//     size of any string, list or dict the template builds (range, *, +,
//     join, filters), and total bytes built. Breaking one stops the render
//     with a *BudgetError naming the budget (errors.Is ErrBudget). range()
//     refuses more than 100 000 items, as Jinja2's sandbox does.
//   - Cancellation: the context is checked every Limits.CheckEvery steps;
//     a render whose context ends returns its error, wrapped.
//   - Builtins (range, dict, namespace, cycler, joiner, raise_exception,
//     strftime_now) cannot be shadowed: a variable named like one is
//     refused with ErrShadowsBuiltin (IsBuiltin lets a caller check
//     first).
//   - Errors: *Error with a Kind after Jinja2's exception (syntax,
//     undefined, type, value, security, raised); a template's
//     raise_exception gives ErrRaised with the template's message as the
//     error text.
//   - No input makes it panic, hang, or allocate beyond the budgets.
//
// # Semantics
//
// Values follow Python: truthiness, ==, ordering, in, arithmetic (ints
// are 64-bit: a result outside int64 is an error), str() and repr(),
// slicing by code point, dicts that keep insertion order. Undefined
// behaves as Jinja2's default Undefined (prints as "", iterates as empty,
// fails when used in arithmetic, attribute access or a call). Attribute
// and item lookup follow the sandbox (obj.x prefers an attribute such as a
// dict method, obj['x'] prefers the item; methods that change a list or
// dict and names starting with "__" are refused). Filters that make
// generators in Jinja2 (map, select, reject, selectattr, rejectattr,
// unique, batch, slice, items, reverse) give one-shot iterators, with the
// same len() and truthiness rules. safe and escape make Markup strings,
// and Markup + str escapes the str, as markupsafe does. Differences from
// Jinja2 that remain are listed in README.md; the tests compare the
// renderer with Python's Jinja2 and with @huggingface/jinja on small
// templates and on the chat templates of real model families.
//
// # Provenance
//
// Strings made with UntrustedStr, or by FromJSON with untrusted set,
// carry the byte ranges that came from the client. The ranges follow the
// bytes through concatenation, slicing, strip, split, replace, join, case
// changes, formatting, macro results and captured blocks; where an
// operation cannot tell which output bytes came from which input (a repr
// of a list, tojson, sort), the whole result is untrusted if any input
// was. Output.Untrusted lists the untrusted ranges of the rendered text,
// and Output.Segments splits it, so that the caller can tokenize client
// text without turning special-token text into control tokens.
//
// # Default limits
//
// Limits (steps 50M, output 64 MiB, call depth 128, strings 32 MiB, lists and
// dicts 1M items, 512 MiB built per render, context checked every 1024 steps);
// range() up to 100 000 items as in Jinja2's sandbox; sources up to 1 MiB
// nested up to 128 levels; request JSON up to 64 levels deep.
//
// # Known differences from Jinja2
//
// Integers are 64-bit (an overflow is an error, Python's ints have no bound);
// dict.items(), keys() and values() are lists rather than views; a generator
// prints as <generator object> without an address; groupby gives plain pairs
// (no .grouper / .list); lipsum, random, pprint, filesizeformat, urlencode,
// urlize, wordwrap and xmlattr are absent (a template naming one fails to
// parse); \N{...} escapes in string literals are refused; is sameas compares
// scalars and strings by value.
package jinja
