package worker

import (
	"slices"
	"testing"

	"tandem/internal/engine"
	"tandem/internal/pd/room"
	"tandem/internal/pd/shm"
)

// TestHappyPathThroughSharedMemory: a prefill and a decode worker on this
// host (the pair of newPair, on 127.0.0.1 with the default
// --kv-transport auto, prefill's cache in a source region) carry every KV
// page as KV_SRC, copied by decode straight out of prefill's cache, the
// result is the colocated one, and prefill's pages all come back
// (newPair's quiet check).
func TestHappyPathThroughSharedMemory(t *testing.T) {
	if !shm.Supported() {
		t.Skip("shared memory needs Linux")
	}
	pp := newPair(t, 32)
	p := prompt(40)
	want := colocated(t, pp.de, p, 8)
	id := newRoomID()
	ds, ps := pp.submit(t, id, engine.Request{Prompt: p, MaxTokens: 8, IgnoreEOS: true})
	got, dl := drain(t, ds)
	drain(t, ps)
	if !slices.Equal(got, want) || dl.Err != nil {
		t.Errorf("disaggregated %v (%v), colocated %v", got, dl.Err, want)
	}
	if st, _, _ := pp.d.roomState(id); st != room.StateSucceeded {
		t.Errorf("decode room state %v, want succeeded", st)
	}
	dc, pc := pp.d.tr.Counters(), pp.p.tr.Counters()
	if dc["shm_src_kv_frames_in"] == 0 || dc["shm_src_kv_frames_in"] != pc["shm_src_kv_frames_out"] || pc["shm_kv_frames_out"] != 0 || dc["kv_discarded_frames"] != 0 {
		t.Errorf("decode counters %v, prefill counters %v: want every KV frame as KV_SRC", dc, pc)
	}
	if peers := pp.p.tr.Peers(); len(peers) != 1 || peers[0].KVOut != "shm-src" {
		t.Errorf("prefill peers %+v, want KV out as shm-src", peers)
	}
}
