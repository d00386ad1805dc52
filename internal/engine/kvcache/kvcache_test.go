package kvcache_test

import (
	"errors"
	"testing"
	"unsafe"

	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/tensor"
)

func cfg() kvcache.Config {
	return kvcache.Config{Layers: 2, KVHeads: 2, HeadDim: 4, PageTokens: 4, Pages: 8, DType: tensor.F16}
}

func TestLayoutContiguousPerLayer(t *testing.T) {
	c := cfg()
	kv, err := kvcache.New(c)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.RowBytes(), 2*4*2; got != want {
		t.Errorf("RowBytes() = %d, want %d", got, want)
	}
	if got, want := c.PageBytes(), 4*16; got != want {
		t.Errorf("PageBytes() = %d, want %d", got, want)
	}
	pages, _ := kv.Alloc(2)
	// position 5 is page table[1], slot 1
	row := kv.KRow(1, pages, 5)
	row[0] = 0xAB
	page := kv.KPage(1, pages[1])
	if page[1*c.RowBytes()] != 0xAB {
		t.Errorf("KRow(1, pages, 5) is not slot 1 of KPage(1, pages[1])")
	}
	if kv.KPage(0, pages[1])[c.RowBytes()] != 0 || kv.VPage(1, pages[1])[c.RowBytes()] != 0 {
		t.Errorf("a K write of layer 1 leaked into layer 0 or into V")
	}
}

func TestAllocReleaseAccounting(t *testing.T) {
	kv, _ := kvcache.New(cfg())
	a, err := kv.Alloc(5)
	if err != nil || len(a) != 5 || kv.FreeCount() != 3 {
		t.Fatalf("Alloc(5) = %v, %v; free %d, want 5 pages and 3 free", a, err, kv.FreeCount())
	}
	if _, err := kv.Alloc(4); !errors.Is(err, kvcache.ErrNoPages) || kv.FreeCount() != 3 {
		t.Errorf("Alloc(4) with 3 free: err %v free %d, want ErrNoPages and nothing taken", err, kv.FreeCount())
	}
	if err := kv.Ref(a[:2]); err != nil {
		t.Fatal(err)
	}
	if err := kv.Release(a); err != nil {
		t.Fatal(err)
	}
	if kv.FreeCount() != 6 || kv.Refs(a[0]) != 1 {
		t.Errorf("after ref+release: free %d refs %d, want 6 and 1", kv.FreeCount(), kv.Refs(a[0]))
	}
	if err := kv.Release(a[2:3]); err == nil {
		t.Errorf("double release of page %d succeeded", a[2])
	}
	if err := kv.Release([]int32{a[0], a[0]}); err == nil {
		t.Errorf("release of a page listed twice with one holder succeeded")
	}
	if err := kv.Release(a[:2]); err != nil || kv.FreeCount() != 8 {
		t.Errorf("final release: %v, free %d want 8", err, kv.FreeCount())
	}
	if err := kv.Release([]int32{99}); err == nil {
		t.Errorf("release of out-of-range page succeeded")
	}
}

func TestConfigValidate(t *testing.T) {
	for _, mod := range []func(*kvcache.Config){
		func(c *kvcache.Config) { c.Layers = 0 },
		func(c *kvcache.Config) { c.PageTokens = 0 },
		func(c *kvcache.Config) { c.Pages = 1 << 30 },
		func(c *kvcache.Config) { c.DType = tensor.Q8_0 },
	} {
		c := cfg()
		mod(&c)
		if _, err := kvcache.New(c); err == nil {
			t.Errorf("New(%+v) succeeded, want an error", c)
		}
	}
}

func TestReleaseListedTwiceWithTwoHolders(t *testing.T) {
	kv, _ := kvcache.New(cfg())
	a, _ := kv.Alloc(2)
	if err := kv.Ref(a[:1]); err != nil {
		t.Fatal(err)
	}
	if err := kv.Release([]int32{a[0], a[1], a[0]}); err != nil {
		t.Fatalf("Release of a page listed twice with two holders: %v", err)
	}
	if kv.FreeCount() != 8 || kv.Refs(a[0]) != 0 {
		t.Errorf("after release: free %d refs %d, want 8 and 0 (page freed exactly once)", kv.FreeCount(), kv.Refs(a[0]))
	}
	b, _ := kv.Alloc(8)
	seen := map[int32]bool{}
	for _, p := range b {
		if seen[p] {
			t.Fatalf("page %d handed out twice: it was put on the free list twice", p)
		}
		seen[p] = true
	}
}

func TestReleaseErrorChangesNothing(t *testing.T) {
	kv, _ := kvcache.New(cfg())
	a, _ := kv.Alloc(3)
	if err := kv.Release([]int32{a[0], a[1], 99}); err == nil {
		t.Fatal("Release with an out-of-range page succeeded")
	}
	for _, p := range a {
		if kv.Refs(p) != 1 {
			t.Errorf("page %d has %d holders after a failed release, want 1", p, kv.Refs(p))
		}
	}
	if kv.FreeCount() != 5 {
		t.Errorf("free %d after a failed release, want 5", kv.FreeCount())
	}
}

