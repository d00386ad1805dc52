package prefixcache

import (
	"math/rand/v2"
	"testing"

	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/tensor"
)

// Benchmark tree: benchPrompts prompts of benchPromptPages pages of
// benchPT tokens; each prompt shares its first two pages with a tenth of
// the others, so the tree has about 10k pages.
const (
	benchPT          = 16
	benchPrompts     = 1250
	benchPromptPages = 10
	benchTreePages   = 10_000
)

type benchTree struct {
	kv      *kvcache.Cache
	c       *Cache
	prompts [][]int32
	rng     *rand.Rand
}

func newBenchTree(b *testing.B, maxPages int) *benchTree {
	b.Helper()
	kv, err := kvcache.New(kvcache.Config{Layers: 1, KVHeads: 1, HeadDim: 1, PageTokens: benchPT,
		Pages: benchPrompts*benchPromptPages + 4*benchPromptPages, DType: tensor.F32})
	if err != nil {
		b.Fatalf("kvcache.New: %v", err)
	}
	bt := &benchTree{kv: kv, c: New(kv, benchPT, maxPages), rng: rand.New(rand.NewPCG(1, 2))}
	bases := make([][]int32, 10)
	for i := range bases {
		bases[i] = bt.randToks(2 * benchPT)
	}
	for i := range benchPrompts {
		p := append(append([]int32(nil), bases[i%len(bases)]...), bt.randToks((benchPromptPages-2)*benchPT+1)...)
		bt.prompts = append(bt.prompts, p)
		pages, err := kv.Alloc(benchPromptPages)
		if err != nil {
			b.Fatalf("Alloc: %v", err)
		}
		bt.c.Insert(p, pages)
		if err := kv.Release(pages); err != nil {
			b.Fatalf("Release: %v", err)
		}
	}
	if n := bt.c.Pages(); n < benchTreePages*9/10 {
		b.Fatalf("bench tree has %d pages, want about %d", n, benchTreePages)
	}
	return bt
}

func (bt *benchTree) randToks(n int) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = int32(bt.rng.IntN(32000))
	}
	return s
}

func BenchmarkMatch(b *testing.B) {
	bt := newBenchTree(b, 0)
	b.ResetTimer()
	for i := range b.N {
		p := bt.prompts[i%len(bt.prompts)]
		m := bt.c.Match(p, (len(p)-1)/benchPT)
		if len(m) != benchPromptPages {
			b.Fatalf("Match = %d pages, want %d", len(m), benchPromptPages)
		}
		if err := bt.kv.Release(m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkInsertCached(b *testing.B) {
	bt := newBenchTree(b, 0)
	pages, err := bt.kv.Alloc(benchPromptPages)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		if n := bt.c.Insert(bt.prompts[i%len(bt.prompts)], pages); n != 0 {
			b.Fatalf("Insert of a cached prompt adopted %d pages", n)
		}
	}
}

// BenchmarkInsertEvict inserts a new prompt per iteration into a full tree
// bounded at its size, so each Insert evicts as many LRU leaves as it adopts.
func BenchmarkInsertEvict(b *testing.B) {
	bt := newBenchTree(b, 0)
	bt.c.maxPages = bt.c.Pages()
	prompts := make([][]int32, 64)
	for i := range prompts {
		prompts[i] = bt.randToks(benchPromptPages * benchPT)
	}
	b.ResetTimer()
	for i := range b.N {
		p := prompts[i%len(prompts)]
		p[0] = int32(i) // a new prefix every time
		pages, err := bt.kv.Alloc(benchPromptPages)
		if err != nil {
			b.Fatal(err)
		}
		if n := bt.c.Insert(p, pages); n != benchPromptPages {
			b.Fatalf("Insert adopted %d pages, want %d", n, benchPromptPages)
		}
		if err := bt.kv.Release(pages); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEvict(b *testing.B) {
	bt := newBenchTree(b, 0)
	b.ResetTimer()
	for range b.N {
		if bt.c.Evict(1) != 1 {
			b.StopTimer()
			bt = newBenchTree(b, 0)
			b.StartTimer()
		}
	}
}

func BenchmarkEvictable(b *testing.B) {
	bt := newBenchTree(b, 0)
	b.ResetTimer()
	for range b.N {
		if bt.c.Evictable() != bt.c.Pages() {
			b.Fatal("every page should be evictable")
		}
	}
}
