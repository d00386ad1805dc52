package worker

import (
	"testing"

	apileg "tandem/internal/api/leg"
	"tandem/internal/engine"
	"tandem/internal/pd/room"
	"tandem/internal/server"
)

// TestStatusReportsPrefillQueueTokens: /pd/status carries
// prefill_queue_tokens (engine.Stats.PrefillQueueTokens, 0 on an idle
// worker), which the router picks prefill workers by.
func TestStatusReportsPrefillQueueTokens(t *testing.T) {
	m := tinyModel(t)
	p, _ := newWorker(t, m, room.RolePrefill, 512)
	var status map[string]any
	getJSON(t, p.Handler(), "/pd/status", &status)
	if v, ok := status["prefill_queue_tokens"]; !ok || v != 0.0 {
		t.Errorf("/pd/status prefill_queue_tokens = %v (present %v), want 0 on an idle worker", v, ok)
	}
}

// TestLegTimings: after a room succeeds, the prefill stream reports its
// queue, prefill and transfer times and the decode stream its first
// decode step (leg.HeaderTiming, which the server writes for the router).
func TestLegTimings(t *testing.T) {
	pp := newPair(t, 512)
	id := newRoomID()
	req := engine.Request{Prompt: prompt(40), MaxTokens: 3, IgnoreEOS: true}
	ds, ps := pp.submit(t, id, req)
	for _, st := range []server.Stream{ds, ps} {
		if lt := st.(server.LegTimer).LegTiming(); lt != "" {
			t.Errorf("a stream reports timing %q before it ran", lt)
		}
	}
	if _, dl := drain(t, ds); dl.Err != nil {
		t.Fatal(dl.Err)
	}
	if _, pl := drain(t, ps); pl.Err != nil {
		t.Fatal(pl.Err)
	}
	pt, err := apileg.ParseTiming(ps.(server.LegTimer).LegTiming())
	if err != nil || pt.Queue == nil || pt.Prefill == nil || pt.Transfer == nil || *pt.Prefill <= 0 || *pt.Queue < 0 || *pt.Transfer < 0 || pt.FirstDecode != nil {
		t.Errorf("prefill timing %+v (%v), want queue, prefill > 0 and transfer", pt, err)
	}
	dt, err := apileg.ParseTiming(ds.(server.LegTimer).LegTiming())
	if err != nil || dt.FirstDecode == nil || *dt.FirstDecode < 0 || dt.Queue != nil {
		t.Errorf("decode timing %+v (%v), want first_decode only", dt, err)
	}
}
