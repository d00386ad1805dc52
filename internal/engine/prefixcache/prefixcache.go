package prefixcache

import "encoding/binary"

// Limits of the cache.
const (
	// MaxPageTokens is the largest page size a Cache accepts; it matches the
	// kvcache's own bound. Keys are 4 bytes per token, so a key is at most
	// 16 KiB.
	MaxPageTokens = 4096
	// tokenBytes is the size of one token in a packed page key.
	tokenBytes = 4
)

// Pages is the part of the paged KV arena the cache needs. *kvcache.Cache
// satisfies it.
type Pages interface {
	Ref(pages []int32) error
	Release(pages []int32) error
	Refs(p int32) int
}

// node is one cached page: the prefix from the root to it, of which the page
// holds the last pageTokens positions.
type node struct {
	parent   *node
	key      string           // the page's tokens, packed little-endian
	page     int32            // -1 for the root
	children map[string]*node // nil until the first child
	lastUse  uint64           // use counter stamp of the last Match/Insert walk
	heapIdx  int              // index in Cache.leaves, -1 when not a leaf in the heap
	allIdx   int              // index in Cache.all, -1 for the root
	mark     uint64           // scratch stamp for Evictable
	state    []float32        // state snapshot after this node's prefix (KeepStates), nil when none
	stateIdx int              // index in Cache.stated, -1 when no snapshot
	stateUse uint64           // use counter stamp of the snapshot's last SetState/StateAt
}

// Cache is a radix tree of full KV pages keyed by the tokens of their whole
// prefix, with reference counting against a Pages arena and least recently
// used eviction. It is not safe for concurrent use.
type Cache struct {
	kv         Pages
	pageTokens int
	maxPages   int // <= 0: no bound besides the arena
	inert      bool

	root   node
	all    []*node         // every node except the root, for O(1) counting and flat walks
	byPage map[int32]*node // page -> node holding it
	leaves []*node         // min-heap on lastUse of childless nodes (root excluded)
	clock  uint64          // use counter
	marks  uint64          // Evictable's generation counter

	keyBuf []byte  // scratch for packing a page's tokens
	one    []int32 // scratch single-page slice for Ref/Release

	// state snapshots (state.go): floats per snapshot, at most maxStates
	// of them, the nodes holding one, and buffers of dropped ones to reuse.
	stateSize, maxStates int
	stated               []*node
	spare                [][]float32
}

// New returns an empty cache over kv for pages of pageTokens tokens that holds
// at most maxPages pages (0 or less: no bound besides the arena). With a nil
// kv or a pageTokens outside 1..MaxPageTokens the cache is inert: it matches
// and adopts nothing.
func New(kv Pages, pageTokens int, maxPages int) *Cache {
	c := &Cache{
		kv:         kv,
		pageTokens: pageTokens,
		maxPages:   maxPages,
		inert:      kv == nil || pageTokens < 1 || pageTokens > MaxPageTokens,
		byPage:     make(map[int32]*node),
		one:        make([]int32, 1),
	}
	c.root = node{page: -1, heapIdx: -1, allIdx: -1, stateIdx: -1}
	if !c.inert {
		c.keyBuf = make([]byte, pageTokens*tokenBytes)
	}
	return c
}

// PageTokens returns the number of tokens per page the cache was made with.
func (c *Cache) PageTokens() int {
	if c == nil {
		return 0
	}
	return c.pageTokens
}

// off reports whether the cache must do nothing.
func (c *Cache) off() bool { return c == nil || c.inert }

// pack writes the tokens of one page into the key scratch buffer and returns
// it. Looking a map up with string(c.pack(...)) does not allocate.
func (c *Cache) pack(toks []int32) []byte {
	b := c.keyBuf
	for i, t := range toks {
		binary.LittleEndian.PutUint32(b[i*tokenBytes:], uint32(t))
	}
	return b
}

