package engine

// Prefix caching for models with recurrent state. Pages alone cannot
// resume such a sequence: its state after a prefix depends on every token
// of it, and the state is not paged. So the prefix cache keeps state
// snapshots at page boundaries the engine chooses, in the tree of the first
// layer group (prefixcache.SetState), and a prompt resumes from the deepest
// snapshot within its cached prefix, with the pages up to it; with no
// snapshot there it is recomputed from position 0 (Stats.StateSnapshotMisses).
//
// The boundaries of a sequence (seq.snapAt), chosen at admission:
//   - the end of its prompt's last full page: a later prompt that extends
//     this one (the next turn of a chat, a repeat) resumes there;
//   - the end of the cached prefix its prompt shares with earlier ones
//     when that lies past the snapshot it resumed from: the point where
//     prompts branch (the end of a shared system prompt), so every later
//     prompt with that prefix resumes there.
// Prefill chunks end at those boundaries (chunkLimit), so the slot holds the
// state at the boundary right after the step; the snapshot is a copy made
// on the loop before the next step, and a resuming sequence copies the
// snapshot into its own slot: no slot or snapshot is shared.

// snapPoints returns the boundaries where s's snapshots are taken (see
// above), ascending, after s.computed; none when the model has no state,
// the prefix cache is off, s reports prompt logprobs (not cached) or
// imports its prompt.
func (e *Engine) snapPoints(s *seq, shared int) []int {
	if e.states == nil || e.pc[e.active[0]] == nil || s.req.PromptLogprobs || importsKV(s) {
		return nil
	}
	pt := e.cfg.PageTokens
	var at []int
	if p := shared * pt; p > s.computed {
		at = append(at, p)
	}
	if p := s.nPrompt / pt * pt; p > s.computed && (len(at) == 0 || p > at[0]) {
		at = append(at, p)
	}
	return at
}

// chunkLimit is the most tokens s may be fed in a step of budget tokens: up
// to its next snapshot boundary at most.
func (e *Engine) chunkLimit(s *seq, budget int) int {
	n := min(len(s.tokens)-s.computed, budget)
	if len(s.snapAt) > 0 && s.snapAt[0] > s.computed {
		n = min(n, s.snapAt[0]-s.computed)
	}
	return n
}

// takeSnapshot caches s's pages up to s.computed (a page boundary) and a
// copy of its state there.
func (e *Engine) takeSnapshot(s *seq) {
	g := e.active[0]
	pc := e.pc[g]
	b := s.computed / e.cfg.PageTokens
	if pc == nil || b == 0 || b > len(s.pages[g]) {
		return
	}
	pc.Insert(s.tokens[:b*e.cfg.PageTokens], s.pages[g][:b])
	if !pc.SetState(s.tokens, b, s.state) {
		e.log.Debug("state snapshot not kept: the prefix cache does not hold its pages", "request", s.req.ID, "tokens", s.computed)
	}
}

// countSnapshotHit counts an admission of s on a model with state and a
// prefix cache: a hit when it resumes from a snapshot (blocks pages), a
// miss when its prompt shared cached pages but had no snapshot within them.
func (e *Engine) countSnapshotHit(s *seq, blocks, shared int) {
	if e.states == nil || e.pc[e.active[0]] == nil {
		return
	}
	switch {
	case blocks > 0:
		e.mu.Lock()
		e.stats.StateSnapshotHits++
		e.mu.Unlock()
	case shared > 0:
		e.mu.Lock()
		e.stats.StateSnapshotMisses++
		e.mu.Unlock()
		e.log.Debug("prefix cached without a state snapshot: recomputing from position 0", "request", s.req.ID, "cached_pages", shared)
	}
}
