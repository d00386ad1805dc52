package debugdoc_test

import (
	"encoding/json"
	"testing"
	"time"

	"tandem/internal/pd/debugdoc"
)

// workerDoc is a worker's /debug/rooms document exactly as
// internal/pd/worker emitted it before this package existed (its
// RoomsJSON, RoomJSON and TransitionJSON): a live room with a deadline and
// a failed one with a reason, without.
const workerDoc = `{"role":"prefill","transfer_addr":"127.0.0.1:9","live":1,"rooms":[` +
	`{"id":"0123456789abcdef0123456789abcdef","request_id":"req-1","state":"transferring","phase":"sending","peer":"127.0.0.1:7","age_ms":12.5,"deadline_in_ms":-3.25,"bytes":4096,"history":[{"at_ms":0,"from":"none","to":"bootstrapping","phase":"awaiting_hello","event":"request"}]},` +
	`{"id":"ffffffffffffffffffffffffffffffff","request_id":"req-2","state":"failed","phase":"done","reason":"peer_lost","peer":"","age_ms":1,"bytes":0,"history":[{"at_ms":1,"from":"transferring","to":"failed","phase":"done","event":"peer_lost","reason":"peer_lost"}]}]}`

func TestWorkerDocumentRoundTripsUnchanged(t *testing.T) {
	var doc debugdoc.Rooms
	if err := json.Unmarshal([]byte(workerDoc), &doc); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != workerDoc {
		t.Errorf("the worker's document re-encodes as\n%s\nwant it unchanged\n%s", b, workerDoc)
	}
}

func TestTerminalAndOverdue(t *testing.T) {
	ms := func(v float64) *float64 { return &v }
	cases := []struct {
		state             string
		deadline          *float64
		terminal, overdue bool
		pastMS            float64
	}{
		{"transferring", ms(10), false, false, 0},
		{"transferring", nil, false, false, 0},
		{"transferring", ms(-500), false, false, 500},   // within the watchdog's grace
		{"transferring", ms(-1000), false, false, 1000}, // exactly the grace: not yet
		{"transferring", ms(-1500), false, true, 1500},
		{"streaming", ms(-2000), false, true, 2000},
		{"succeeded", ms(-5000), true, false, 0},
		{"failed", ms(-5000), true, false, 0},
		{"done", nil, false, false, 0}, // not a terminal spelling: states are succeeded or failed
	}
	for _, tc := range cases {
		r := debugdoc.Room{State: tc.state, DeadlineInMS: tc.deadline}
		if r.Terminal() != tc.terminal || r.Overdue() != tc.overdue || r.PastDeadlineMS() != tc.pastMS {
			t.Errorf("%s deadline %v: Terminal %v Overdue %v PastDeadlineMS %v, want %v %v %v", tc.state, tc.deadline,
				r.Terminal(), r.Overdue(), r.PastDeadlineMS(), tc.terminal, tc.overdue, tc.pastMS)
		}
	}
	late := debugdoc.Room{State: "transferring", DeadlineInMS: ms(-500)}
	if !late.OverdueBy(0) || late.OverdueBy(time.Second) {
		t.Errorf("OverdueBy: 500 ms late is overdue with no grace, not with 1 s")
	}
}