// Match returns the pages of the longest cached prefix of tokens made of full
// pages, at most limit pages (the engine passes (len(prompt)-1)/pageTokens so
// that at least one prompt token is always computed to get logits). It takes
// one reference on each returned page for the caller, who releases them when
// its sequence ends, and marks the path most recently used. It returns nil
// when nothing matches.
func (c *Cache) Match(tokens []int32, limit int) (pages []int32) {
	if c.off() || limit <= 0 {
		return nil
	}
	n := min(limit, len(tokens)/c.pageTokens)
	pt := c.pageTokens
	cur := &c.root
	for i := range n {
		next := cur.children[string(c.pack(tokens[i*pt:(i+1)*pt]))]
		if next == nil {
			break
		}
		if pages == nil {
			pages = make([]int32, 0, n) // n <= len(tokens)/pageTokens
		}
		pages = append(pages, next.page)
		cur = next
	}
	if len(pages) == 0 {
		return nil
	}
	if err := c.kv.Ref(pages); err != nil {
		// A tree page was freed behind the cache's back (someone released
		// more references than they held). Serving it could hand out KV that
		// another sequence overwrites, so report no match; Evict drops such
		// stale nodes.
		return nil
	}
	c.touch(cur)
	return pages
}

// touch stamps n and its ancestors as used now, keeping the leaf heap ordered.
func (c *Cache) touch(n *node) {
	c.clock++
	for x := n; x != &c.root; x = x.parent {
		x.lastUse = c.clock
	}
	// Only the deepest node of a path can be a leaf.
	if n.heapIdx >= 0 {
		c.heapFix(n.heapIdx)
	}
}

// Insert records that pages hold the KV of tokens[:len(pages)*pageTokens];
// only as many pages as tokens covers in full are considered. Pages already
// cached for the same prefix are left as they are (the caller's duplicate
// pages are not adopted); each new node takes one reference of its own on its
// page. Adoption stops at the first page that is already in the tree under
// another prefix, that the arena refuses to reference (a free or out of range
// page), or that does not fit under maxPages even after evicting. Insert
// returns how many pages were newly adopted and marks the path most recently
// used.
func (c *Cache) Insert(tokens []int32, pages []int32) int {
	if c.off() {
		return 0
	}
	pt := c.pageTokens
	n := min(len(pages), len(tokens)/pt)
	cur := &c.root
	adopted := 0
	for i := range n {
		key := c.pack(tokens[i*pt : (i+1)*pt])
		if next := cur.children[string(key)]; next != nil {
			cur = next
			continue
		}
		p := pages[i]
		if _, dup := c.byPage[p]; dup || c.kv.Refs(p) < 1 {
			break // a page cached elsewhere, or free or out of range
		}
		if c.maxPages > 0 && len(c.all) >= c.maxPages && c.evict(1, cur) == 0 {
			break
		}
		c.one[0] = p
		if err := c.kv.Ref(c.one); err != nil {
			break
		}
		cur = c.addChild(cur, string(key), p) // evict and Ref leave keyBuf alone
		adopted++
	}
	if cur != &c.root {
		c.touch(cur)
	}
	return adopted
}

// addChild links a new node for page p under parent and returns it.
func (c *Cache) addChild(parent *node, key string, p int32) *node {
	x := &node{parent: parent, key: key, page: p, heapIdx: -1, allIdx: len(c.all), lastUse: c.clock, stateIdx: -1}
	if parent.children == nil {
		parent.children = make(map[string]*node)
	}
	parent.children[key] = x
	if parent.heapIdx >= 0 {
		c.heapRemove(parent.heapIdx)
	}
	c.all = append(c.all, x)
	c.byPage[p] = x
	c.heapPush(x)
	return x
}

// removeLeaf unlinks the childless node x from the tree and the indexes; its
// parent becomes a leaf when x was its last child.
func (c *Cache) removeLeaf(x *node) {
	if x.heapIdx >= 0 {
		c.heapRemove(x.heapIdx)
	}
	parent := x.parent
	delete(parent.children, x.key)
	last := c.all[len(c.all)-1]
	c.all[x.allIdx] = last
	last.allIdx = x.allIdx
	c.all = c.all[:len(c.all)-1]
	delete(c.byPage, x.page)
	c.dropState(x) // a snapshot goes with its page
	x.parent, x.allIdx = nil, -1
	if len(parent.children) == 0 {
		parent.children = nil
		if parent != &c.root {
			c.heapPush(parent)
		}
	}
}