// TestLayerGroups: with a window group, layers of each group page their own
// pool (page ids per group, arenas sized by the group's pool), accounting
// is per pool, and configurations are validated.
func TestLayerGroups(t *testing.T) {
	c := cfg()
	c.Layers, c.Window, c.WindowLayers, c.WindowPages = 3, 8, []bool{true, false, true}, 3
	kv, err := kvcache.New(c)
	if err != nil {
		t.Fatal(err)
	}
	if kv.Group(0) != kvcache.GroupWindow || kv.Group(1) != kvcache.GroupGlobal || c.GroupLayers(kvcache.GroupWindow) != 2 {
		t.Fatalf("groups of layers 0, 1: %d, %d; window layers %d", kv.Group(0), kv.Group(1), c.GroupLayers(kvcache.GroupWindow))
	}
	w := kv.Pool(kvcache.GroupWindow)
	wp, err := w.Alloc(3)
	if err != nil || w.FreeCount() != 0 || kv.FreeCount() != 8 {
		t.Fatalf("window Alloc(3) = %v, %v; free window %d global %d, want 0 and 8", wp, err, w.FreeCount(), kv.FreeCount())
	}
	if _, err := w.Alloc(1); !errors.Is(err, kvcache.ErrNoPages) {
		t.Errorf("window pool over-allocated: %v", err)
	}
	// the last page of the window pool is at the end of layer 0's arena
	if got := len(kv.KPage(0, 2)); got != c.PageBytes() {
		t.Errorf("KPage(0, 2) has %d bytes, want %d", got, c.PageBytes())
	}
	kv.KPage(0, 2)[0] = 7
	if kv.KPage(2, 2)[0] != 0 || kv.KPage(1, 2)[0] != 0 {
		t.Errorf("a write into layer 0 page 2 leaked into another layer")
	}
	if got, want := c.FirstNeeded(kvcache.GroupWindow, 20), (20-8+1)/4; got != want || c.FirstNeeded(kvcache.GroupGlobal, 20) != 0 {
		t.Errorf("FirstNeeded(window, 20) = %d, want %d; global %d, want 0", got, want, c.FirstNeeded(kvcache.GroupGlobal, 20))
	}
	if c.WindowPagesMax() != 3 {
		t.Errorf("WindowPagesMax() = %d, want 3 (ceil(8/4)+1)", c.WindowPagesMax())
	}
	if err := w.Release(wp); err != nil || w.FreeCount() != 3 {
		t.Errorf("window Release: %v, free %d", err, w.FreeCount())
	}
	if got := kvcache.Held([]int32{-1, -1, 4, 5}); len(got) != 2 || got[0] != 4 {
		t.Errorf("Held = %v, want [4 5]", got)
	}
	all := c
	all.WindowLayers, all.Pages = []bool{true, true, true}, 0
	if _, err := kvcache.New(all); err != nil {
		t.Errorf("every layer windowed with no global pages: %v", err)
	}
	for name, bad := range map[string]func(c *kvcache.Config){
		"no window pages":      func(c *kvcache.Config) { c.WindowPages = 0 },
		"layer mask too short": func(c *kvcache.Config) { c.WindowLayers = c.WindowLayers[:2] },
		"mask without window":  func(c *kvcache.Config) { c.Window = 0 },
		"no global pages":      func(c *kvcache.Config) { c.Pages = 0 },
	} {
		b := c
		b.WindowLayers = append([]bool(nil), c.WindowLayers...)
		bad(&b)
		if err := b.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, b)
		}
	}
}

// TestNewInCarvesGivenMemory: NewIn lays every arena inside the memory
// given, disjoint, and refuses memory too small or misaligned.
func TestNewInCarvesGivenMemory(t *testing.T) {
	c := cfg()
	c.Pages = 5 // arenas of 5*64 bytes: not a multiple of the alignment
	buf := make([]uint64, c.Bytes()/8+16)
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), len(buf)*8)[:c.Bytes()]
	kv, err := kvcache.NewIn(c, mem)
	if err != nil {
		t.Fatal(err)
	}
	seen := make([]int, len(mem))
	base := uintptr(unsafe.Pointer(&mem[0]))
	for l := range c.Layers {
		for p := range int32(c.Pages) {
			for _, page := range [][]byte{kv.KPage(l, p), kv.VPage(l, p)} {
				off := int(uintptr(unsafe.Pointer(&page[0])) - base)
				if off < 0 || off+len(page) > len(mem) {
					t.Fatalf("layer %d page %d lies outside the memory given (offset %d)", l, p, off)
				}
				for i := range page {
					seen[off+i]++
				}
			}
		}
	}
	for i, n := range seen {
		if n > 1 {
			t.Fatalf("byte %d of the memory is in %d pages", i, n)
		}
	}
	if _, err := kvcache.NewIn(c, mem[:len(mem)-1]); err == nil {
		t.Errorf("NewIn took %d bytes for a cache of %d", len(mem)-1, c.Bytes())
	}
	if _, err := kvcache.NewIn(c, unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), len(buf)*8)[8:8+c.Bytes()]); err == nil {
		t.Errorf("NewIn took memory 8 bytes off its alignment")
	}
}
