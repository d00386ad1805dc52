package drivertest

import (
	"bytes"
	"testing"
	"unsafe"

	"tandem/internal/pd/driver"
	"tandem/internal/pd/kvwire"
)

// PagesHost gives a driver.Pages: where a decode room admitted with Pages
// lands its KV.
type PagesHost interface {
	// Pages returns the implementation under test, the page numbers it
	// was given for a room (as Driver.Admitted names them), the KV
	// cache's layer count and one layer's K (or V) page size.
	Pages(t testing.TB) (p driver.Pages, pages []int32, layers, pageBytes int)
	// Read returns the bytes the engine itself holds for layer's K or V
	// of page (by its own means, not through the Pages), so that the
	// suite sees a write through KVPage land where the engine reads.
	Read(layer int, kind kvwire.KVKind, page int32) []byte
}

// TestPages checks a Pages against driver.Pages' contract: KVPage gives,
// for every layer, K and V of every page the room holds, one page of
// bytes, the same on every call, no two overlapping, and what is written
// there is what the engine holds; coordinates outside the room (a layer
// past the last, a negative one, a page number the engine does not have)
// give nil, never a panic.
func TestPages(t testing.TB, h PagesHost) {
	p, pages, layers, pageBytes := h.Pages(t)
	if len(pages) == 0 {
		t.Fatal("the host gave no pages")
	}
	type span struct{ lo, hi uintptr }
	var spans []span
	for _, pg := range pages {
		for layer := range layers {
			for kind := kvwire.KindK; kind <= kvwire.KindV; kind++ {
				b := p.KVPage(layer, kind, pg)
				if len(b) != pageBytes {
					t.Errorf("KVPage(%d, %v, %d) = %d bytes, want %d", layer, kind, pg, len(b), pageBytes)
					continue
				}
				if again := p.KVPage(layer, kind, pg); unsafe.SliceData(again) != unsafe.SliceData(b) {
					t.Errorf("KVPage(%d, %v, %d) gave other memory on a second call", layer, kind, pg)
				}
				lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
				s := span{lo, lo + uintptr(len(b))}
				for _, o := range spans {
					if s.lo < o.hi && o.lo < s.hi {
						t.Errorf("KVPage(%d, %v, %d) overlaps another frame's page", layer, kind, pg)
					}
				}
				spans = append(spans, s)
				for i := range b {
					b[i] = byte(int(pg)*31 + layer*7 + int(kind)*3 + i)
				}
			}
		}
	}
	for _, pg := range pages {
		for layer := range layers {
			for kind := kvwire.KindK; kind <= kvwire.KindV; kind++ {
				want := make([]byte, pageBytes)
				for i := range want {
					want[i] = byte(int(pg)*31 + layer*7 + int(kind)*3 + i)
				}
				if got := h.Read(layer, kind, pg); !bytes.Equal(got, want) {
					t.Errorf("after writing through KVPage(%d, %v, %d) the engine holds other bytes there", layer, kind, pg)
				}
			}
		}
	}
	for _, c := range []struct {
		layer int
		kind  kvwire.KVKind
		page  int32
	}{
		{layers, kvwire.KindK, pages[0]}, {-1, kvwire.KindV, pages[0]}, {0, kvwire.KindK, -1}, {0, kvwire.KindV, 1 << 30},
	} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("KVPage(%d, %v, %d) panicked: %v", c.layer, c.kind, c.page, r)
				}
			}()
			if b := p.KVPage(c.layer, c.kind, c.page); b != nil {
				t.Errorf("KVPage(%d, %v, %d) outside the room = %d bytes, want nil", c.layer, c.kind, c.page, len(b))
			}
		}()
	}
}
