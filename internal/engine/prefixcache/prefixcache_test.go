package prefixcache

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/tensor"
)

const testPT = 4 // tokens per page in the tests

func newKV(t testing.TB, pages int) *kvcache.Cache {
	t.Helper()
	kv, err := kvcache.New(kvcache.Config{Layers: 1, KVHeads: 1, HeadDim: 1, PageTokens: testPT, Pages: pages, DType: tensor.F32})
	if err != nil {
		t.Fatalf("kvcache.New: %v", err)
	}
	return kv
}

func alloc(t testing.TB, kv *kvcache.Cache, n int) []int32 {
	t.Helper()
	p, err := kv.Alloc(n)
	if err != nil {
		t.Fatalf("Alloc(%d): %v", n, err)
	}
	return p
}

func release(t testing.TB, kv *kvcache.Cache, pages []int32) {
	t.Helper()
	if err := kv.Release(pages); err != nil {
		t.Fatalf("Release(%v): %v", pages, err)
	}
}

// seq returns n tokens first, first+1, ...
func seq(first, n int) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = int32(first + i)
	}
	return s
}

func refs(kv *kvcache.Cache, pages []int32) []int {
	r := make([]int, len(pages))
	for i, p := range pages {
		r[i] = kv.Refs(p)
	}
	return r
}

// checkTree verifies the tree's structure and indexes, and returns the set of
// pages it holds.
func checkTree(t *testing.T, c *Cache) map[int32]bool {
	t.Helper()
	held := map[int32]bool{}
	stack := []*node{&c.root}
	count := 0
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if x.children != nil && len(x.children) == 0 {
			t.Errorf("node of page %d has an empty, non-nil children map", x.page)
		}
		for k, ch := range x.children {
			count++
			switch {
			case ch.parent != x:
				t.Errorf("node of page %d: parent is not the node it hangs under", ch.page)
			case ch.key != k || len(k) != c.pageTokens*tokenBytes:
				t.Errorf("node of page %d: key %q under map key %q", ch.page, ch.key, k)
			case ch.lastUse > x.lastUse && x != &c.root:
				t.Errorf("node of page %d used at %d after its parent (page %d, %d)", ch.page, ch.lastUse, x.page, x.lastUse)
			case c.byPage[ch.page] != ch:
				t.Errorf("byPage[%d] does not point at its node", ch.page)
			case ch.allIdx < 0 || ch.allIdx >= len(c.all) || c.all[ch.allIdx] != ch:
				t.Errorf("node of page %d: allIdx %d is wrong", ch.page, ch.allIdx)
			}
			if held[ch.page] {
				t.Errorf("page %d is in the tree twice", ch.page)
			}
			held[ch.page] = true
			isLeaf := len(ch.children) == 0
			inHeap := ch.heapIdx >= 0 && ch.heapIdx < len(c.leaves) && c.leaves[ch.heapIdx] == ch
			if isLeaf != inHeap {
				t.Errorf("node of page %d: leaf %v but in heap %v", ch.page, isLeaf, inHeap)
			}
			stack = append(stack, ch)
		}
	}
	if count != len(c.all) || count != len(c.byPage) || count != c.Pages() {
		t.Errorf("tree has %d nodes, all %d, byPage %d, Pages() %d", count, len(c.all), len(c.byPage), c.Pages())
	}
	for i := 1; i < len(c.leaves); i++ {
		if c.leaves[i].lastUse < c.leaves[(i-1)/2].lastUse {
			t.Errorf("leaf heap order broken at %d", i)
		}
	}
	if c.root.heapIdx != -1 {
		t.Errorf("root is in the leaf heap")
	}
	return held
}

func TestMatchEmpty(t *testing.T) {
	kv := newKV(t, 8)
	c := New(kv, testPT, 0)
	for _, tc := range []struct {
		tokens []int32
		limit  int
	}{{nil, 5}, {seq(1, 12), 3}, {seq(1, 3), 1}} {
		if got := c.Match(tc.tokens, tc.limit); got != nil {
			t.Errorf("Match(%v, %d) on empty cache = %v, want nil", tc.tokens, tc.limit, got)
		}
	}
	if c.PageTokens() != testPT {
		t.Errorf("PageTokens() = %d, want %d", c.PageTokens(), testPT)
	}
	if c.Pages() != 0 || c.Evictable() != 0 || c.Evict(5) != 0 {
		t.Errorf("empty cache: Pages %d, Evictable %d, Evict(5) %d, want 0 0 0", c.Pages(), c.Evictable(), c.Evict(5))
	}
}

