package worker

import (
	"context"
	"reflect"
	"testing"
	"time"

	"tandem/internal/engine"
)

// TestDecodeStreamOneTokenPerStep: a decode leg whose reader falls behind
// (here: it reads nothing until the sequence has finished, so the engine's
// Handle holds every step's token merged in one update) still returns one
// token per Next, so the HTTP stream sends one chunk per engine step. Before
// the split, the first Next returned all 6 tokens at once.
func TestDecodeStreamOneTokenPerStep(t *testing.T) {
	pp := newPair(t, 512)
	id := newRoomID()
	req := engine.Request{Prompt: prompt(20), MaxTokens: 6, IgnoreEOS: true}
	ds, ps := pp.submit(t, id, req)
	if _, pl := drain(t, ps); pl.Err != nil {
		t.Fatal(pl.Err)
	}
	deadline := time.Now().Add(time.Minute)
	for st := pp.d.Engine().Stats(); st.Running+st.Waiting > 0 || st.GeneratedTokens < 6; st = pp.d.Engine().Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("the decode sequence did not finish: %+v", st)
		}
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var sizes []int
	for {
		u, err := ds.Next(ctx)
		if err != nil {
			t.Fatalf("Next: %v (sizes so far %v)", err, sizes)
		}
		sizes = append(sizes, len(u.Tokens))
		if u.Done {
			if u.Err != nil {
				t.Fatal(u.Err)
			}
			break
		}
	}
	if !reflect.DeepEqual(sizes, []int{1, 1, 1, 1, 1, 1}) {
		t.Errorf("tokens per Next %v, want one per step for 6 steps", sizes)
	}
}
