package inspect

import (
	"bytes"
	"strings"
	"testing"

	"tandem/internal/pd/debugdoc"
)

// TestFindRequest: a request's rooms on every process are picked by its
// request id, a room id or its trace id; a decode room still generating
// makes it live; other requests' rooms are left out.
func TestFindRequest(t *testing.T) {
	c := &debugdoc.Cluster{Processes: []debugdoc.Rooms{
		{Worker: "router", Role: "router", Rooms: []debugdoc.Room{
			{ID: "r1", RequestID: "req-a", TraceID: "t1", State: "streaming"},
			{ID: "r2", RequestID: "req-b", State: "succeeded"}}},
		{Worker: "http://p", Role: "prefill", Rooms: []debugdoc.Room{{ID: "r1", RequestID: "req-a", TraceID: "t1", State: "succeeded"}}},
		{Worker: "http://d", Role: "decode", Rooms: []debugdoc.Room{
			{ID: "r1", RequestID: "req-a", TraceID: "t1", State: "decoding", Phase: "generating"},
			{ID: "r2", RequestID: "req-b", State: "succeeded"}}},
	}}
	for _, id := range []string{"req-a", "r1", "t1"} {
		v := FindRequest(c, id)
		if v.RequestID != "req-a" || v.TraceID != "t1" || !v.Live || len(v.Processes) != 3 {
			t.Fatalf("FindRequest(%s) = %+v", id, v)
		}
		for _, p := range v.Processes {
			if len(p.Rooms) != 1 || p.Rooms[0].RequestID != "req-a" {
				t.Errorf("%s: rooms %+v", p.Worker, p.Rooms)
			}
		}
	}
	var b bytes.Buffer
	if err := writeRequest(&b, FindRequest(c, "req-a")); err != nil {
		t.Fatal(err)
	}
	if s := b.String(); !strings.Contains(s, "request req-a: live, trace t1") || !strings.Contains(s, "decoding/generating") {
		t.Errorf("writeRequest:\n%s", s)
	}
	if v := FindRequest(c, "req-b"); v.Live || len(v.Processes) != 2 {
		t.Errorf("FindRequest(req-b) = %+v; want finished, on the router and decode", v)
	}
	if v := FindRequest(c, "nope"); len(v.Processes) != 0 {
		t.Errorf("FindRequest(nope) = %+v", v)
	}
}