func TestInsertMatchRefs(t *testing.T) {
	kv := newKV(t, 8)
	c := New(kv, testPT, 0)
	toks := seq(1, 13) // 3 full pages and one token
	pages := alloc(t, kv, 4)
	if got := refs(kv, pages[:3]); !slices.Equal(got, []int{1, 1, 1}) {
		t.Fatalf("refs after Alloc = %v, want [1 1 1]", got)
	}
	if got := c.Insert(toks, pages[:3]); got != 3 {
		t.Errorf("Insert = %d, want 3", got)
	}
	if got := refs(kv, pages); !slices.Equal(got, []int{2, 2, 2, 1}) {
		t.Errorf("refs after Insert = %v, want [2 2 2 1]", got)
	}
	m := c.Match(toks, (len(toks)-1)/testPT)
	if !slices.Equal(m, pages[:3]) {
		t.Errorf("Match = %v, want %v", m, pages[:3])
	}
	if got := refs(kv, pages); !slices.Equal(got, []int{3, 3, 3, 1}) {
		t.Errorf("refs after Match = %v, want [3 3 3 1]", got)
	}
	if c.Pages() != 3 {
		t.Errorf("Pages() = %d, want 3", c.Pages())
	}
	checkTree(t, c)
	release(t, kv, m)
	release(t, kv, pages)
	if got := refs(kv, pages); !slices.Equal(got, []int{1, 1, 1, 0}) {
		t.Errorf("refs after callers release = %v, want [1 1 1 0]", got)
	}
	c.Reset()
	if kv.FreeCount() != 8 || c.Pages() != 0 {
		t.Errorf("after Reset: FreeCount %d, Pages %d, want 8 0", kv.FreeCount(), c.Pages())
	}
}

func TestMatchPrefixes(t *testing.T) {
	kv := newKV(t, 8)
	c := New(kv, testPT, 0)
	base := seq(1, 12) // pages [1..4] [5..8] [9..12]
	pages := alloc(t, kv, 3)
	if got := c.Insert(base, pages); got != 3 {
		t.Fatalf("Insert = %d, want 3", got)
	}
	release(t, kv, pages)
	with := func(i int, v int32) []int32 {
		s := slices.Clone(base)
		s[i] = v
		return s
	}
	tests := []struct {
		name   string
		tokens []int32
		limit  int
		want   int // pages
	}{
		{"exact", base, 3, 3},
		{"limit 2", base, 2, 2},
		{"limit 1", base, 1, 1},
		{"limit 0", base, 0, 0},
		{"negative limit", base, -1, 0},
		{"limit above pages", base, 100, 3},
		{"engine limit on exact length", base, (len(base) - 1) / testPT, 2},
		{"longer prompt", append(slices.Clone(base), 13, 14, 15, 16, 17), 100, 3},
		{"partial third page", base[:11], 100, 2},
		{"partial first page", base[:3], 100, 0},
		{"diverges mid second page", with(6, 99), 100, 1},
		{"diverges at last token", with(11, 99), 100, 2},
		{"diverges at first token", with(0, 99), 100, 0},
		{"diverges at start of third page", with(8, 99), 100, 2},
	}
	for _, tc := range tests {
		before := refs(kv, pages)
		m := c.Match(tc.tokens, tc.limit)
		want := pages[:tc.want]
		if tc.want == 0 {
			want = nil
		}
		if !slices.Equal(m, want) || (tc.want == 0 && m != nil) {
			t.Errorf("%s: Match(%v, %d) = %v, want %v", tc.name, tc.tokens, tc.limit, m, want)
		}
		for i, p := range pages {
			wantRefs := before[i]
			if i < len(m) {
				wantRefs++
			}
			if kv.Refs(p) != wantRefs {
				t.Errorf("%s: Refs(%d) = %d, want %d", tc.name, p, kv.Refs(p), wantRefs)
			}
		}
		if len(m) > 0 {
			release(t, kv, m)
		}
	}
	checkTree(t, c)
}

