package worker

import (
	"context"
	"testing"
	"time"

	apileg "tandem/internal/api/leg"
	"tandem/internal/engine"
	"tandem/internal/pd/debugdoc"
	"tandem/internal/pd/room"
	"tandem/internal/server"
)

// roomDoc returns room id's entry in w's /debug/rooms document, and the
// document's live count.
func roomDoc(w *Worker, id room.ID) (debugdoc.Room, int, bool) {
	doc := w.Rooms()
	for _, r := range doc.Rooms {
		if r.ID == id.String() {
			return r, doc.Live, true
		}
	}
	return debugdoc.Room{}, doc.Live, false
}

// TestDecodeRoomLiveWhileGenerating: once its KV arrived a decode room's
// core state is succeeded, but its request still generates: /debug/rooms
// shows it as state decoding (not terminal, counted live) with the
// router's trace id until its stream ends, then succeeded with the
// stream's end in its history; a stream cancelled mid-generation ends the
// room failed with reason client_abort.
func TestDecodeRoomLiveWhileGenerating(t *testing.T) {
	pp := newPair(t, 32)
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, abort := range []bool{false, true} {
		id := newRoomID()
		pleg, dleg := pp.legs(id)
		pleg.TraceParent, dleg.TraceParent = tp, tp
		req := engine.Request{Prompt: prompt(20), MaxTokens: 40, IgnoreEOS: true}
		hctx, hcancel := context.WithCancel(context.Background()) // the decode leg's HTTP request
		defer hcancel()
		ds, err := pp.d.SubmitLeg(hctx, dleg, req)
		if err != nil {
			t.Fatal(err)
		}
		ps, err := pp.p.SubmitLeg(context.Background(), pleg, req)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		u, err := ds.Next(ctx) // the first token: the KV arrived, the room core succeeded
		cancel()
		if err != nil || len(u.Tokens) == 0 {
			t.Fatalf("first update %+v, %v", u, err)
		}
		if st, _, _ := pp.d.roomState(id); st != room.StateSucceeded {
			t.Fatalf("decode room core state %v after the first token, want succeeded", st)
		}
		r, live, ok := roomDoc(pp.d, id)
		if !ok || r.State != StateDecoding || r.Terminal() || live < 1 || r.TraceID != "0af7651916cd43dd8448eb211c80319c" {
			t.Errorf("abort %v: while generating /debug/rooms shows %+v (live %d); want state decoding, live, the trace id", abort, r, live)
		}
		want := debugdoc.StateSucceeded
		if abort {
			want = debugdoc.StateFailed
			hcancel() // the router went away mid-generation
		} else {
			drain(t, ds)
		}
		ds.Cancel() // the HTTP handler cancels every stream it followed when it ends
		drain(t, ps)
		ps.Cancel()
		r, _, _ = roomDoc(pp.d, id)
		last := r.History[len(r.History)-1]
		if r.State != want || last.Event != "stream_end" || (abort && r.Reason != room.ReasonClientAbort.String()) {
			t.Errorf("abort %v: after the stream ended /debug/rooms shows state %q reason %q, last transition %+v; want %s", abort, r.State, r.Reason, last, want)
		}
		if p, _, _ := roomDoc(pp.p, id); p.TraceID == "" || p.State != debugdoc.StateSucceeded {
			t.Errorf("prefill room %+v; want succeeded with the trace id", p)
		}
	}
}

// TestDecodeTiming: a decode leg's timing carries the prompt's tokens, the
// tokens generated and the finish reason, for the router's log and span.
func TestDecodeTiming(t *testing.T) {
	pp := newPair(t, 32)
	id := newRoomID()
	ds, ps := pp.submit(t, id, engine.Request{Prompt: prompt(9), MaxTokens: 7, IgnoreEOS: true})
	drain(t, ds)
	drain(t, ps)
	tm, err := apileg.ParseTiming(ds.(server.LegTimer).LegTiming())
	if err != nil || tm.PromptTokens == nil || *tm.PromptTokens != 9 || tm.OutputTokens == nil || *tm.OutputTokens != 7 || tm.Finish != "length" || tm.FirstDecode == nil {
		t.Errorf("decode timing %q: %+v, %v", ds.(server.LegTimer).LegTiming(), tm, err)
	}
	ds.Cancel()
	ps.Cancel()
}
