package drivertest

import (
	"testing"

	"tandem/internal/pd/driver"
	"tandem/internal/pd/room"
)

// LegsHost runs a driver.Legs.
type LegsHost[Leg comparable] interface {
	Host
	// Legs returns the implementation under test.
	Legs() driver.Legs[Leg]
	// Leg returns a new leg of role for room id, its request taken by the
	// host and waiting for its answer.
	Leg(id room.ID, role room.Role) Leg
	// Answer reports what the leg's client got: whether it was answered,
	// whether it succeeded, and the failure's reason.
	Answer(leg Leg) (answered, ok bool, reason room.Reason)
}

// TestLegs checks a Legs against driver.Legs' contract, standing in for
// the driver: Succeed finishes a prefill leg with success; Fail ends a
// leg (either role) with the room's reason, for every reason a room can
// fail with; a leg is answered once, and nothing reports back.
func TestLegs[Leg comparable](t testing.TB, h LegsHost[Leg], rec *Recorder[Leg]) {
	l := h.Legs()
	ok := h.Leg(roomID('l', 0), room.RolePrefill)
	call(t, h, rec, "Succeed", func() { l.Succeed(ok) })
	wait(t, h, "the prefill leg's answer", func() bool { a, _, _ := h.Answer(ok); return a })
	if a, good, why := h.Answer(ok); !a || !good {
		t.Errorf("after Succeed: answered %v, ok %v (%v); want a success", a, good, why)
	}
	n := 1
	for _, role := range []room.Role{room.RolePrefill, room.RoleDecode} {
		for _, reason := range room.Reasons() {
			switch reason {
			case room.ReasonDuplicate, room.ReasonOverloaded, room.ReasonBadRequest:
				continue // these refuse a request; they never fail a room
			}
			leg := h.Leg(roomID('l', n), role)
			n++
			call(t, h, rec, "Fail", func() { l.Fail(leg, reason) })
			wait(t, h, "the failed leg's answer", func() bool { a, _, _ := h.Answer(leg); return a })
			if a, good, why := h.Answer(leg); !a || good || why != reason {
				t.Errorf("%v leg after Fail(%v): answered %v, ok %v, reason %v; want a failure with %v", role, reason, a, good, why, reason)
			}
		}
	}
	h.Settle()
	if a, good, _ := h.Answer(ok); !a || !good {
		t.Errorf("the succeeded leg's answer changed to ok %v", good)
	}
	if n := rec.count(func(Call[Leg]) bool { return true }); n != 0 {
		t.Errorf("Legs made %d reports to the driver, want none", n)
	}
}