func TestDivergentSuffixSharesFullPages(t *testing.T) {
	kv := newKV(t, 16)
	c := New(kv, testPT, 0)
	a := seq(1, 12)
	b := slices.Clone(a)
	b[5] = 99 // diverges inside the second page
	pa := alloc(t, kv, 3)
	if got := c.Insert(a, pa); got != 3 {
		t.Fatalf("Insert(a) = %d, want 3", got)
	}
	m := c.Match(b, 3)
	if !slices.Equal(m, pa[:1]) {
		t.Fatalf("Match(b) = %v, want %v", m, pa[:1])
	}
	pb := append(m, alloc(t, kv, 2)...)
	if got := c.Insert(b, pb); got != 2 {
		t.Errorf("Insert(b) = %d, want 2 (first page shared)", got)
	}
	if c.Pages() != 5 {
		t.Errorf("Pages() = %d, want 5", c.Pages())
	}
	for _, tc := range []struct {
		tokens []int32
		want   []int32
	}{{a, pa}, {b, pb}} {
		m := c.Match(tc.tokens, 3)
		if !slices.Equal(m, tc.want) {
			t.Errorf("Match(%v) = %v, want %v", tc.tokens, m, tc.want)
		}
		release(t, kv, m)
	}
	checkTree(t, c)
}

func TestInsertDoesNotAdoptDuplicates(t *testing.T) {
	kv := newKV(t, 16)
	c := New(kv, testPT, 0)
	toks := seq(1, 12)
	p := alloc(t, kv, 3)
	if got := c.Insert(toks, p); got != 3 {
		t.Fatalf("Insert = %d, want 3", got)
	}
	q := alloc(t, kv, 3)
	if got := c.Insert(toks, q); got != 0 {
		t.Errorf("Insert of cached prefix with other pages = %d, want 0", got)
	}
	if got := refs(kv, q); !slices.Equal(got, []int{1, 1, 1}) {
		t.Errorf("refs of duplicate pages = %v, want [1 1 1]", got)
	}
	if got := refs(kv, p); !slices.Equal(got, []int{2, 2, 2}) {
		t.Errorf("refs of cached pages = %v, want [2 2 2]", got)
	}
	if m := c.Match(toks, 3); !slices.Equal(m, p) {
		t.Errorf("Match = %v, want the first pages %v", m, p)
	}

	// Extending a cached prefix adopts only the new pages.
	longer := seq(1, 20)
	r := append(slices.Clone(q), alloc(t, kv, 2)...)
	if got := c.Insert(longer, r); got != 2 {
		t.Errorf("Insert of extended prefix = %d, want 2", got)
	}
	if got := refs(kv, r); !slices.Equal(got, []int{1, 1, 1, 2, 2}) {
		t.Errorf("refs after extension = %v, want [1 1 1 2 2]", got)
	}
	if m := c.Match(longer, 5); !slices.Equal(m, append(slices.Clone(p), r[3:]...)) {
		t.Errorf("Match(longer) = %v, want %v", m, append(slices.Clone(p), r[3:]...))
	}
	checkTree(t, c)
}

func TestInsertRefusesBadPages(t *testing.T) {
	kv := newKV(t, 8)
	c := New(kv, testPT, 0)
	p := alloc(t, kv, 2)
	if got := c.Insert(seq(1, 8), p); got != 2 {
		t.Fatalf("Insert = %d, want 2", got)
	}
	q := alloc(t, kv, 1)
	free := int32(-1)
	for i := range int32(8) {
		if kv.Refs(i) == 0 {
			free = i
			break
		}
	}
	tests := []struct {
		name   string
		tokens []int32
		pages  []int32
		want   int
	}{
		{"page already cached under another prefix", seq(100, 8), []int32{p[1], q[0]}, 0},
		{"second page already cached elsewhere", seq(200, 8), []int32{q[0], p[0]}, 1},
		{"free page", seq(300, 4), []int32{free}, 0},
		{"out of range page", seq(400, 4), []int32{1000}, 0},
		{"negative page", seq(500, 4), []int32{-3}, 0},
		{"tokens cover no full page", seq(600, 3), []int32{q[0]}, 0},
		{"no pages", seq(700, 8), nil, 0},
	}
	for _, tc := range tests {
		before := c.Pages()
		if got := c.Insert(tc.tokens, tc.pages); got != tc.want {
			t.Errorf("%s: Insert(%v, %v) = %d, want %d", tc.name, tc.tokens, tc.pages, got, tc.want)
		}
		if c.Pages() != before+tc.want {
			t.Errorf("%s: Pages() = %d, want %d", tc.name, c.Pages(), before+tc.want)
		}
	}
	if kv.Refs(free) != 0 {
		t.Errorf("Refs(free page %d) = %d, want 0", free, kv.Refs(free))
	}
	// Only as many pages as the tokens cover in full are adopted.
	r := alloc(t, kv, 2)
	if got := c.Insert(seq(800, 7), r); got != 1 {
		t.Errorf("Insert(7 tokens, 2 pages) = %d, want 1", got)
	}
	checkTree(t, c)
}

