// Package prefixcache reuses the KV pages of shared prompt prefixes across
// requests (automatic prefix caching, as in vLLM and SGLang).
//
// # Where it sits
//
// The engine's step loop owns one Cache next to its paged KV arena
// (internal/engine/kvcache). When a request arrives, the engine calls Match with the
// prompt; the returned pages already hold the KV of the first
// len(pages)*PageTokens prompt tokens, so prefill starts after them and
// usage.prompt_tokens_details.cached_tokens is len(pages)*PageTokens. After
// prefill the engine calls Insert with the prompt and its page table so that
// later requests can reuse the pages. When the arena has no free page, the
// engine calls Evict before giving up.
//
// # Structure
//
// The cache is a radix tree whose edges are full pages of tokens: the child of
// a node is keyed by the PageTokens tokens of its page, so a node stands for
// the whole token prefix from the root to it, and its page holds the KV of
// exactly that prefix's last PageTokens positions. Partial pages are never
// cached, because their KV is still being written by the sequence that owns
// them.
//
// # API
//
// New(kv Pages, pageTokens, maxPages): Pages is the part of the arena the
// cache needs (a *kvcache.Cache and a layer group's *kvcache.Pool satisfy it;
// the engine keeps one tree per KV layer group and serves the prefix every
// tree holds, so a hit on a sliding-window model always has its window pages).
// Match(tokens, limit) returns the pages of the longest cached full-page
// prefix, at most limit (the engine passes (len(prompt)-1)/pageTokens so at
// least one prompt token is computed for logits). Insert(tokens, pages)
// returns the pages newly adopted; Evict(n) the pages released. maxPages
// bounds the tree (0 or less: only the arena bounds it); Insert stops at a
// page that does not fit even after evicting, and at a page the arena refuses
// to reference.
//
// # State snapshots
//
// A model with recurrent state (a hybrid such as qwen35) cannot resume a
// prefix from its pages alone. KeepStates(size, max) makes the cache keep, on
// the nodes the engine chooses (SetState, after Insert of the prefix's pages),
// a copy of a sequence's state after that node's prefix; StateAt(tokens,
// blocks) returns the deepest node at most blocks pages into tokens' path
// that holds one, and the caller cuts its Match back to that depth. A
// snapshot goes with its node (eviction, Reset); beyond max, a new one drops
// the least recently set or returned snapshot, whose pages stay. States()
// counts them. Snapshots take no page references of their own.
//
// # Invariants
//
//   - The tree holds exactly one kvcache reference on the page of each node;
//     Pages() is the number of nodes and therefore of those references.
//   - A page appears in at most one node. Insert does not adopt a page that is
//     already in the tree, nor the caller's duplicate of a page already
//     cached for the same prefix.
//   - Match takes one reference per returned page for the caller; the caller
//     releases them through the kvcache when its sequence ends.
//   - A node is evicted only when it has no children and kv.Refs(page) == 1,
//     that is when only the tree holds its page; pages held by live
//     sequences are never freed. Eviction is least recently used first: Match
//     and Insert stamp the nodes they walk with a monotonically increasing
//     use counter, and leaves sit in a min-heap ordered by that stamp.
//
// # Limits and cost
//
// PageTokens must be in 1..MaxPageTokens (4096, the kvcache range); a Cache made with
// another value, or with a nil Pages, is inert: Match returns nil, Insert
// adopts nothing. A nil *Cache is inert too, so an engine with prefix caching
// off may keep a nil pointer. Match and Insert cost O(pages walked *
// PageTokens) plus O(log leaves) heap work; Evict costs O((n + s) log leaves)
// where s is the number of older leaves it has to skip because a live
// sequence still holds them; Evictable walks every node once (O(Pages())),
// and is meant for metrics and admission decisions, not inner loops. No
// operation recurses.
//
// A Cache is not safe for concurrent use; the engine's step loop serializes
// all calls, as it does for the kvcache.
package prefixcache
