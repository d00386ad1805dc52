package worker

import (
	"context"
	"io"
	"slices"
	"testing"
	"time"

	"tandem/internal/engine"
	"tandem/internal/engine/kernels"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
	"tandem/internal/fixture"
	"tandem/internal/pd/room"
	"tandem/internal/pd/shm"
	"tandem/internal/pd/transfer"
	"tandem/internal/server"
	"tandem/internal/synth"
)

// hybridModel synthesizes a small hybrid model of arch (qwen35, qwen35moe):
// eight blocks, every fourth one full attention, so two of eight layers
// keep KV pages and six carry recurrent state.
func hybridModel(t *testing.T, arch string) *model.Model {
	t.Helper()
	cfg, _ := synth.Preset("tiny")
	cfg.Arch, cfg.Layers = arch, 8
	return fixture.Synth(t, cfg, tensor.Q8_0, 5)
}

// newHybridWorker starts a worker on m whose KV goes through kv.
func newHybridWorker(t *testing.T, m *model.Model, role room.Role, batch int, kv transfer.KVTransport) (*Worker, *engine.Engine) {
	t.Helper()
	return newHybridWorkerCfg(t, m, role, batch, kv, false)
}

// newHybridWorkerCfg is newHybridWorker with the engine's prefix cache on
// or off.
func newHybridWorkerCfg(t *testing.T, m *model.Model, role room.Role, batch int, kv transfer.KVTransport, prefix bool) (*Worker, *engine.Engine) {
	t.Helper()
	pool := kernels.NewPool(1)
	ecfg := engine.Config{KVType: tensor.F16, Pages: 96, MaxBatchTokens: batch, StateSlots: 8, PrefixCache: prefix}
	var src *shm.Source
	if role == room.RolePrefill && kv != transfer.KVTCP && shm.Supported() {
		ecfg.KVMemory = func(n int) ([]byte, error) {
			var err error
			if src, err = shm.CreateSource(n); err != nil {
				return nil, err
			}
			return src.Data(), nil
		}
	}
	e, err := engine.New(model.NewRunner(m, pool), ecfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := New(e, Config{Role: role, Room: testRoomConfig(), Transfer: transfer.Config{ListenAddr: "127.0.0.1:0", KVTransport: kv,
		ClusterToken: []byte("0123456789abcdef-test-token"), HeartbeatInterval: heartbeat, ShmSource: src}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.Close()
		e.Close()
		pool.Close()
		if src != nil {
			src.Close()
		}
	})
	return w, e
}

// drainTokens reads a stream to its end and returns its tokens.
func drainTokens(t *testing.T, s server.Stream) []engine.Token {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out []engine.Token
	for {
		u, err := s.Next(ctx)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		if u.Err != nil {
			t.Fatalf("stream failed: %v", u.Err)
		}
		out = append(out, u.Tokens...)
		if u.Done {
			return out
		}
	}
}

// TestHybridMatchesColocated: on qwen35 and qwen35moe files (recurrent
// state in six of eight layers), a disaggregated request gives, token for
// token and logprob for logprob, what the same engine gives colocated, over
// TCP and with shared memory, for prompts shorter than a page, over a page
// and over several prefill chunks; each room moved exactly the
// full-attention layers' pages and the state, as the shape computes them.
func TestHybridMatchesColocated(t *testing.T) {
	for _, arch := range []string{"qwen35", "qwen35moe"} {
		m := hybridModel(t, arch)
		if m.StateSize() == 0 {
			t.Fatalf("%s: the model has no recurrent state", arch)
		}
		for _, kv := range []transfer.KVTransport{transfer.KVTCP, transfer.KVAuto} {
			if kv == transfer.KVAuto && !shm.Supported() {
				continue
			}
			t.Run(arch+"/"+kv.String(), func(t *testing.T) {
				p, pe := newHybridWorker(t, m, room.RolePrefill, 32, kv)
				d, de := newHybridWorker(t, m, room.RoleDecode, 512, kv)
				pp := &pair{p: p, d: d, pe: pe, de: de, m: m}
				pp.pFree = pe.Stats().PagesTot - pe.Stats().PagesUsed
				pp.dFree = de.Stats().PagesTot - de.Stats().PagesUsed
				t.Cleanup(func() { pp.checkQuiet(t) })
				shape := d.Shape()
				if int(shape.Layers) != 2 || int(shape.StateBytes) != 4*m.StateSize() || shape.StateLayout == "" {
					t.Fatalf("shape %+v: want 2 KV layers and the model's %d-float state", shape, m.StateSize())
				}
				for _, n := range []int{3, 17, 100} {
					prompt := prompt(n)
					req := engine.Request{Prompt: prompt, MaxTokens: 12, IgnoreEOS: true, TopLogprobs: 2}
					h, err := de.Submit(context.Background(), req)
					if err != nil {
						t.Fatal(err)
					}
					want := drainTokens(t, server.Stream(h))
					id := newRoomID()
					ds, ps := pp.submit(t, id, req)
					got := drainTokens(t, ds)
					if pid, pl := drain(t, ps); pl.Err != nil || len(pid) != 1 {
						t.Fatalf("prompt %d: prefill leg gave %v, %v", n, pid, pl.Err)
					}
					if len(got) != len(want) {
						t.Fatalf("prompt %d: %d tokens disaggregated, %d colocated", n, len(got), len(want))
					}
					for i := range got {
						if got[i].ID != want[i].ID || got[i].Logprob != want[i].Logprob || !slices.Equal(got[i].Top, want[i].Top) {
							t.Errorf("prompt %d token %d: disaggregated %+v, colocated %+v", n, i, got[i], want[i])
						}
					}
					// Bytes moved: the full-attention layers' pages (K and V)
					// and the state, computed from the shape.
					pages := (n + int(shape.PageTokens) - 1) / int(shape.PageTokens)
					wantBytes := int64(pages)*int64(shape.Layers)*2*shape.PageBytes() + int64(shape.StateBytes)
					for _, w := range []*Worker{p, d} {
						info, ok := w.roomInfo(id)
						if !ok || info.State != room.StateSucceeded || info.Bytes != wantBytes {
							t.Errorf("prompt %d: %s room %v moved %d bytes, want %d (%d pages x %d layers x K,V x %d + %d state)",
								n, w.role.String(), info.State, info.Bytes, wantBytes, pages, shape.Layers, shape.PageBytes(), shape.StateBytes)
						}
					}
				}
				// With shared memory the pages come out of prefill's cache
				// (KV_SRC) and the state, which lives outside it, through
				// the ring (KV_SHM): 3 rooms, one state each.
				c := d.tr.Counters()
				stateFrames := 3 * shape.StateFrames()
				if kv == transfer.KVAuto && (c["shm_src_kv_frames_in"] == 0 || c["shm_kv_frames_in"] != uint64(stateFrames)) {
					t.Errorf("shared memory: %d KV_SRC frames, %d ring frames in; want pages as KV_SRC and the %d state frames through the ring",
						c["shm_src_kv_frames_in"], c["shm_kv_frames_in"], stateFrames)
				}
				if kv == transfer.KVTCP && c["shm_src_kv_frames_in"]+c["shm_kv_frames_in"] != 0 {
					t.Errorf("--kv-transport tcp used shared memory: %v", c)
				}
				t.Logf("shape %+v: %d bytes of state per room in %d state frames of %d bytes at most", shape, shape.StateBytes,
					shape.StateFrames(), shape.StateFrameBytes(0))
			})
		}
	}
}

// TestHybridPrefixCacheOnPrefill: with the prefill engine's prefix cache on,
// prompts that share a prefix (a repeat, and a longer one) still ship their
// whole final state and pages, and decode continues exactly as colocated.
func TestHybridPrefixCacheOnPrefill(t *testing.T) {
	m := hybridModel(t, "qwen35")
	p, pe := newHybridWorkerCfg(t, m, room.RolePrefill, 32, transfer.KVTCP, true)
	d, de := newHybridWorker(t, m, room.RoleDecode, 512, transfer.KVTCP)
	pp := &pair{p: p, d: d, pe: pe, de: de, m: m}
	shared := prompt(70)
	for i, pr := range [][]int32{shared, shared, append(slices.Clone(shared), 7, 8, 9, 10, 11)} {
		req := engine.Request{Prompt: pr, MaxTokens: 8, IgnoreEOS: true, TopLogprobs: 2}
		h, err := de.Submit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		want := drainTokens(t, server.Stream(h))
		id := newRoomID()
		ds, ps := pp.submit(t, id, req)
		got := drainTokens(t, ds)
		drain(t, ps)
		for j := range min(len(got), len(want)) {
			if got[j].ID != want[j].ID || got[j].Logprob != want[j].Logprob {
				t.Errorf("prompt %d token %d: disaggregated %+v, colocated %+v", i, j, got[j], want[j])
			}
		}
		if len(got) != len(want) {
			t.Errorf("prompt %d: %d tokens disaggregated, %d colocated", i, len(got), len(want))
		}
	}
	// Quiet: no room left, decode's pages all free, prefill's only the
	// cached (evictable) ones, every state slot back.
	deadline := time.Now().Add(10 * time.Second)
	for {
		ps, ds := pe.Stats(), de.Stats()
		if p.live() == 0 && d.live() == 0 && ds.PagesUsed == 0 && ps.PagesUsed == ps.PagesEvictable &&
			ps.StateSlotsUsed+ds.StateSlotsUsed == 0 {
			if ps.StateSnapshotHits == 0 {
				t.Errorf("prefill engine %+v: the repeated prefix never hit a state snapshot", ps)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not quiet: live rooms %d %d; prefill %+v; decode %+v", p.live(), d.live(), ps, ds)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