// evictTree builds A->B->C, A->D, E (each one page), inserted in that order,
// with every caller reference released.
func evictTree(t *testing.T, kv *kvcache.Cache, c *Cache) (seq1, seq2, seq3 []int32, a, b, cc, d, e int32) {
	t.Helper()
	seq1 = seq(1, 12)                       // A B C
	seq2 = append(seq(1, 4), seq(50, 4)...) // A D
	seq3 = seq(90, 4)                       // E
	p1, p2d, p3 := alloc(t, kv, 3), alloc(t, kv, 1), alloc(t, kv, 1)
	for _, in := range []struct {
		toks, pages []int32
		want        int
	}{{seq1, p1, 3}, {seq2, []int32{p1[0], p2d[0]}, 1}, {seq3, p3, 1}} {
		if got := c.Insert(in.toks, in.pages); got != in.want {
			t.Fatalf("Insert(%v) = %d, want %d", in.toks, got, in.want)
		}
	}
	release(t, kv, p1)
	release(t, kv, p2d)
	release(t, kv, p3)
	return seq1, seq2, seq3, p1[0], p1[1], p1[2], p2d[0], p3[0]
}

func TestEvictLRUOrder(t *testing.T) {
	kv := newKV(t, 8)
	c := New(kv, testPT, 0)
	_, _, _, a, b, cc, d, e := evictTree(t, kv, c)
	if c.Evictable() != 5 {
		t.Errorf("Evictable() = %d, want 5", c.Evictable())
	}
	// C is the oldest leaf; B becomes a leaf as old as C; A was touched by
	// seq2, so D goes before it; E is the newest.
	order := []int32{cc, b, d, a, e}
	for i, want := range order {
		free := kv.FreeCount()
		if got := c.Evict(1); got != 1 {
			t.Fatalf("Evict(1) #%d = %d, want 1", i, got)
		}
		if kv.Refs(want) != 0 || kv.FreeCount() != free+1 {
			t.Errorf("Evict(1) #%d freed the wrong page: Refs(%d) = %d, FreeCount %d, want 0, %d", i, want, kv.Refs(want), kv.FreeCount(), free+1)
		}
		if c.Pages() != len(order)-i-1 {
			t.Errorf("Pages() after %d evictions = %d, want %d", i+1, c.Pages(), len(order)-i-1)
		}
		checkTree(t, c)
	}
	if got := c.Evict(1); got != 0 {
		t.Errorf("Evict(1) on empty tree = %d, want 0", got)
	}
	if kv.FreeCount() != 8 {
		t.Errorf("FreeCount() = %d, want 8", kv.FreeCount())
	}
}

func TestEvictTouchReordersLRU(t *testing.T) {
	kv := newKV(t, 8)
	c := New(kv, testPT, 0)
	seq1, _, _, a, b, cc, d, e := evictTree(t, kv, c)
	m := c.Match(seq1, 3) // A B C now most recent
	release(t, kv, m)
	order := []int32{d, e, cc, b, a}
	for i, want := range order {
		if got := c.Evict(1); got != 1 || kv.Refs(want) != 0 {
			t.Errorf("Evict(1) #%d = %d, Refs(%d) = %d, want 1, 0", i, got, want, kv.Refs(want))
		}
	}
}

