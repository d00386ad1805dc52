package worker

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	apileg "tandem/internal/api/leg"
	"tandem/internal/engine"
	"tandem/internal/pd/room"
	"tandem/internal/testenv"
)

// TestPeerQueuesShrink: every distinct X-Tandem-Prefill value a decode leg
// names used to leave a send queue and its goroutine behind forever. Now a
// peer's lanes go as soon as it has no room and nothing to send: after 200
// legs naming 200 closed ports have failed, no lane and no lane goroutine
// is left.
func TestPeerQueuesShrink(t *testing.T) {
	m := tinyModel(t)
	d, _ := newWorker(t, m, room.RoleDecode, 512)
	g0 := runtime.NumGoroutine()
	const n = 200
	for i := range n {
		id := newRoomID()
		id[3], id[4] = byte(i), byte(i>>8)
		li := apileg.Info{Room: id.String(), RequestID: "x", Leg: apileg.KindDecode,
			Prefill: fmt.Sprintf("127.0.0.1:%d", 1+i)} // nothing listens there
		s, err := d.SubmitLeg(context.Background(), li, engine.Request{Prompt: prompt(8), MaxTokens: 2})
		if err != nil {
			t.Fatal(err)
		}
		if _, last := drain(t, s); last.Err == nil {
			t.Fatalf("leg %d to a closed port ended without an error: %+v", i, last)
		}
	}
	// Every leg has ended; the lanes go when their last Sent returns.
	waitFor(t, "no peer lanes left", func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return len(d.lanes) == 0 && d.d.Stats().Peers == 0 && d.d.Live() == 0
	})
	waitFor(t, "lane goroutines gone", func() bool { return runtime.NumGoroutine() <= g0+2 })
	t.Logf("transport peers %d, goroutines %d -> %d", len(d.tr.Peers()), g0, runtime.NumGoroutine())
}

// waitFor polls cond until it holds, failing the test after 10 s (a bound
// for a hung test, not a timing assertion).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, 10*time.Second, what, cond)
}
