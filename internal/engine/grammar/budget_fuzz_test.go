package grammar

import (
	"errors"
	"testing"
	"time"
)

// FuzzMaskWithin: for any grammar and any work bound, MaskWithin returns
// a complete mask or stops with ErrMaskBudget, in both cases having done
// no more work than the bound; it never runs long
// past its deadline; and a stopped mask leaves nothing behind: the masks
// after it (and a later unbounded one) equal those of a grammar with no
// caches.
func FuzzMaskWithin(f *testing.F) {
	for _, src := range []string{gbnfRecursive, gbnfDoubling, gbnfNested,
		`root ::= "[" root "]" | "x"`, `root ::= ("a" | "ab")* "c"`} {
		f.Add(src, uint16(300), []byte{1, 7, 3, 200, 5, 9})
		f.Add(src, uint16(5000), []byte{0, 0, 0, 0})
	}
	v := wordVocab(f, "...", "x1", "1!", "!x", "xy", "12", "34", "!.", "]]", "[[", "ab", "abc", "aaaa")
	f.Fuzz(func(t *testing.T, src string, work uint16, steps []byte) {
		if len(src) > 2000 || len(steps) > 16 {
			return
		}
		g, err := CompileGBNF(src, Options{})
		if err != nil {
			return
		}
		ref, err := CompileGBNF(src, Options{MaskCacheBytes: -1, StateCacheBytes: -1})
		if err != nil {
			t.Fatalf("compiles with caches but not without: %v", err)
		}
		m, mr := NewMatcher(g, v), NewMatcher(ref, v)
		got, want := NewBitset(v.Size()), NewBitset(v.Size())
		unitMax := int64(work) + 1
		const deadline = 200 * time.Millisecond
		for _, step := range steps {
			start := time.Now()
			units, err := m.MaskWithin(got, Limit{Work: unitMax, Deadline: start.Add(deadline)})
			// Generous: the check is that it stops, not how fast (the
			// machine may be loaded); the work bound is exact.
			if took := time.Since(start); took > deadline+2*time.Second {
				t.Fatalf("MaskWithin took %v past a %v deadline", took, deadline)
			}
			mr.Mask(want)
			switch {
			case err == nil:
				if units > unitMax {
					t.Fatalf("complete mask took %d units, bound %d", units, unitMax)
				}
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("budgeted mask differs from the uncached one")
					}
				}
			case errors.Is(err, ErrMaskBudget):
				if units > unitMax {
					t.Fatalf("stopped after %d units, bound %d", units, unitMax)
				}
				if !allZero(got) {
					t.Fatalf("a stopped mask left bits set")
				}
				m.Mask(got) // unbounded: must not see anything the stopped one cached
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("mask after a stopped one differs from the uncached one")
					}
				}
			default:
				t.Fatalf("MaskWithin: %v", err)
			}
			var ids []int32
			for id := range v.Size() {
				if want.Has(id) && !v.IsEnd(int32(id)) {
					ids = append(ids, int32(id))
				}
			}
			if len(ids) == 0 {
				return
			}
			id := ids[int(step)%len(ids)]
			if err := m.Accept(id); err != nil {
				t.Fatalf("Accept(%q) of a masked token: %v", v.Token(id), err)
			}
			if err := mr.Accept(id); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func allZero(b Bitset) bool {
	for _, w := range b {
		if w != 0 {
			return false
		}
	}
	return true
}

// TestInterruptStopsMask: Interrupt from another goroutine stops a long
// MaskWithin, and every later one fails at once.
func TestInterruptStopsMask(t *testing.T) {
	v := vocab32k(t)
	g := mustGBNF(t, gbnfRecursive)
	m := NewMatcher(g, v)
	dst := NewBitset(v.Size())
	started := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		close(started)
		_, err := m.MaskWithin(dst, Limit{})
		errc <- err
	}()
	<-started
	m.Interrupt()
	if err := <-errc; err != nil && !errors.Is(err, ErrMaskBudget) {
		t.Fatalf("interrupted mask: %v", err)
	}
	if _, err := m.MaskWithin(dst, Limit{}); !errors.Is(err, ErrMaskBudget) {
		t.Fatalf("mask after Interrupt: %v, want ErrMaskBudget", err)
	}
}
