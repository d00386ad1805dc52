package drivertest

import (
	"fmt"
	"testing"

	"tandem/internal/pd/driver"
	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
)

// EngineHost runs a driver.Engine whose reports (KVReady, ComputeDone,
// EngineError, Admitted) go to the suite's Recorder.
type EngineHost[Leg comparable] interface {
	Host
	// Engine returns the implementation under test.
	Engine() driver.Engine[Leg]
	// Role is the engine's side: prefill (StartCompute) or decode (Admit,
	// Resume).
	Role() room.Role
	// Leg returns a new leg for room id, its request taken by the host,
	// and the KV pages its prompt needs. The host's model has no
	// sliding-window layer: every layer's frames are sent.
	Leg(id room.ID) (leg Leg, pages int)
	// Layers is the KV cache's layer count, PageBytes one layer's K (or
	// V) page: one KV frame's data.
	Layers() int
	PageBytes() int
	// StateBytes is the model's recurrent state per sequence (0: none):
	// prefill reports it in state frames after the pages, decode admits a
	// leg with a buffer of this size.
	StateBytes() int
	// Transfer plays decode's transfer for a leg admitted with pages at
	// dest and the state buffer state: it writes the room's KV and state
	// there as its prefill would have computed them, and returns the
	// first token to resume from.
	Transfer(leg Leg, dest driver.Pages, pages []int32, state []byte) driver.Token
	// Held is what the engine holds for legs: pages in use (or, for a
	// prefill that keeps none of its own, KV frames not yet released).
	// It must come back to its value before a leg once the leg ended and
	// every frame it reported was released.
	Held() int
}

// TestEngine checks an Engine against driver.Engine's contract, standing
// in for the driver. Prefill: StartCompute refuses a page count that does
// not fit the prompt (reporting nothing for it); for one that fits, every
// KV frame of the prompt's pages, every layer, K and V, is reported once
// with KVReady, with a page of data, before the one ComputeDone, and no
// EngineError; the frames are released and what the engine held comes
// back; Cancel is idempotent. A model with state reports, after the last
// page frame, each state frame (kind state, layer 0) once,
// kvwire.StateFrameSize each and the last one the rest of StateBytes. Decode: Admit is answered by one
// Admitted with a distinct page per page of the prompt, where they lie, and
// a state buffer of StateBytes; Resume
// on them returns no error and the sequence gives its pages back when it
// ends; a leg cancelled after its admission gives them back too. No call
// reports back synchronously.
func TestEngine[Leg comparable](t testing.TB, h EngineHost[Leg], rec *Recorder[Leg]) {
	switch h.Role() {
	case room.RolePrefill:
		testPrefillEngine(t, h, rec)
	case room.RoleDecode:
		testDecodeEngine(t, h, rec)
	default:
		t.Fatalf("engine host of role %v", h.Role())
	}
}

