package room

import (
	"slices"
	"testing"
)

// stateMachine returns a machine for role whose sequences carry a
// 24-byte recurrent state.
func stateMachine(t *testing.T, role Role, planted PlantedBug) *Machine {
	t.Helper()
	cfg := defaultConfig(role)
	cfg.StateBytes, cfg.Planted = 24, planted
	m, err := New(cfg)
	if err != nil {
		t.Fatalf("New(StateBytes 24): %v", err)
	}
	return m
}

// TestDecodeVerifiesState shows that decode resumes only when DONE's and
// its own counts of the state both equal the configured state and the
// checksum matched, and that the planted bug misses a lost state frame.
func TestDecodeVerifiesState(t *testing.T) {
	id := scenarioID(1)
	tests := []struct {
		name        string
		planted     PlantedBug
		got         int64 // state bytes decode stored (with 64 page bytes)
		done        Event // DONE's Bytes, StateBytes, StateBad
		wantSuccess bool
	}{
		{"whole state", PlantedNone, 24, Event{Bytes: 88, StateBytes: 24}, true},
		{"a state frame lost", PlantedNone, 16, Event{Bytes: 88, StateBytes: 24}, false},
		{"no state sent", PlantedNone, 0, Event{Bytes: 64}, false},
		{"state short on both sides", PlantedNone, 16, Event{Bytes: 80, StateBytes: 16}, false},
		{"checksum mismatch", PlantedNone, 24, Event{Bytes: 88, StateBytes: 24, StateBad: true}, false},
		{"page bytes counted as state", PlantedNone, 24, Event{Bytes: 88, StateBytes: 16}, false},
		{"planted: a state frame lost", PlantedIgnoreState, 16, Event{Bytes: 88, StateBytes: 24}, true},
		{"planted: checksum mismatch", PlantedIgnoreState, 24, Event{Bytes: 88, StateBytes: 24, StateBad: true}, true},
		{"planted: a page lost", PlantedIgnoreState, 24, Event{Bytes: 104, StateBytes: 24}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := stateMachine(t, RoleDecode, tt.planted)
			path := pathTo(id, PhaseAwaitingKV)
			path = append(path, Event{Kind: EventKVReceived, Room: id, Bytes: 64 + tt.got, StateBytes: tt.got},
				Event{Kind: EventFirstToken, Room: id, Peer: testPrefillPeer, Token: 7})
			stepAll(t, m, 1e6, path)
			m.Advance()
			done := tt.done
			done.Kind, done.Room, done.Peer, done.PageCount = EventDone, id, testPrefillPeer, 2
			if o := m.Step(2e6, done); o != OutcomeApplied {
				t.Fatalf("Step(DONE) = %v, want applied", o)
			}
			st, _, _ := m.State(id)
			kinds := effectKinds(m.Ready().Effects)
			if tt.wantSuccess {
				if st != StateSucceeded || !slices.Contains(kinds, EffectResume) {
					t.Errorf("room %v with effects %v, want succeeded and resumed", st, kinds)
				}
				return
			}
			ri, _ := m.Room(id)
			if st != StateFailed || ri.Reason != ReasonProtocol || slices.Contains(kinds, EffectResume) {
				t.Errorf("room %v (%v) with effects %v, want failed (protocol), not resumed", st, ri.Reason, kinds)
			}
		})
	}
}

// TestPrefillSendsState shows that DONE carries the state's count, and that
// a compute that ends before its whole state went out fails the room
// (engine) instead of sending a DONE decode could not resume from.
func TestPrefillSendsState(t *testing.T) {
	id := scenarioID(1)
	for _, sent := range []int64{24, 16, 0} {
		m := stateMachine(t, RolePrefill, PlantedNone)
		path := append(pathTo(id, PhaseComputing), Event{Kind: EventKVSent, Room: id, Bytes: 64 + sent, StateBytes: sent})
		stepAll(t, m, 1e6, path)
		m.Advance()
		m.Step(2e6, Event{Kind: EventComputeDone, Room: id, Token: 7})
		st, _, _ := m.State(id)
		var done *Effect
		for _, e := range m.Ready().Effects {
			if e.Kind == EffectSend && e.Frame == FrameDone {
				done = &e
			}
		}
		if sent == 24 {
			if done == nil || done.Bytes != 88 || done.StateBytes != 24 || st != StateTransferring {
				t.Errorf("whole state sent: DONE %+v, room %v; want DONE with 88 bytes, 24 of state", done, st)
			}
			continue
		}
		ri, _ := m.Room(id)
		if done != nil || st != StateFailed || ri.Reason != ReasonEngine {
			t.Errorf("%d of 24 state bytes sent: DONE %+v, room %v (%v); want no DONE, failed (engine)", sent, done, st, ri.Reason)
		}
	}
	// Progress that counts more state than bytes, or less than before, is
	// rejected.
	m := stateMachine(t, RolePrefill, PlantedNone)
	stepAll(t, m, 1e6, append(pathTo(id, PhaseComputing), Event{Kind: EventKVSent, Room: id, Bytes: 64, StateBytes: 8}))
	for _, ev := range []Event{{Bytes: 64, StateBytes: 72}, {Bytes: 80, StateBytes: 0}} {
		ev.Kind, ev.Room = EventKVSent, id
		if o := m.Step(2e6, ev); o != OutcomeRejected {
			t.Errorf("Step(KV sent %d bytes, %d of state) = %v, want rejected", ev.Bytes, ev.StateBytes, o)
		}
	}
}