func TestEvictSparesLivePages(t *testing.T) {
	kv := newKV(t, 8)
	c := New(kv, testPT, 0)
	seq1, _, _, a, b, cc, d, e := evictTree(t, kv, c)
	live := c.Match(seq1, 2) // a live sequence holds A and B
	if !slices.Equal(live, []int32{a, b}) {
		t.Fatalf("Match(seq1, 2) = %v, want [%d %d]", live, a, b)
	}
	if got := c.Evictable(); got != 3 {
		t.Errorf("Evictable() with A, B live = %d, want 3 (C, D, E)", got)
	}
	for _, n := range []int{0, -1} {
		if got := c.Evict(n); got != 0 {
			t.Errorf("Evict(%d) = %d, want 0", n, got)
		}
	}
	if got := c.Evict(100); got != 3 {
		t.Errorf("Evict(100) = %d, want 3", got)
	}
	for _, p := range []int32{cc, d, e} {
		if kv.Refs(p) != 0 {
			t.Errorf("Refs(%d) = %d after eviction, want 0", p, kv.Refs(p))
		}
	}
	for _, p := range live {
		if kv.Refs(p) != 2 {
			t.Errorf("Refs(live page %d) = %d, want 2", p, kv.Refs(p))
		}
	}
	if c.Pages() != 2 || c.Evictable() != 0 || c.Evict(100) != 0 {
		t.Errorf("with only live pages: Pages %d, Evictable %d, want 2 0 and no eviction", c.Pages(), c.Evictable())
	}
	checkTree(t, c)
	release(t, kv, live)
	if got := c.Evictable(); got != 2 {
		t.Errorf("Evictable() after release = %d, want 2", got)
	}
	if got := c.Evict(100); got != 2 {
		t.Errorf("Evict(100) after release = %d, want 2", got)
	}
	if kv.FreeCount() != 8 {
		t.Errorf("FreeCount() = %d, want 8", kv.FreeCount())
	}
}

func TestMaxPages(t *testing.T) {
	kv := newKV(t, 16)
	c := New(kv, testPT, 3)
	p1 := alloc(t, kv, 2)
	if got := c.Insert(seq(1, 8), p1); got != 2 {
		t.Fatalf("Insert(first) = %d, want 2", got)
	}
	release(t, kv, p1)
	p2 := alloc(t, kv, 2)
	if got := c.Insert(seq(100, 8), p2); got != 2 {
		t.Errorf("Insert(second) = %d, want 2 (evicting the oldest leaf)", got)
	}
	if c.Pages() != 3 {
		t.Errorf("Pages() = %d, want 3", c.Pages())
	}
	if kv.Refs(p1[1]) != 0 || kv.Refs(p1[0]) != 1 {
		t.Errorf("Refs of first pages = %d, %d, want 1, 0 (leaf evicted)", kv.Refs(p1[0]), kv.Refs(p1[1]))
	}
	// p2 is still held by its sequence; only p1[0] can make room.
	p3 := alloc(t, kv, 2)
	if got := c.Insert(seq(200, 8), p3); got != 1 {
		t.Errorf("Insert(third) = %d, want 1 (one evictable page)", got)
	}
	if c.Pages() != 3 {
		t.Errorf("Pages() = %d, want 3", c.Pages())
	}
	checkTree(t, c)
}

func TestMaxPagesKeepsInsertPath(t *testing.T) {
	kv := newKV(t, 16)
	c := New(kv, testPT, 1)
	p := alloc(t, kv, 1)
	if got := c.Insert(seq(1, 4), p); got != 1 {
		t.Fatalf("Insert(1 page) = %d, want 1", got)
	}
	release(t, kv, p) // the cached page is now a cache-only leaf
	// Extending that prefix needs room, but the only evictable leaf is the
	// node the new page would hang under: it must stay, and nothing fits.
	q := alloc(t, kv, 2)
	if got := c.Insert(seq(1, 8), q); got != 0 {
		t.Errorf("Insert(2 pages, 1 cached, bound 1) = %d, want 0", got)
	}
	if kv.Refs(p[0]) != 1 {
		t.Errorf("Refs(cached page) = %d, want 1", kv.Refs(p[0]))
	}
	if got := refs(kv, q); !slices.Equal(got, []int{1, 1}) {
		t.Errorf("refs of caller pages = %v, want [1 1]", got)
	}
	release(t, kv, q)
	m := c.Match(seq(1, 12), 3)
	if !slices.Equal(m, p) {
		t.Errorf("Match = %v, want %v", m, p)
	}
	checkTree(t, c)
}

