package kvcache

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"tandem/internal/engine/tensor"
)

// ErrNoPages is returned by Alloc when fewer pages are free than asked for.
var ErrNoPages = errors.New("kvcache: not enough free pages")

// Layer groups. A cache's layers fall into at most two groups, each with a
// page pool of its own: the global group (full-attention layers, which read
// every position of a sequence) and the window group (sliding-window
// layers, which read only the last Window positions). A page id names a
// page within one group's pool; a sequence holds one page table per group.
// A model without windows has only the global group.
const (
	GroupGlobal = 0 // full-attention layers
	GroupWindow = 1 // sliding-window layers
	Groups      = 2 // number of groups
)

// Config describes the shape of a cache. Two caches can exchange pages only
// when their Configs are Equal.
type Config struct {
	Layers     int         // transformer blocks
	KVHeads    int         // key/value heads per layer
	HeadDim    int         // elements per head vector
	PageTokens int         // token positions per page
	Pages      int         // pages in the global group's pool (0 allowed when every layer is windowed)
	DType      tensor.Type // tensor.F32 or tensor.F16

	// Window is the attention window in tokens of the layers that
	// WindowLayers marks; they form the window group, with a pool of
	// WindowPages pages. Window 0 (and WindowLayers nil): no window group.
	Window       int
	WindowLayers []bool // per layer (len Layers when Window > 0)
	WindowPages  int
}

// pagesMax bounds the arena so that a mistyped flag fails with an error
// instead of an attempt to allocate terabytes.
const pagesMax = 1 << 24

// Validate reports a configuration error, naming the field.
func (c Config) Validate() error {
	switch {
	case c.Layers <= 0 || c.KVHeads <= 0 || c.HeadDim <= 0:
		return fmt.Errorf("kvcache: layers, kv heads and head dim must be positive (got %d, %d, %d)", c.Layers, c.KVHeads, c.HeadDim)
	case c.PageTokens <= 0 || c.PageTokens > 4096:
		return fmt.Errorf("kvcache: page size %d tokens is out of range 1..4096", c.PageTokens)
	case c.DType != tensor.F32 && c.DType != tensor.F16:
		return fmt.Errorf("kvcache: dtype %s is not supported (use f32 or f16)", c.DType)
	case c.Window < 0 || c.Window > 1<<30:
		return fmt.Errorf("kvcache: window %d is out of range 0..%d", c.Window, 1<<30)
	case c.Window > 0 && len(c.WindowLayers) != c.Layers:
		return fmt.Errorf("kvcache: a window of %d tokens needs WindowLayers for all %d layers, got %d", c.Window, c.Layers, len(c.WindowLayers))
	case c.Window == 0 && (c.WindowLayers != nil || c.WindowPages != 0):
		return fmt.Errorf("kvcache: WindowLayers and WindowPages need a window")
	}
	for g := range Groups {
		n, lo := c.GroupPages(g), 1
		if c.GroupLayers(g) == 0 {
			lo = 0
		}
		if n < lo || n > pagesMax {
			return fmt.Errorf("kvcache: page count %d of the %s group (%d layers) is out of range %d..%d", n, GroupName(g), c.GroupLayers(g), lo, pagesMax)
		}
	}
	return nil
}

// Equal reports whether c and o describe the same cache shape.
func (c Config) Equal(o Config) bool {
	return c.Layers == o.Layers && c.KVHeads == o.KVHeads && c.HeadDim == o.HeadDim && c.PageTokens == o.PageTokens &&
		c.Pages == o.Pages && c.DType == o.DType && c.Window == o.Window && slices.Equal(c.WindowLayers, o.WindowLayers) &&
		c.WindowPages == o.WindowPages
}

// GroupName names group g for errors and metrics: "global" or "window".
func GroupName(g int) string {
	if g == GroupWindow {
		return "window"
	}
	return "global"
}

// Group returns the group of layer l.
func (c Config) Group(l int) int {
	if c.Window > 0 && l < len(c.WindowLayers) && c.WindowLayers[l] {
		return GroupWindow
	}
	return GroupGlobal
}

// GroupLayers returns the number of layers in group g.
func (c Config) GroupLayers(g int) int {
	n := 0
	for l := range c.Layers {
		if c.Group(l) == g {
			n++
		}
	}
	return n
}

// GroupPages returns the size of group g's pool.
func (c Config) GroupPages(g int) int {
	if g == GroupWindow {
		return c.WindowPages
	}
	return c.Pages
}

// GroupWindow returns the attention window of group g's layers (0: all
// positions).
func (c Config) GroupWindow(g int) int {
	if g == GroupWindow {
		return c.Window
	}
	return 0
}

// FirstNeeded returns the first page index of a group-g page table that a
// step whose first new token is at position pos reads: 0 for the global
// group; for the window group the page of position pos-Window+1. Pages
// before it are never read again by that step or any later one.
func (c Config) FirstNeeded(g, pos int) int {
	w := c.GroupWindow(g)
	if w == 0 {
		return 0
	}
	return max(0, pos-w+1) / c.PageTokens
}

