package worker

import (
	"context"
	"sync"
	"testing"

	apileg "tandem/internal/api/leg"
	"tandem/internal/engine"
	"tandem/internal/pd/room"
	"tandem/internal/server"
)

// TestConcurrentClose: several Close calls at once, on a worker with live
// rooms (so the shutdown step takes a while) and peer lanes, neither panic
// nor return before the worker has stopped; a later Close is a no-op.
func TestConcurrentClose(t *testing.T) {
	m := tinyModel(t)
	for iter := range 10 {
		d, _ := newWorker(t, m, room.RoleDecode, 512)
		var streams []server.Stream
		for i := range 50 {
			id := newRoomID()
			id[3], id[4] = byte(i), byte(iter)
			li := apileg.Info{Room: id.String(), RequestID: "x", Leg: apileg.KindDecode, Prefill: "127.0.0.1:1"}
			s, err := d.SubmitLeg(context.Background(), li, engine.Request{Prompt: prompt(8), MaxTokens: 2})
			if err != nil {
				t.Fatal(err)
			}
			streams = append(streams, s)
		}
		var wg sync.WaitGroup
		panics := make(chan any, 4)
		for range 4 {
			wg.Go(func() {
				defer func() {
					if p := recover(); p != nil {
						panics <- p
					}
				}()
				d.Close()
				if d.d.Live() != 0 {
					t.Errorf("Close returned with %d live rooms", d.d.Live())
				}
			})
		}
		wg.Wait()
		close(panics)
		for p := range panics {
			t.Fatalf("iteration %d: concurrent Close panicked: %v", iter, p)
		}
		d.Close()
		for _, s := range streams {
			if _, last := drain(t, s); last.Err == nil {
				t.Errorf("a leg ended without an error after Close: %+v", last)
			}
		}
	}
}