func TestInert(t *testing.T) {
	kv := newKV(t, 4)
	for _, tc := range []struct {
		name string
		c    *Cache
	}{
		{"nil cache", nil},
		{"nil kv", New(nil, testPT, 0)},
		{"zero page tokens", New(kv, 0, 0)},
		{"negative page tokens", New(kv, -4, 0)},
		{"page tokens too large", New(kv, MaxPageTokens+1, 0)},
	} {
		p := alloc(t, kv, 1)
		if got := tc.c.Insert(seq(1, 8), p); got != 0 {
			t.Errorf("%s: Insert = %d, want 0", tc.name, got)
		}
		if got := tc.c.Match(seq(1, 8), 2); got != nil {
			t.Errorf("%s: Match = %v, want nil", tc.name, got)
		}
		if tc.c.Pages() != 0 || tc.c.Evictable() != 0 || tc.c.Evict(3) != 0 {
			t.Errorf("%s: Pages %d Evictable %d, want 0 0", tc.name, tc.c.Pages(), tc.c.Evictable())
		}
		tc.c.Reset()
		release(t, kv, p)
	}
	if kv.FreeCount() != 4 {
		t.Errorf("FreeCount() = %d, want 4", kv.FreeCount())
	}
}

// TestOverReleasedPage covers a caller that releases a page it does not hold,
// freeing a page the tree references: Match must not hand it out, and Evict
// drops the stale node without releasing it again.
func TestOverReleasedPage(t *testing.T) {
	kv := newKV(t, 4)
	c := New(kv, testPT, 0)
	p := alloc(t, kv, 1)
	c.Insert(seq(1, 4), p)
	release(t, kv, p)
	release(t, kv, p) // the bug: the tree's reference is gone
	if m := c.Match(seq(1, 8), 1); m != nil {
		t.Errorf("Match of a freed page = %v, want nil", m)
	}
	if got := c.Evictable(); got != 0 {
		t.Errorf("Evictable() = %d, want 0", got)
	}
	if got := c.Evict(1); got != 0 {
		t.Errorf("Evict(1) = %d, want 0", got)
	}
	if c.Pages() != 0 || kv.FreeCount() != 4 {
		t.Errorf("Pages %d FreeCount %d, want 0 4", c.Pages(), kv.FreeCount())
	}
}

// strictPages records every error the arena returns to the cache.
type strictPages struct {
	kv   *kvcache.Cache
	errs []error
}

func (s *strictPages) Ref(p []int32) error {
	err := s.kv.Ref(p)
	if err != nil {
		s.errs = append(s.errs, err)
	}
	return err
}

func (s *strictPages) Release(p []int32) error {
	err := s.kv.Release(p)
	if err != nil {
		s.errs = append(s.errs, err)
	}
	return err
}

func (s *strictPages) Refs(p int32) int { return s.kv.Refs(p) }

func TestRandomAccounting(t *testing.T) {
	const arena = 48
	for _, maxPages := range []int{0, 12} {
		for seed := range uint64(6) {
			t.Run(fmt.Sprintf("max%d/seed%d", maxPages, seed), func(t *testing.T) {
				randomAccounting(t, arena, maxPages, seed)
			})
		}
	}
}

