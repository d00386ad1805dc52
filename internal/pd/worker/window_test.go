package worker

import (
	"slices"
	"testing"

	"tandem/internal/engine"
	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
	"tandem/internal/fixture"
	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
	"tandem/internal/synth"
)

// windowModel is a gemma3 file of the tiny preset with 6 layers: layers
// 0-4 attend to an 8-token window, layer 5 to everything.
func windowModel(t *testing.T) *model.Model {
	t.Helper()
	cfg, err := synth.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Arch, cfg.Layers, cfg.SlidingWindow, cfg.RopeBase = "gemma3", 6, 8, 1e6
	return fixture.Synth(t, cfg, tensor.F16, 21)
}

// TestWindowedTransferShipsLastWindow: for a windowed model, prefill ships
// the global layer's pages for the whole prompt and each sliding-window
// layer's pages of the prompt's last window only, so a long prompt moves
// far fewer bytes than every layer's every page; the decode side reserves
// only those window pages and its output equals colocated decoding.
func TestWindowedTransferShipsLastWindow(t *testing.T) {
	m := windowModel(t)
	pp := &pair{m: m}
	pp.p, pp.pe = newWorker(t, m, room.RolePrefill, 32)
	pp.d, pp.de = newWorker(t, m, room.RoleDecode, 512)
	pp.pFree = pp.pe.Stats().PagesTot - pp.pe.Stats().PagesUsed
	pp.dFree = pp.de.Stats().PagesTot - pp.de.Stats().PagesUsed
	t.Cleanup(func() { pp.checkQuiet(t) })
	kc := pp.de.KVCache().Config()
	global, window := kc.GroupLayers(kvcache.GroupGlobal), kc.GroupLayers(kvcache.GroupWindow)
	if global != 1 || window != 5 {
		t.Fatalf("decode cache: %d global and %d window layers, want 1 and 5", global, window)
	}
	for _, n := range []int{5, 195, 200, 600} {
		p := prompt(n)
		want := colocated(t, pp.de, p, 12)
		id := newRoomID()
		req := engine.Request{Prompt: p, MaxTokens: 12, IgnoreEOS: true}
		ds, ps := pp.submit(t, id, req)
		got, dl := drain(t, ds)
		_, pl := drain(t, ps)
		if !slices.Equal(got, want) || dl.Err != nil || pl.Err != nil {
			t.Errorf("prompt %d: disaggregated %v (%v, prefill %v), colocated %v", n, got, dl.Err, pl.Err, want)
		}
		pages := kc.PagesFor(n)
		winPages := pages - kc.FirstNeeded(kvcache.GroupWindow, n)
		frame := int64(2 * kc.PageBytes()) // K and V of one page of one layer
		wantBytes := frame * int64(global*pages+window*winPages)
		all := frame * int64(kc.Layers*pages)
		for _, w := range []*Worker{pp.p, pp.d} {
			info, ok := w.roomInfo(id)
			if !ok || info.State != room.StateSucceeded || info.Bytes != wantBytes {
				t.Errorf("prompt %d: %s room %v, %d bytes; want succeeded with %d (every page of every layer: %d)",
					n, w.role.String(), info.State, info.Bytes, wantBytes, all)
			}
		}
		if n > 2*kc.Window && wantBytes >= all/2 {
			t.Errorf("prompt %d: %d bytes is not far below %d", n, wantBytes, all)
		}
		t.Logf("prompt %d: shipped %d bytes (%d window pages per window layer), every page of every layer would be %d", n, wantBytes, winPages, all)
	}
}

// TestCachePagesRejectsBadCoordinates: the decode side's page lookup
// answers nil (the driver drops the frame as bad coordinates, and the
// room fails at DONE for the missing bytes) for a layer or ordinal out of
// range and for a window-layer ordinal before the prompt's last window,
// which this side never reserved; it never indexes out of range.
func TestCachePagesRejectsBadCoordinates(t *testing.T) {
	m := windowModel(t)
	_, e := newWorker(t, m, room.RoleDecode, 512)
	kv := e.KVCache()
	var tabs kvcache.Tables
	tabs[kvcache.GroupGlobal] = []int32{0, 1, 2}
	tabs[kvcache.GroupWindow] = []int32{-1, -1, 0}
	c := cachePages{kv, tabs}
	for _, tc := range []struct {
		layer int
		ord   int32
		ok    bool
	}{
		{5, 0, true}, {5, 2, true}, {0, 2, true}, // global layer 5, window layer 0
		{0, 0, false}, {0, 1, false}, // before the window
		{5, 3, false}, {0, 3, false}, {5, -1, false}, {6, 0, false}, {-1, 0, false}, {1 << 15, 0, false},
	} {
		for _, kind := range []kvwire.KVKind{kvwire.KindK, kvwire.KindV} {
			if got := c.KVPage(tc.layer, kind, tc.ord); (got != nil) != tc.ok {
				t.Errorf("KVPage(layer %d, %v, ordinal %d) = %d bytes, want a page: %v", tc.layer, kind, tc.ord, len(got), tc.ok)
			}
		}
	}
}
