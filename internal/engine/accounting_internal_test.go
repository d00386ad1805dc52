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