// Evict releases up to n pages that only the cache holds (kv.Refs(p) == 1),
// least recently used leaves first (a node is evictable only when it has no
// children), and returns how many it released. The engine calls it when
// Alloc fails.
func (c *Cache) Evict(n int) int {
	if c.off() {
		return 0
	}
	return c.evict(n, nil)
}

// evict is Evict that never evicts keep (the node an Insert is extending).
func (c *Cache) evict(n int, keep *node) int {
	if n <= 0 {
		return 0
	}
	freed := 0
	var skipped []*node
	for freed < n && len(c.leaves) > 0 {
		x := c.leaves[0]
		refs := c.kv.Refs(x.page)
		if x == keep || refs > 1 {
			c.heapRemove(0)
			skipped = append(skipped, x)
			continue
		}
		if refs == 1 {
			c.one[0] = x.page
			if err := c.kv.Release(c.one); err != nil {
				// Refs said 1, so this cannot fail with a consistent arena;
				// keep the node rather than lose track of a reference.
				c.heapRemove(0)
				skipped = append(skipped, x)
				continue
			}
			freed++
		}
		// refs == 0: the page was freed behind the cache's back; the node is
		// stale and is dropped without a release.
		c.removeLeaf(x)
	}
	for _, x := range skipped {
		c.heapPush(x)
	}
	return freed
}

// Pages returns the number of pages the tree holds a reference on.
func (c *Cache) Pages() int {
	if c.off() {
		return 0
	}
	return len(c.all)
}

// Evictable returns the number of pages Evict could free right now: the nodes
// whose page and whose descendants' pages only the cache holds. It walks
// every node once.
func (c *Cache) Evictable() int {
	if c.off() {
		return 0
	}
	c.marks++
	g := c.marks
	// Mark every node held outside the cache and its ancestors as blocked;
	// stop climbing at a node already marked, so each node is marked once.
	for _, x := range c.all {
		if c.kv.Refs(x.page) <= 1 {
			continue
		}
		for y := x; y != &c.root && y.mark != g; y = y.parent {
			y.mark = g
		}
	}
	count := 0
	for _, x := range c.all {
		if x.mark != g && c.kv.Refs(x.page) == 1 {
			count++
		}
	}
	return count
}

// Reset releases every page the tree holds and empties it. Callers' own
// references (from Match) are untouched.
func (c *Cache) Reset() {
	if c.off() {
		return
	}
	for _, x := range c.all {
		c.one[0] = x.page
		// An error means the page is already free (released behind the
		// cache's back); there is nothing left to release then.
		_ = c.kv.Release(c.one)
		c.dropState(x)
		x.parent, x.children = nil, nil
	}
	clear(c.all)
	c.all = c.all[:0]
	clear(c.leaves)
	c.leaves = c.leaves[:0]
	clear(c.byPage)
	c.root.children = nil
	c.spare = nil
}

// Leaf heap: a binary min-heap on lastUse, each node knowing its index.

func (c *Cache) less(i, j int) bool { return c.leaves[i].lastUse < c.leaves[j].lastUse }

func (c *Cache) swap(i, j int) {
	h := c.leaves
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx = i
	h[j].heapIdx = j
}

func (c *Cache) heapPush(x *node) {
	x.heapIdx = len(c.leaves)
	c.leaves = append(c.leaves, x)
	c.up(x.heapIdx)
}

func (c *Cache) heapRemove(i int) {
	last := len(c.leaves) - 1
	x := c.leaves[i]
	if i != last {
		c.swap(i, last)
	}
	c.leaves[last] = nil
	c.leaves = c.leaves[:last]
	x.heapIdx = -1
	if i != last {
		c.heapFix(i)
	}
}

func (c *Cache) heapFix(i int) {
	if !c.down(i) {
		c.up(i)
	}
}

func (c *Cache) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !c.less(i, p) {
			return
		}
		c.swap(i, p)
		i = p
	}
}

// down sifts element i toward the leaves and reports whether it moved.
func (c *Cache) down(i int) bool {
	start := i
	n := len(c.leaves)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && c.less(r, l) {
			m = r
		}
		if !c.less(m, i) {
			break
		}
		c.swap(i, m)
		i = m
	}
	return i > start
}
