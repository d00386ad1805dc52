package worker

import (
	"testing"

	"tandem/internal/pd/room"
)

// TestHTTPStatusOfEveryReason pins the one mapping from a room's reason
// to its leg's HTTP status, for every reason: as a failure of the room
// the leg is on, as a refusal of a request, and as the earlier failure of
// the room a request names. These are the statuses the worker answered
// with when the core and the driver still chose them.
func TestHTTPStatusOfEveryReason(t *testing.T) {
	timeouts := map[room.Reason]bool{room.ReasonHelloTimeout: true, room.ReasonRequestTimeout: true, room.ReasonAllocTimeout: true,
		room.ReasonHandshakeTimeout: true, room.ReasonAdmissionTimeout: true, room.ReasonPrefillTimeout: true,
		room.ReasonProgressTimeout: true, room.ReasonDeadline: true}
	special := map[room.Reason]int{room.ReasonDuplicate: 409, room.ReasonOverloaded: 503, room.ReasonShutdown: 503,
		room.ReasonBadRequest: 400, room.ReasonClientAbort: 499}
	for _, r := range room.Reasons() {
		want := 502
		if timeouts[r] {
			want = 504
		} else if st, ok := special[r]; ok {
			want = st
		}
		if got := httpStatus(r, false); got != want {
			t.Errorf("httpStatus(%v) = %d, want %d", r, got, want)
		}
		wantFailed := 502 // a request for a room that failed here before
		if timeouts[r] {
			wantFailed = 504
		}
		if got := httpStatus(r, true); got != wantFailed {
			t.Errorf("httpStatus(%v, failed earlier) = %d, want %d", r, got, wantFailed)
		}
		if e := legError(r, ""); e.HTTPStatus() != want || e.Reason != r {
			t.Errorf("legError(%v) = %+v, want status %d", r, e, want)
		}
	}
}
