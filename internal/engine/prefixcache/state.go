package prefixcache

// State snapshots for models with recurrent state (hybrids such as qwen35).
// Their state after a prefix cannot be rebuilt from the prefix's pages, so
// the engine attaches a copy of a sequence's state to the node at a page
// boundary it chose (SetState), and a later prompt resumes from the deepest
// node on its path that holds one (StateAt) with the pages up to it.
// A snapshot lives as long as its node: evicting the node's page drops it.
// At most maxStates snapshots are kept; a new one beyond that drops the
// least recently used one (its pages stay cached).

// KeepStates makes the cache keep state snapshots of size float32s, at most
// max of them (max <= 0 or size <= 0: none). Call it once, before any
// SetState.
func (c *Cache) KeepStates(size, max int) {
	if c.off() {
		return
	}
	if size <= 0 || max <= 0 {
		size, max = 0, 0
	}
	c.stateSize, c.maxStates = size, max
}

// States returns the number of snapshots held.
func (c *Cache) States() int {
	if c.off() {
		return 0
	}
	return len(c.stated)
}

// find returns the node of tokens' first blocks full pages, or nil when the
// tree does not hold them all.
func (c *Cache) find(tokens []int32, blocks int) *node {
	pt := c.pageTokens
	if blocks <= 0 || blocks > len(tokens)/pt {
		return nil
	}
	cur := &c.root
	for i := range blocks {
		next := cur.children[string(c.pack(tokens[i*pt:(i+1)*pt]))]
		if next == nil {
			return nil
		}
		cur = next
	}
	return cur
}

// SetState attaches a copy of state, the state after tokens[:blocks*
// PageTokens], to the node of that prefix, replacing its snapshot if it has
// one, and reports whether it did: false when snapshots are off, state has
// another size, or the tree does not hold the prefix's pages (Insert them
// first). It marks the node most recently used.
func (c *Cache) SetState(tokens []int32, blocks int, state []float32) bool {
	if c.off() || c.maxStates == 0 || len(state) != c.stateSize {
		return false
	}
	x := c.find(tokens, blocks)
	if x == nil {
		return false
	}
	if x.state == nil {
		if len(c.stated) >= c.maxStates {
			c.dropState(c.oldestState())
		}
		if n := len(c.spare); n > 0 {
			x.state, c.spare = c.spare[n-1], c.spare[:n-1]
		} else {
			x.state = make([]float32, c.stateSize)
		}
		x.stateIdx = len(c.stated)
		c.stated = append(c.stated, x)
	}
	copy(x.state, state)
	c.touch(x)
	x.stateUse = c.clock
	return true
}

// StateAt returns the deepest node at most blocks pages into tokens' path
// that holds a snapshot: its depth in pages and its state, which the caller
// copies before the next call on the cache (the cache keeps it), and marks
// the snapshot most recently used. 0 and nil when none has one. It takes no
// references: the caller has them from Match for the pages it keeps.
func (c *Cache) StateAt(tokens []int32, blocks int) (int, []float32) {
	if c.off() || len(c.stated) == 0 {
		return 0, nil
	}
	pt := c.pageTokens
	blocks = min(blocks, len(tokens)/pt)
	cur := &c.root
	var found *node
	depth := 0
	for i := range blocks {
		next := cur.children[string(c.pack(tokens[i*pt:(i+1)*pt]))]
		if next == nil {
			break
		}
		cur = next
		if cur.state != nil {
			depth, found = i+1, cur
		}
	}
	if found == nil {
		return 0, nil
	}
	c.clock++
	found.stateUse = c.clock
	return depth, found.state
}

// oldestState returns the node whose snapshot was least recently set or
// returned (its own stamp: walking a path stamps every node on it alike).
func (c *Cache) oldestState() *node {
	var old *node
	for _, x := range c.stated {
		if old == nil || x.stateUse < old.stateUse {
			old = x
		}
	}
	return old
}

// dropState drops x's snapshot, if it has one, keeping its buffer for reuse.
func (c *Cache) dropState(x *node) {
	if x == nil || x.stateIdx < 0 {
		return
	}
	last := c.stated[len(c.stated)-1]
	c.stated[x.stateIdx] = last
	last.stateIdx = x.stateIdx
	c.stated[len(c.stated)-1] = nil
	c.stated = c.stated[:len(c.stated)-1]
	c.spare = append(c.spare, x.state)
	x.state, x.stateIdx = nil, -1
}
