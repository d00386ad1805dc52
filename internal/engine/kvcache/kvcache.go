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

// Config describes the shape of a cache. Two caches can exchange pages only
// when their Configs are equal.
type Config struct {
	Layers     int         // transformer blocks
	KVHeads    int         // key/value heads per layer
	HeadDim    int         // elements per head vector
	PageTokens int         // token positions per page
	Pages      int         // pages in the arena
	DType      tensor.Type // tensor.F32 or tensor.F16
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
	case c.Pages <= 0 || c.Pages > pagesMax:
		return fmt.Errorf("kvcache: page count %d is out of range 1..%d", c.Pages, pagesMax)
	case c.DType != tensor.F32 && c.DType != tensor.F16:
		return fmt.Errorf("kvcache: dtype %s is not supported (use f32 or f16)", c.DType)
	}
	return nil
}

// ElemBytes returns the bytes of one element (4 for F32, 2 for F16).
func (c Config) ElemBytes() int { return c.DType.TypeSize() }

// RowBytes returns the bytes of one token position of one layer's K (or V).
func (c Config) RowBytes() int { return c.KVHeads * c.HeadDim * c.ElemBytes() }

// PageBytes returns the bytes of one page of one layer's K (or V).
func (c Config) PageBytes() int { return c.PageTokens * c.RowBytes() }

// PagesFor returns the number of pages that n token positions occupy.
func (c Config) PagesFor(n int) int { return (n + c.PageTokens - 1) / c.PageTokens }

// Cache is a paged KV arena with a reference-counted page allocator.
// See the package documentation for the layout and concurrency rules.
type Cache struct {
	cfg  Config
	k, v [][]byte // per layer, Pages*PageBytes each
	refs []int32  // holders per page; 0 = free
	free []int32  // stack of free page indices
}

// New allocates a cache. Memory is 2 * Layers * Pages * PageBytes bytes.
func New(cfg Config) (*Cache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	arena := cfg.Pages * cfg.PageBytes()
	c := &Cache{cfg: cfg, k: make([][]byte, cfg.Layers), v: make([][]byte, cfg.Layers),
		refs: make([]int32, cfg.Pages), free: make([]int32, cfg.Pages)}
	for l := range cfg.Layers {
		c.k[l] = alignedBytes(arena)
		c.v[l] = alignedBytes(arena)
	}
	for i := range c.free {
		c.free[i] = int32(cfg.Pages - 1 - i) // pop order 0, 1, 2, ...
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

// FreeCount returns the number of pages nobody holds.
func (c *Cache) FreeCount() int { return len(c.free) }

// Alloc takes n free pages, each with one holder. It is all or nothing:
// when fewer than n pages are free it returns ErrNoPages and takes none.
func (c *Cache) Alloc(n int) ([]int32, error) {
	if n < 0 {
		return nil, fmt.Errorf("kvcache: alloc of %d pages", n)
	}
	if n > len(c.free) {
		return nil, fmt.Errorf("alloc %d pages with %d free: %w", n, len(c.free), ErrNoPages)
	}
	out := make([]int32, n)
	for i := range out {
		p := c.free[len(c.free)-1]
		c.free = c.free[:len(c.free)-1]
		c.refs[p] = 1
		out[i] = p
	}
	return out, nil
}

// Ref adds a holder to each page, which must be held already.
func (c *Cache) Ref(pages []int32) error {
	for _, p := range pages {
		if err := c.checkHeld(p); err != nil {
			return fmt.Errorf("ref: %w", err)
		}
	}
	for _, p := range pages {
		c.refs[p]++
	}
	return nil
}

// Release drops one holder from each page; a page whose last holder leaves
// goes back to the free list. Releasing a page nobody holds (or listing a
// page more times than it has holders) is an error and changes nothing, so
// double frees are caught rather than corrupting counts. It is linear in
// len(pages).
func (c *Cache) Release(pages []int32) error {
	for i, p := range pages {
		if err := c.checkHeld(p); err != nil {
			// undo the drops made so far: nothing changes on error
			for _, q := range pages[:i] {
				c.refs[q]++
			}
			if p >= 0 && int(p) < len(c.refs) && slices.Contains(pages[:i], p) {
				err = fmt.Errorf("page %d is listed more times than it has holders", p)
			}
			return fmt.Errorf("release: %w", err)
		}
		c.refs[p]--
	}
	for _, p := range pages {
		if c.refs[p] == 0 {
			c.refs[p] = -1 // mark so a page listed twice is freed once
			c.free = append(c.free, p)
		}
	}
	for _, p := range pages {
		if c.refs[p] < 0 {
			c.refs[p] = 0
		}
	}
	return nil
}

// Refs returns the number of holders of page p (0 when free or out of range).
func (c *Cache) Refs(p int32) int {
	if p < 0 || int(p) >= len(c.refs) {
		return 0
	}
	return int(c.refs[p])
}

func (c *Cache) checkHeld(p int32) error {
	if p < 0 || int(p) >= len(c.refs) {
		return fmt.Errorf("page %d out of range 0..%d", p, len(c.refs)-1)
	}
	if c.refs[p] == 0 {
		return fmt.Errorf("page %d is free", p)
	}
	return nil
}

// KPage returns the bytes of page p of layer l's keys (PageBytes long).
// The slice aliases the arena.
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
// with page table pages.
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