// WindowPagesMax returns the most window-group pages a sequence holds
// between steps: ceil(Window/PageTokens)+1 (a window that starts inside a
// page spans one page more than its length).
func (c Config) WindowPagesMax() int { return c.PagesFor(c.Window) + 1 }

// ElemBytes returns the bytes of one element (4 for F32, 2 for F16).
func (c Config) ElemBytes() int { return c.DType.TypeSize() }

// RowBytes returns the bytes of one token position of one layer's K (or V).
func (c Config) RowBytes() int { return c.KVHeads * c.HeadDim * c.ElemBytes() }

// PageBytes returns the bytes of one page of one layer's K (or V).
func (c Config) PageBytes() int { return c.PageTokens * c.RowBytes() }

// PagesFor returns the number of pages that n token positions occupy.
func (c Config) PagesFor(n int) int { return (n + c.PageTokens - 1) / c.PageTokens }

// Cache is a paged KV arena with a reference-counted page allocator per
// layer group. See the package documentation for the layout and
// concurrency rules.
type Cache struct {
	cfg   Config
	k, v  [][]byte // per layer, GroupPages(Group(l))*PageBytes each
	group []uint8  // per layer: its group (the forward pass asks per token)
	pools [Groups]Pool
}

// Pool is one layer group's page allocator. Its methods have the meaning
// of the Cache's methods of the same names (which are those of the global
// group's Pool). *Pool satisfies prefixcache.Pages.
type Pool struct {
	refs []int32 // holders per page; 0 = free
	free []int32 // stack of free page indices
}

// New allocates a cache. Memory is 2 × PageBytes × (global layers × Pages
// + window layers × WindowPages) bytes.
func New(cfg Config) (*Cache, error) { return NewIn(cfg, nil) }

// arenaAlign is the alignment of each layer's K or V arena inside memory
// given to NewIn (a cache line).
const arenaAlign = 64

// Bytes returns the memory NewIn needs for cfg's cache: every layer's K
// and V arenas, each rounded up to arenaAlign bytes.
func (c Config) Bytes() int {
	n := 0
	for l := range c.Layers {
		n += 2 * alignUp(c.GroupPages(c.Group(l))*c.PageBytes())
	}
	return n
}

func alignUp(n int) int { return (n + arenaAlign - 1) / arenaAlign * arenaAlign }

// NewIn is New with the arenas inside mem (at least cfg.Bytes() bytes,
// arenaAlign-aligned: memory another process can map, such as a
// shared-memory region), or allocated when mem is nil.
func NewIn(cfg Config, mem []byte) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if mem != nil {
		if need := cfg.Bytes(); len(mem) < need {
			return nil, fmt.Errorf("kvcache: %d bytes of memory given, the cache needs %d", len(mem), need)
		}
		if uintptr(unsafe.Pointer(unsafe.SliceData(mem)))%arenaAlign != 0 {
			return nil, fmt.Errorf("kvcache: the memory given is not %d-byte aligned", arenaAlign)
		}
	}
	carve := func(n int) []byte {
		if mem == nil {
			return alignedBytes(n)
		}
		b := mem[:n:n]
		mem = mem[alignUp(n):]
		return b
	}
	c := &Cache{cfg: cfg, k: make([][]byte, cfg.Layers), v: make([][]byte, cfg.Layers), group: make([]uint8, cfg.Layers)}
	for l := range cfg.Layers {
		c.group[l] = uint8(cfg.Group(l))
		arena := cfg.GroupPages(cfg.Group(l)) * cfg.PageBytes()
		c.k[l] = carve(arena)
		c.v[l] = carve(arena)
	}
	for g := range Groups {
		n := cfg.GroupPages(g)
		p := &c.pools[g]
		p.refs, p.free = make([]int32, n), make([]int32, n)
		for i := range p.free {
			p.free[i] = int32(n - 1 - i) // pop order 0, 1, 2, ...
		}
	}
	return c, nil
}

// alignedBytes allocates n bytes backed by float32 storage, so that F32 and
// F16 views of it are properly aligned.
func alignedBytes(n int) []byte {
	f := make([]float32, (n+3)/4)
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), n)
}

// Config returns the cache's configuration.
func (c *Cache) Config() Config { return c.cfg }

// Pool returns group g's page allocator.
func (c *Cache) Pool(g int) *Pool { return &c.pools[g] }

// FreeCount returns the number of global-group pages nobody holds.
func (c *Cache) FreeCount() int { return c.pools[GroupGlobal].FreeCount() }

// Alloc takes n free global-group pages (see Pool.Alloc).
func (c *Cache) Alloc(n int) ([]int32, error) { return c.pools[GroupGlobal].Alloc(n) }

// Ref adds a holder to each global-group page (see Pool.Ref).
func (c *Cache) Ref(pages []int32) error { return c.pools[GroupGlobal].Ref(pages) }

// Release drops one holder from each global-group page (see Pool.Release).
func (c *Cache) Release(pages []int32) error { return c.pools[GroupGlobal].Release(pages) }

