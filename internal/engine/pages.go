package engine

import (
	"slices"

	"tandem/internal/engine/kvcache"
	"tandem/internal/invariant"
)

// KV layer groups (see kvcache): a model with sliding-window layers keeps
// them in a window group with its own page pool, and a sequence holds one
// page table per group (seq.pages). As the sequence advances, its
// window-group pages that lie wholly before the window of its next step
// are released (slide), so it holds at most WindowPagesMax of them between
// steps however long it gets; the global group's table grows with the
// sequence as it always did. A model without windows has the global group
// only and behaves exactly as before. A model whose every layer is
// windowed has only the window group.
//
// One cache with two pools, rather than one cache per group, keeps the
// forward pass's single kvcache.Cache argument and its page views
// (KPage/KRow by layer) as they were: the group of a layer picks the
// pool and the table (model.Seq.WinPages).

// groups returns the groups that have layers, global first.
func (e *Engine) groups() []int { return e.active }

// activeGroups lists the groups of kc that have layers.
func activeGroups(kc kvcache.Config) []int {
	var gs []int
	for g := range kvcache.Groups {
		if kc.GroupLayers(g) > 0 {
			gs = append(gs, g)
		}
	}
	return gs
}

// slide releases s's window-group pages that lie wholly before the window
// of its next step (position s.computed), first offering the full prompt
// pages among them to the window group's prefix cache, and marks their
// slots -1.
func (e *Engine) slide(s *seq) {
	g := kvcache.GroupWindow
	tab := s.pages[g]
	if len(tab) == 0 { // no window group, or nothing held yet
		return
	}
	kc := e.kv.Config()
	first := min(kc.FirstNeeded(g, s.computed), len(tab))
	if first <= s.slid {
		return
	}
	if pc := e.pc[g]; pc != nil && !s.req.PromptLogprobs {
		// prompt pages only, as cachePrefix offers the global ones
		if n := min(first, s.nPrompt/kc.PageTokens); n > 0 {
			pc.Insert(s.tokens[:n*kc.PageTokens], tab[:n])
		}
	}
	if err := e.kv.Pool(g).Release(kvcache.Held(tab[s.slid:first])); err != nil {
		invariant.Failf("engine", "kv page accounting broken: request %q sliding its window: %v", s.req.ID, err)
	}
	for i := s.slid; i < first; i++ {
		tab[i] = -1
	}
	s.slid = first
}

// WindowPagesHeld returns the window-group pages a sequence holds between
// steps at most (kvcache.Config.WindowPagesMax), or 0 when the engine's
// cache has no window group.
func (e *Engine) WindowPagesHeld() int {
	kc := e.kv.Config()
	if kc.GroupLayers(kvcache.GroupWindow) == 0 {
		return 0
	}
	return kc.WindowPagesMax()
}

// match looks s's prompt up in the prefix caches of every group and
// returns the tables of the longest prefix all of them hold (each page
// with one reference for s), window-group pages before that prefix's
// window already released and marked -1. nil tables: no hit. On a model
// with recurrent state the hit is cut back to the deepest state snapshot
// within it (a state cannot be rebuilt from pages), whose state match
// copies into s's slot; shared is the hit in pages before that cut.
func (e *Engine) match(s *seq) (t kvcache.Tables, blocks, shared int) {
	kc := e.kv.Config()
	limit := (len(s.tokens) - 1) / kc.PageTokens
	blocks = -1
	for _, g := range e.groups() {
		if e.pc[g] == nil {
			return kvcache.Tables{}, 0, 0
		}
		t[g] = e.pc[g].Match(s.tokens, limit)
		if blocks < 0 || len(t[g]) < blocks {
			blocks = len(t[g])
		}
	}
	blocks = max(blocks, 0)
	shared = blocks
	if e.states != nil && blocks > 0 {
		var snap []float32
		blocks, snap = e.pc[e.active[0]].StateAt(s.tokens, blocks)
		if blocks > 0 {
			copy(s.state, snap)
		}
	}
	for _, g := range e.groups() {
		tab := t[g]
		cut := kc.FirstNeeded(g, blocks*kc.PageTokens)
		drop := append(slices.Clone(tab[min(blocks, len(tab)):]), tab[:min(cut, blocks)]...)
		if len(drop) > 0 {
			_ = e.kv.Pool(g).Release(drop) // references Match just took
		}
		tab = tab[:min(blocks, len(tab))]
		for i := range min(cut, len(tab)) {
			tab[i] = -1
		}
		t[g] = tab
	}
	if blocks == 0 {
		return kvcache.Tables{}, 0, shared
	}
	return t, blocks, shared
}

// admitPlan is what admit must allocate in each group: the new pages and
// where they go in the table.
type admitPlan struct {
	need [kvcache.Groups]int // new pages per group
	end  [kvcache.Groups]int // table length after allocation
}

// plan computes the pages s needs at admission, given the prefix-cache
// hit of blocks pages: global pages for the whole sequence, window pages
// from the first page the next step reads to the end of what its first
// step can feed (MaxBatchTokens; the whole prompt when its K/V is
// imported, which then decodes at once).
func (e *Engine) plan(s *seq, t kvcache.Tables, blocks int) admitPlan {
	kc := e.kv.Config()
	var p admitPlan
	computed := blocks * kc.PageTokens
	imported := importsKV(s)
	for _, g := range e.groups() {
		end := len(s.tokens)
		if g == kvcache.GroupWindow && !imported {
			end = min(end, computed+e.cfg.MaxBatchTokens)
		}
		p.end[g] = kc.PagesFor(end)
		from := max(len(t[g]), kc.FirstNeeded(g, computed))
		if imported {
			from = max(from, kc.FirstNeeded(g, len(s.tokens)))
		}
		p.need[g] = max(0, p.end[g]-from)
	}
	return p
}

// importsKV reports whether s's admission is for K/V written from outside
// (Request.Import, first admission): a preempted imported sequence is
// recomputed from its tokens like any other.
func importsKV(s *seq) bool { return s.req.Import != nil && s.preempt == 0 }

// extend appends new pages to s's group-g table so it has end entries,
// -1 in the slots before the first new page.
func extend(tab []int32, end int, pages []int32) []int32 {
	for len(tab)+len(pages) < end {
		tab = append(tab, -1)
	}
	return append(tab, pages...)
}

// releaseTables drops s's references on every held page of t.
func (e *Engine) releaseTables(id string, t kvcache.Tables) {
	for g, tab := range t {
		if held := kvcache.Held(tab); len(held) > 0 {
			if err := e.kv.Pool(g).Release(held); err != nil {
				// Broken accounting is a bug, not an input error.
				invariant.Failf("engine", "kv page accounting broken: request %q releasing its %s pages: %v", id, kvcache.GroupName(g), err)
			}
		}
	}
}

// pagesUsed returns the pages held in each group and in all.
func (e *Engine) pagesUsed() (global, window int) {
	kc := e.kv.Config()
	global = kc.Pages - e.kv.Pool(kvcache.GroupGlobal).FreeCount()
	window = kc.WindowPages - e.kv.Pool(kvcache.GroupWindow).FreeCount()
	return global, window
}

// kvBytes returns the K/V bytes of global global-group pages and window
// window-group pages.
func (e *Engine) kvBytes(global, window int) int64 {
	kc := e.kv.Config()
	per := int64(2 * kc.PageBytes())
	return per * (int64(global)*int64(kc.GroupLayers(kvcache.GroupGlobal)) + int64(window)*int64(kc.GroupLayers(kvcache.GroupWindow)))
}
