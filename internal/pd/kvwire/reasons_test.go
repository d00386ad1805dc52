package kvwire_test

import (
	"errors"
	"testing"

	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
)

// TestReasonWireValues pins the wire value of every failure reason by name:
// renumbering room's enum (a reason inserted mid-list) must not change what
// goes on the wire, and a new reason must get a value of its own.
func TestReasonWireValues(t *testing.T) {
	pinned := map[string]uint8{
		"none": 0, "client_abort": 1, "peer_abort": 2, "peer_failed": 3, "peer_lost": 4, "peer_unreachable": 5,
		"hello_timeout": 6, "request_timeout": 7, "alloc_timeout": 8, "handshake_timeout": 9, "admission_timeout": 10,
		"prefill_timeout": 11, "progress_timeout": 12, "checksum": 13, "protocol": 14, "incompatible": 15,
		"unknown_room": 16, "engine": 17, "shutdown": 18, "deadline": 19, "duplicate_room": 20, "overloaded": 21,
		"bad_request": 22, "send_failed": 23,
	}
	all := append([]room.Reason{room.ReasonNone}, room.Reasons()...)
	if len(all) != len(pinned) {
		t.Errorf("room has %d reasons, %d are pinned here: give the new one the next wire value", len(all), len(pinned))
	}
	seen := map[uint8]room.Reason{}
	for _, r := range all {
		want, ok := pinned[r.String()]
		if !ok {
			t.Errorf("reason %v has no pinned wire value", r)
			continue
		}
		if got := kvwire.ReasonToWire(r); got != want {
			t.Errorf("reason %v goes on the wire as %d, pinned %d", r, got, want)
		}
		if prev, dup := seen[want]; dup {
			t.Errorf("reasons %v and %v share wire value %d", prev, r, want)
		}
		seen[want] = r
		for _, p := range []kvwire.Payload{&kvwire.Abort{Reason: r}, &kvwire.Failed{Reason: r}} {
			enc := p.AppendTo(nil)
			if enc[0] != want {
				t.Errorf("%v(%v) encodes reason byte %d, want %d", p.Type(), r, enc[0], want)
			}
			back, err := kvwire.DecodePayload(p.Type(), enc)
			if err != nil {
				t.Fatal(err)
			}
			if got := reasonOf(back); got != r {
				t.Errorf("%v(%v) decodes as %v", p.Type(), r, got)
			}
		}
	}
	if got := kvwire.ReasonFromWire(250); got != room.ReasonNone {
		t.Errorf("an unknown wire reason reads as %v, want none", got)
	}
}

func reasonOf(p kvwire.Payload) room.Reason {
	switch v := p.(type) {
	case *kvwire.Abort:
		return v.Reason
	case *kvwire.Failed:
		return v.Reason
	}
	return 0
}

// TestAllocPagesMaxIsTheCoresLimit: the room core and the wire agree on
// the largest ALLOC (one constant), an ALLOC that large encodes inside a
// control payload and passes the codec, and one page more is refused.
func TestAllocPagesMaxIsTheCoresLimit(t *testing.T) {
	if kvwire.AllocPagesMax != room.AllocPagesMax {
		t.Fatalf("kvwire.AllocPagesMax %d, room.AllocPagesMax %d: want one limit", kvwire.AllocPagesMax, room.AllocPagesMax)
	}
	pages := make([]int32, kvwire.AllocPagesMax)
	enc := (&kvwire.Alloc{Pages: pages}).AppendTo(nil)
	if len(enc) > kvwire.ControlPayloadBytesMax {
		t.Errorf("an ALLOC of AllocPagesMax pages is %d bytes, above ControlPayloadBytesMax %d", len(enc), kvwire.ControlPayloadBytesMax)
	}
	if err := kvwire.NewHeader(kvwire.TypeAlloc, room.ID{0: 1}, enc).Check(); err != nil {
		t.Errorf("header of the largest ALLOC: %v", err)
	}
	if _, err := kvwire.DecodePayload(kvwire.TypeAlloc, enc); err != nil {
		t.Errorf("the largest ALLOC does not decode: %v", err)
	}
	over := (&kvwire.Alloc{Pages: make([]int32, kvwire.AllocPagesMax+1)}).AppendTo(nil)
	err := kvwire.NewHeader(kvwire.TypeAlloc, room.ID{0: 1}, over).Check()
	if _, derr := kvwire.DecodePayload(kvwire.TypeAlloc, over); err == nil && derr == nil {
		t.Errorf("an ALLOC of AllocPagesMax+1 pages passed the codec")
	} else if err != nil && !errors.Is(err, kvwire.ErrTooLarge) {
		t.Errorf("an ALLOC one page too large: %v, want ErrTooLarge", err)
	}
}