// Refs returns the number of holders of global-group page p.
func (c *Cache) Refs(p int32) int { return c.pools[GroupGlobal].Refs(p) }

// Total returns the pool's size in pages.
func (p *Pool) Total() int { return len(p.refs) }

// FreeCount returns the number of pages nobody holds.
func (p *Pool) FreeCount() int { return len(p.free) }

// Alloc takes n free pages, each with one holder. It is all or nothing:
// when fewer than n pages are free it returns ErrNoPages and takes none.
func (p *Pool) Alloc(n int) ([]int32, error) {
	if n < 0 {
		return nil, fmt.Errorf("kvcache: alloc of %d pages", n)
	}
	if n > len(p.free) {
		return nil, fmt.Errorf("alloc %d pages with %d free: %w", n, len(p.free), ErrNoPages)
	}
	out := make([]int32, n)
	for i := range out {
		q := p.free[len(p.free)-1]
		p.free = p.free[:len(p.free)-1]
		p.refs[q] = 1
		out[i] = q
	}
	return out, nil
}

// Ref adds a holder to each page, which must be held already.
func (p *Pool) Ref(pages []int32) error {
	for _, q := range pages {
		if err := p.checkHeld(q); err != nil {
			return fmt.Errorf("ref: %w", err)
		}
	}
	for _, q := range pages {
		p.refs[q]++
	}
	return nil
}

// Release drops one holder from each page; a page whose last holder leaves
// goes back to the free list. Releasing a page nobody holds (or listing a
// page more times than it has holders) is an error and changes nothing, so
// double frees are caught rather than corrupting counts. It is linear in
// len(pages).
func (p *Pool) Release(pages []int32) error {
	for i, q := range pages {
		if err := p.checkHeld(q); err != nil {
			// undo the drops made so far: nothing changes on error
			for _, r := range pages[:i] {
				p.refs[r]++
			}
			if q >= 0 && int(q) < len(p.refs) && slices.Contains(pages[:i], q) {
				err = fmt.Errorf("page %d is listed more times than it has holders", q)
			}
			return fmt.Errorf("release: %w", err)
		}
		p.refs[q]--
	}
	for _, q := range pages {
		if p.refs[q] == 0 {
			p.refs[q] = -1 // mark so a page listed twice is freed once
			p.free = append(p.free, q)
		}
	}
	for _, q := range pages {
		if p.refs[q] < 0 {
			p.refs[q] = 0
		}
	}
	return nil
}

// Refs returns the number of holders of page q (0 when free or out of range).
func (p *Pool) Refs(q int32) int {
	if q < 0 || int(q) >= len(p.refs) {
		return 0
	}
	return int(p.refs[q])
}

func (p *Pool) checkHeld(q int32) error {
	if q < 0 || int(q) >= len(p.refs) {
		return fmt.Errorf("page %d out of range 0..%d", q, len(p.refs)-1)
	}
	if p.refs[q] == 0 {
		return fmt.Errorf("page %d is free", q)
	}
	return nil
}

// Group returns the group of layer l (Config.Group).
func (c *Cache) Group(l int) int { return int(c.group[l]) }

// KPage returns the bytes of page p of layer l's keys (PageBytes long);
// p is a page of layer l's group. The slice aliases the arena.
func (c *Cache) KPage(l int, p int32) []byte {
	pb := c.cfg.PageBytes()
	return c.k[l][int(p)*pb : (int(p)+1)*pb]
}

// VPage returns the bytes of page p of layer l's values (PageBytes long).
func (c *Cache) VPage(l int, p int32) []byte {
	pb := c.cfg.PageBytes()
	return c.v[l][int(p)*pb : (int(p)+1)*pb]
}

// KRow returns the bytes of position pos of layer l's keys for a sequence
// with page table pages (its table of layer l's group).
func (c *Cache) KRow(l int, pages []int32, pos int) []byte {
	return c.row(c.k[l], pages, pos)
}

// VRow returns the bytes of position pos of layer l's values.
func (c *Cache) VRow(l int, pages []int32, pos int) []byte {
	return c.row(c.v[l], pages, pos)
}

func (c *Cache) row(arena []byte, pages []int32, pos int) []byte {
	pt := c.cfg.PageTokens
	rb := c.cfg.RowBytes()
	off := int(pages[pos/pt])*c.cfg.PageBytes() + (pos%pt)*rb
	return arena[off : off+rb]
}

// F32 views b (whose length is a multiple of 4 and which came from this
// package's arenas) as float32s.
func F32(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// F16 views b as half-precision bit patterns.
func F16(b []byte) []uint16 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)
}

// Tables is a sequence's page tables, one per layer group (nil for a group
// without layers). In a window-group table, slots before the sequence's
// window hold -1: those pages were released.
type Tables [Groups][]int32

// Layer returns the table of layer l's group.
func (t Tables) Layer(c *Cache, l int) []int32 { return t[c.Group(l)] }

// Held returns the entries of table that name pages (not -1).
func Held(table []int32) []int32 {
	var out []int32
	for _, p := range table {
		if p >= 0 {
			out = append(out, p)
		}
	}
	return out
}