func testPrefillEngine[Leg comparable](t testing.TB, h EngineHost[Leg], rec *Recorder[Leg]) {
	e := h.Engine()
	held := h.Held()
	bad, pages := h.Leg(roomID('e', 1))
	var err error
	call(t, h, rec, "StartCompute with a page count the prompt does not need", func() { err = e.StartCompute(bad, pages+1) })
	if err == nil {
		t.Errorf("StartCompute(leg of %d pages, %d) = nil, want an error", pages, pages+1)
	}
	leg, pages := h.Leg(roomID('e', 2))
	call(t, h, rec, "StartCompute", func() { err = e.StartCompute(leg, pages) })
	if err != nil {
		t.Fatalf("StartCompute(leg, %d) = %v", pages, err)
	}
	wait(t, h, "ComputeDone or EngineError", func() bool {
		return rec.count(of("compute_done", leg))+rec.count(of("engine_error", leg)) > 0
	})
	// Whatever more was coming has come by now: a second ComputeDone,
	// KV after it, anything for the refused leg.
	h.Settle()
	var frames []driver.KVFrame
	seen := map[kvwire.KV]bool{}
	done, states := 0, 0
	stateN := kvwire.StateFrameSize(h.StateBytes(), h.PageBytes())
	stateFrames := 0
	if stateN > 0 {
		stateFrames = (h.StateBytes() + stateN - 1) / stateN
	}
	for _, c := range rec.Calls(func(c Call[Leg]) bool { return c.Leg == leg }) {
		if c.Room != roomID('e', 2) {
			t.Errorf("%s for the leg of room %v names room %v", describe(c), roomID('e', 2), c.Room)
		}
		switch c.Kind {
		case "kv_ready":
			if done > 0 {
				t.Errorf("KVReady after ComputeDone: DONE would leave before these %d frames", len(c.Frames))
			}
			for _, f := range c.Frames {
				frames = append(frames, f)
				if f.KV.Kind == kvwire.KindState {
					states++
					want := min(stateN, h.StateBytes()-int(f.KV.Ordinal)*stateN)
					switch {
					case int(f.KV.Ordinal) >= stateFrames || f.KV.Layer != 0:
						t.Errorf("state frame %+v outside the %d state frames", f.KV, stateFrames)
					case seen[f.KV]:
						t.Errorf("state frame %+v reported twice", f.KV)
					case len(f.Data) != want:
						t.Errorf("state frame %+v carries %d bytes, want %d", f.KV, len(f.Data), want)
					}
					seen[f.KV] = true
					continue
				}
				if states > 0 {
					t.Errorf("KV frame %+v after a state frame: the state goes after every page", f.KV)
				}
				switch {
				case int(f.KV.Ordinal) >= pages || int(f.KV.Layer) >= h.Layers() || f.KV.Kind > kvwire.KindV:
					t.Errorf("KV frame %+v outside %d pages of %d layers", f.KV, pages, h.Layers())
				case seen[f.KV]:
					t.Errorf("KV frame %+v reported twice", f.KV)
				case len(f.Data) != h.PageBytes():
					t.Errorf("KV frame %+v carries %d bytes, want a page of %d", f.KV, len(f.Data), h.PageBytes())
				}
				seen[f.KV] = true
			}
		case "compute_done":
			done++
		default:
			t.Errorf("prefill engine reported %s", describe(c))
		}
	}
	if want := pages*h.Layers()*2 + stateFrames; len(seen) != want {
		t.Errorf("%d distinct KV frames reported, want %d (%d pages × %d layers × K and V, %d state frames)", len(seen), want, pages, h.Layers(), stateFrames)
	}
	if done != 1 {
		t.Errorf("%d ComputeDone reports, want 1", done)
	}
	if n := rec.count(func(c Call[Leg]) bool { return c.Leg == bad }); n != 0 {
		t.Errorf("%d reports for the leg StartCompute refused, want none", n)
	}
	// The driver's part: release each frame once, end the sequence.
	for _, f := range frames {
		if f.Release != nil {
			f.Release()
		}
	}
	call(t, h, rec, "Cancel", func() { e.Cancel(leg) })
	call(t, h, rec, "Cancel again", func() { e.Cancel(leg) })
	call(t, h, rec, "Cancel of the refused leg", func() { e.Cancel(bad) })
	wait(t, h, fmt.Sprintf("the engine to hold %d again (after every frame was released)", held), func() bool { return h.Held() == held })
}

func testDecodeEngine[Leg comparable](t testing.TB, h EngineHost[Leg], rec *Recorder[Leg]) {
	e := h.Engine()
	held := h.Held()
	admit := func(id room.ID) (Leg, Call[Leg]) {
		t.Helper()
		leg, pages := h.Leg(id)
		var err error
		call(t, h, rec, "Admit", func() { err = e.Admit(leg) })
		if err != nil {
			t.Fatalf("Admit = %v", err)
		}
		wait(t, h, "Admitted", func() bool { return rec.count(of("admitted", leg)) > 0 })
		h.Settle() // a second Admitted, if one is coming
		cs := rec.Calls(of("admitted", leg))
		a := cs[0]
		switch {
		case len(cs) != 1:
			t.Errorf("%d Admitted reports for one Admit, want 1", len(cs))
		case a.Room != id || a.Dest == nil || len(a.Pages) != pages:
			t.Errorf("Admitted(%v, dest %v, pages %v) for room %v, want %d pages and where they lie", a.Room, a.Dest, a.Pages, id, pages)
		case len(a.State) != h.StateBytes():
			t.Errorf("Admitted with a %d-byte state buffer, want %d", len(a.State), h.StateBytes())
		}
		for i, p := range a.Pages {
			for _, q := range a.Pages[:i] {
				if p == q {
					t.Errorf("Admitted pages %v: page %d twice", a.Pages, p)
				}
			}
		}
		return leg, a
	}
	leg, a := admit(roomID('e', 3))
	first := h.Transfer(leg, a.Dest, a.Pages, a.State)
	var err error
	call(t, h, rec, "Resume", func() { err = e.Resume(leg, first) })
	if err != nil {
		t.Fatalf("Resume = %v", err)
	}
	wait(t, h, fmt.Sprintf("the resumed sequence to end and the engine to hold %d again", held), func() bool { return h.Held() == held })
	call(t, h, rec, "Cancel after the sequence ended", func() { e.Cancel(leg) })

	leg2, _ := admit(roomID('e', 4))
	call(t, h, rec, "Cancel", func() { e.Cancel(leg2) })
	call(t, h, rec, "Cancel again", func() { e.Cancel(leg2) })
	wait(t, h, fmt.Sprintf("a cancelled admission to give its pages back (engine holds %d again)", held), func() bool { return h.Held() == held })
	if n := rec.count(func(c Call[Leg]) bool { return c.Kind != "admitted" }); n != 0 {
		t.Errorf("the decode engine made %d reports other than Admitted", n)
	}
}