func randomAccounting(t *testing.T, arena, maxPages int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	kv := newKV(t, arena)
	sp := &strictPages{kv: kv}
	c := New(sp, testPT, maxPages)
	c.KeepStates(1, 5)
	// a snapshot's one float is the id of the prefix it was set for
	prefixIDs := map[string]float32{}
	idOf := func(p string) float32 {
		if _, ok := prefixIDs[p]; !ok {
			prefixIDs[p] = float32(len(prefixIDs) + 1)
		}
		return prefixIDs[p]
	}
	held := map[int32]int{}        // caller references per page
	contents := map[int32]string{} // the prefix whose last page a page holds
	var live [][]int32

	randToks := func(n int) []int32 {
		s := make([]int32, n)
		for i := range s {
			s[i] = int32(rng.IntN(3))
		}
		return s
	}
	bases := make([][]int32, 4)
	for i := range bases {
		bases[i] = randToks(rng.IntN(17))
	}
	prefix := func(toks []int32, pages int) string { return fmt.Sprint(toks[:pages*testPT]) }
	take := func(pages []int32) {
		for _, p := range pages {
			held[p]++
		}
	}
	drop := func(pages []int32) {
		if err := kv.Release(pages); err != nil {
			t.Fatalf("caller Release(%v): %v", pages, err)
		}
		for _, p := range pages {
			held[p]--
		}
	}

	for step := range 1500 {
		switch op := rng.IntN(10); {
		case op < 6: // a request
			toks := append(slices.Clone(bases[rng.IntN(len(bases))]), randToks(1+rng.IntN(12))...)
			limit := (len(toks) - 1) / testPT
			m := c.Match(toks, limit)
			take(m)
			if len(m) > limit {
				t.Fatalf("step %d: Match returned %d pages over limit %d", step, len(m), limit)
			}
			for i, p := range m {
				if contents[p] != prefix(toks, i+1) {
					t.Fatalf("step %d: Match page %d (#%d) holds %s, want %s", step, p, i, contents[p], prefix(toks, i+1))
				}
			}
			if d, st := c.StateAt(toks, len(m)); d > len(m) || (d > 0) != (st != nil) || (d > 0 && st[0] != idOf(prefix(toks, d))) {
				t.Fatalf("step %d: StateAt(%d) = %d %v, want a snapshot of its own prefix within the match", step, len(m), d, st)
			}
			full := append(toks, randToks(rng.IntN(6))...) // prompt plus generated tokens
			need := (len(full)+testPT-1)/testPT - len(m)
			fresh, err := kv.Alloc(need)
			if errors.Is(err, kvcache.ErrNoPages) {
				want := need - kv.FreeCount()
				ev := c.Evictable()
				if got := c.Evict(want); got != min(want, ev) {
					t.Fatalf("step %d: Evict(%d) = %d with %d evictable", step, want, got, ev)
				}
				fresh, err = kv.Alloc(need)
			}
			if err != nil {
				drop(m)
				continue
			}
			take(fresh)
			table := append(m, fresh...)
			for j := len(m); j < len(table); j++ {
				if (j+1)*testPT <= len(full) {
					contents[table[j]] = prefix(full, j+1)
				} else {
					contents[table[j]] = "partial"
				}
			}
			nfull := len(full) / testPT
			adopted := c.Insert(full, table[:nfull])
			if adopted < 0 || adopted > nfull-len(m) {
				t.Fatalf("step %d: Insert adopted %d of %d new full pages", step, adopted, nfull-len(m))
			}
			if b := rng.IntN(nfull + 1); b > 0 {
				c.SetState(full, b, []float32{idOf(prefix(full, b))})
			}
			if maxPages == 0 && nfull > 0 {
				// Without a bound every full page is now cached.
				again := c.Match(full, nfull)
				if len(again) != nfull {
					t.Fatalf("step %d: Match after Insert = %d pages, want %d", step, len(again), nfull)
				}
				if err := kv.Release(again); err != nil {
					t.Fatalf("step %d: Release: %v", step, err)
				}
			}
			live = append(live, table)
			if len(live) > 4 {
				drop(live[0])
				live = live[1:]
			}
		case op < 8: // a sequence ends
			if len(live) > 0 {
				i := rng.IntN(len(live))
				drop(live[i])
				live = slices.Delete(live, i, i+1)
			}
		default: // memory pressure
			n := rng.IntN(6)
			ev := c.Evictable()
			if got := c.Evict(n); got != min(n, ev) {
				t.Fatalf("step %d: Evict(%d) = %d with %d evictable", step, n, got, ev)
			}
		}
		inTree := checkTree(t, c)
		checkStates(t, c)
		if c.States() > 5 {
			t.Fatalf("step %d: %d snapshots over the bound 5", step, c.States())
		}
		if maxPages > 0 && c.Pages() > maxPages {
			t.Fatalf("step %d: Pages() = %d over bound %d", step, c.Pages(), maxPages)
		}
		for p := range int32(arena) {
			want := held[p]
			if inTree[p] {
				want++
			}
			if kv.Refs(p) != want {
				t.Fatalf("step %d: Refs(%d) = %d, want %d (caller %d, tree %v)", step, p, kv.Refs(p), want, held[p], inTree[p])
			}
		}
		if len(sp.errs) > 0 {
			t.Fatalf("step %d: arena errors seen by the cache: %v", step, sp.errs)
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	for _, table := range live {
		drop(table)
	}
	c.Reset()
	checkTree(t, c)
	if kv.FreeCount() != arena || c.Pages() != 0 {
		t.Errorf("after Reset: FreeCount %d, Pages %d, want %d 0", kv.FreeCount(), c.Pages(), arena)
	}
	if len(sp.errs) > 0 {
		t.Errorf("arena errors seen by the cache: %v", sp.errs)
	}
}
