// Package kvcache holds the paged key/value cache that the forward pass reads
// and writes: one arena per worker, cut into fixed-size pages, each page
// holding PageTokens token positions of one layer's keys (or values).
//
// # Layout
//
// For each layer there is one K arena and one V arena. Page p of layer l is
// the contiguous byte range [p*PageBytes, (p+1)*PageBytes) of that layer's
// arena, laid out as [PageTokens][KVHeads][HeadDim] elements of DType (F32 or
// F16, little-endian). Token slot s of a page therefore starts at byte
// s*RowBytes, and one head's vector at s*RowBytes + h*HeadDim*elemSize.
//
// A sequence owns a page table ([]int32 page indices); position i of the
// sequence lives in page table[i/PageTokens], slot i%PageTokens. Because each
// page of each layer is one contiguous byte run, a page can be shipped to
// another process by index (KPage/VPage return those bytes) and written there
// into any free page of a cache with the same Config.
//
// # Layer groups
//
// A model with sliding-window layers keeps them in the window group
// (Config.Window, WindowLayers, WindowPages) and the full-attention layers
// in the global group (Pages). Each group has its own page pool (Pool); a
// page id names a page of one pool, the arenas of a layer are sized by its
// group's pool, and a sequence holds one page table per group (Tables).
// Window-group pages before Config.FirstNeeded of a sequence's next step
// are never read again, so the owner releases them and marks their slots
// -1: a sequence holds at most WindowPagesMax window pages however long it
// gets. Without a window there is one group.
//
// # Configuration
//
// New(Config) with Layers, KVHeads, HeadDim, PageTokens, Pages, DType, and for
// models with sliding-window layers Window, WindowLayers (per layer) and
// WindowPages; memory is 2 × PageBytes × (global layers × Pages + window
// layers × WindowPages). Config.FirstNeeded(g, pos) is the first table slot a
// step starting at pos reads (0 for the global group; the page of pos-Window+1
// for the window group), and WindowPagesMax() = ceil(Window/PageTokens)+1. A
// group without layers may have 0 pages (every layer windowed: no global
// pool). Config.Equal compares shapes (Config holds a slice); two caches
// exchange pages only when their Configs are equal. New refuses PageTokens
// outside 1..4096, Pages outside 1..pagesMax (1<<24: a mistyped flag fails
// instead of allocating terabytes) and any DType but F32 and F16.
//
// # Accounting
//
// Pages are reference counted (per pool) so a prefix cache can share them: Alloc hands
// out pages with count 1, all or nothing (too few free pages gives
// ErrNoPages and takes none), Ref adds a holder, Release drops one and
// returns the page to the free list when the count reaches zero. Release of
// a page nobody holds (or listed more times than it has holders) is an
// error and changes nothing, so double frees are caught. FreeCount is exact at
// every moment; tests compare it with the initial count after every scenario.
//
// A Cache is not safe for concurrent use; its owner (the engine's step loop)
// serializes access. The arenas themselves may be read and written by the
// forward pass's worker goroutines while the owner waits for them.
package kvcache
