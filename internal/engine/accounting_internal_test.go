package engine

import (
	"strings"
	"testing"

	"tandem/internal/engine/kernels"
	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
	"tandem/internal/fixture"
	"tandem/internal/invariant"
)

// TestBrokenPageAccountingFailsLoudly: a page given back (ReleasePage)
// for a layer group that does not exist, or one nothing holds, is a
// broken invariant: applyUnheld panics with an invariant.Error instead of
// logging and going on with accounting that no longer adds up.
func TestBrokenPageAccountingFailsLoudly(t *testing.T) {
	pool := kernels.NewPool(1)
	defer pool.Close()
	e, err := New(model.NewRunner(fixture.Tiny(t, tensor.Q8_0, 7), pool), Config{KVType: tensor.F16, Pages: 16}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.Close() // the loop has exited: the test calls applyUnheld on its own goroutine
	for _, tc := range []struct {
		name string
		h    heldPage
		want string
	}{
		{"no such group", heldPage{group: kvcache.Groups, page: 0}, "layer group 2, which does not exist"},
		{"page not held", heldPage{group: kvcache.GroupGlobal, page: 3}, "page 3 is free"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				ie, ok := recover().(*invariant.Error)
				if !ok || !strings.Contains(ie.Msg, "kv page accounting broken") || !strings.Contains(ie.Msg, tc.want) {
					t.Errorf("applyUnheld(%+v) panicked with %v, want an invariant.Error saying %q", tc.h, ie, tc.want)
				}
			}()
			e.unheld = []heldPage{tc.h}
			e.applyUnheld()
		})
	}
}

// TestBrokenStateSlotAccountingFailsLoudly: a state slot given back twice,
// or one that does not exist, is a broken invariant (two sequences could
// share one state): the pool panics with an invariant.Error.
func TestBrokenStateSlotAccountingFailsLoudly(t *testing.T) {
	p := newStatePool(2, 3)
	i, st := p.acquire()
	if i < 0 || len(st) != 3 || p.used() != 1 {
		t.Fatalf("acquire = %d, %d floats, %d used", i, len(st), p.used())
	}
	p.release("r", i)
	for _, slot := range []int{i, 2, -1} {
		func() {
			defer func() {
				ie, ok := recover().(*invariant.Error)
				if !ok || !strings.Contains(ie.Msg, "state slot accounting broken") {
					t.Errorf("release(%d) panicked with %v, want an invariant.Error", slot, ie)
				}
			}()
			p.release("r", slot)
		}()
	}
	if p.used() != 0 {
		t.Errorf("%d slots used after the refused releases, want 0", p.used())
	}
}
