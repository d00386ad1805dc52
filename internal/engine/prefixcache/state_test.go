package prefixcache

import (
	"slices"
	"testing"
)

// checkStates verifies the snapshot index: every node in stated holds a
// snapshot of the cache's size at its own index, and no other node does.
func checkStates(t *testing.T, c *Cache) {
	t.Helper()
	n := 0
	for _, x := range c.all {
		if x.state == nil {
			if x.stateIdx != -1 {
				t.Errorf("node of page %d: no snapshot but index %d", x.page, x.stateIdx)
			}
			continue
		}
		n++
		if x.stateIdx < 0 || x.stateIdx >= len(c.stated) || c.stated[x.stateIdx] != x || len(x.state) != c.stateSize {
			t.Errorf("node of page %d: snapshot index %d of %d, size %d", x.page, x.stateIdx, len(c.stated), len(x.state))
		}
	}
	if n != len(c.stated) {
		t.Errorf("%d nodes hold a snapshot, the index lists %d", n, len(c.stated))
	}
}

// TestStateSnapshots: SetState needs the prefix's pages in the tree and the
// right size; StateAt returns the deepest snapshot within the asked depth on
// the tokens' path, a copy of what was set; eviction drops a node's
// snapshot with its page; the bound drops the least recently used.
func TestStateSnapshots(t *testing.T) {
	kv := newKV(t, 32)
	c := New(kv, testPT, 0)
	toks := seq(100, 6*testPT)
	if c.SetState(toks, 2, make([]float32, 3)) {
		t.Fatal("SetState before KeepStates kept a snapshot")
	}
	c.KeepStates(3, 2)
	pages := alloc(t, kv, 6)
	if c.SetState(toks, 2, []float32{1, 2, 3}) {
		t.Fatal("SetState kept a snapshot of a prefix the tree does not hold")
	}
	if got := c.Insert(toks, pages); got != 6 {
		t.Fatalf("Insert adopted %d of 6", got)
	}
	if c.SetState(toks, 2, []float32{1, 2}) {
		t.Fatal("SetState kept a snapshot of the wrong size")
	}
	st := []float32{1, 2, 3}
	if !c.SetState(toks, 2, st) || !c.SetState(toks, 4, []float32{4, 5, 6}) {
		t.Fatal("SetState refused a held prefix")
	}
	st[0] = 9 // the cache keeps a copy
	checkStates(t, c)
	for _, tc := range []struct {
		blocks, depth int
		state         []float32
	}{{1, 0, nil}, {2, 2, []float32{1, 2, 3}}, {3, 2, []float32{1, 2, 3}}, {4, 4, []float32{4, 5, 6}}, {6, 4, []float32{4, 5, 6}}} {
		d, s := c.StateAt(toks, tc.blocks)
		if d != tc.depth || !slices.Equal(s, tc.state) {
			t.Errorf("StateAt(%d) = %d %v, want %d %v", tc.blocks, d, s, tc.depth, tc.state)
		}
	}
	other := append(seq(100, testPT), seq(900, 5*testPT)...) // shares one page
	if d, _ := c.StateAt(other, 6); d != 0 {
		t.Errorf("StateAt on a path that leaves the snapshots' = %d, want 0", d)
	}
	// A third snapshot over the bound of 2 drops the least recently used:
	// depth 4, as StateAt(2) came last above and StateAt(6) before it
	// returned depth 4.
	c.StateAt(toks, 2)
	if !c.SetState(toks, 5, []float32{7, 8, 9}) {
		t.Fatal("SetState at depth 5 refused")
	}
	if c.States() != 2 {
		t.Errorf("%d snapshots, want the bound 2", c.States())
	}
	if d, _ := c.StateAt(toks, 4); d != 2 {
		t.Errorf("StateAt(4) = %d after the bound dropped depth 4's snapshot, want 2", d)
	}
	checkStates(t, c)
	// Eviction: the caller lets go of its pages; the leaves go first and
	// take their snapshots with them.
	release(t, kv, pages)
	if got := c.Evict(2); got != 2 {
		t.Fatalf("Evict(2) = %d", got)
	}
	if d, s := c.StateAt(toks, 6); d != 2 || !slices.Equal(s, []float32{1, 2, 3}) {
		t.Errorf("after evicting pages 5 and 6: StateAt = %d %v, want 2 [1 2 3]", d, s)
	}
	if c.States() != 1 {
		t.Errorf("%d snapshots after evicting depth 5's page, want 1", c.States())
	}
	checkStates(t, c)
	c.Reset()
	if c.States() != 0 || kv.FreeCount() != 32 {
		t.Errorf("after Reset: %d snapshots, %d free pages", c.States(), kv.FreeCount())
	}
}

// TestStateSnapshotsInert: a nil or inert cache keeps no snapshot.
func TestStateSnapshotsInert(t *testing.T) {
	var c *Cache
	c.KeepStates(3, 2)
	if c.SetState(seq(1, 8), 1, make([]float32, 3)) || c.States() != 0 {
		t.Error("nil cache kept a snapshot")
	}
	if d, s := c.StateAt(seq(1, 8), 2); d != 0 || s != nil {
		t.Error("nil cache returned a snapshot")
	}
}
