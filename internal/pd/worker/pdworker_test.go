package worker

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	apileg "tandem/internal/api/leg"
	"tandem/internal/engine"
	"tandem/internal/engine/kernels"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
	"tandem/internal/fixture"
	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
	"tandem/internal/pd/shm"
	"tandem/internal/pd/transfer"
	"tandem/internal/server"
)

// heartbeat is the test workers' heartbeat interval; a peer silent for two
// of them is lost. 250 ms keeps a loaded 2-core machine running -race from
// starving a heartbeat past the peer timeout (at 50 ms it did: rooms failed
// peer_lost mid-transfer), while peer-loss tests still end within a second.
const heartbeat = 250 * time.Millisecond

func tinyModel(t *testing.T) *model.Model {
	t.Helper()
	return fixture.Tiny(t, tensor.Q8_0, 5)
}

// pair is a prefill and a decode worker connected over loopback TCP.
type pair struct {
	p, d   *Worker
	pe, de *engine.Engine
	pFree  int
	dFree  int
	m      *model.Model
	// expectWatchdog marks the test that disables the timer on purpose.
	expectWatchdog bool
}

func testRoomConfig() room.Config {
	c := DefaultRoomConfig()
	s := func(d time.Duration) room.Duration { return room.Duration(d) }
	c.HelloTimeout, c.RequestTimeout, c.AllocTimeout = s(2*time.Second), s(2*time.Second), s(5*time.Second)
	c.HandshakeTimeout, c.AdmissionTimeout, c.PrefillTimeout, c.ProgressTimeout = s(2*time.Second), s(4*time.Second), s(5*time.Second), s(3*time.Second)
	c.TombstoneTTL = s(time.Minute)
	return c
}

func newWorker(t *testing.T, m *model.Model, role room.Role, batch int) (*Worker, *engine.Engine) {
	t.Helper()
	return newWorkerCfg(t, m, role, batch, testRoomConfig(), false)
}

// newWorkerCfg starts a worker as tandem does: a prefill worker's KV
// cache in a shared-memory source region on Linux (so decode workers on
// this host copy its pages straight out of it, KV_SRC).
func newWorkerCfg(t *testing.T, m *model.Model, role room.Role, batch int, rc room.Config, noTimer bool) (*Worker, *engine.Engine) {
	t.Helper()
	pool := kernels.NewPool(1)
	ecfg := engine.Config{KVType: tensor.F16, Pages: 96, MaxBatchTokens: batch}
	var src *shm.Source
	if role == room.RolePrefill && shm.Supported() {
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
	w, err := New(e, Config{Role: role, Room: rc, noTimer: noTimer, Transfer: transfer.Config{ListenAddr: "127.0.0.1:0",
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

func newPair(t *testing.T, prefillBatch int) *pair {
	t.Helper()
	m := tinyModel(t)
	pp := &pair{m: m}
	pp.p, pp.pe = newWorker(t, m, room.RolePrefill, prefillBatch)
	pp.d, pp.de = newWorker(t, m, room.RoleDecode, 512)
	pp.pFree = pp.pe.Stats().PagesTot - pp.pe.Stats().PagesUsed
	pp.dFree = pp.de.Stats().PagesTot - pp.de.Stats().PagesUsed
	t.Cleanup(func() { pp.checkQuiet(t) })
	return pp
}

// checkQuiet waits until every room on both sides is terminal and both
// page pools are back to their initial free counts.
func (pp *pair) checkQuiet(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pl, dl := pp.p.live(), pp.d.live()
		ps, ds := pp.pe.Stats(), pp.de.Stats()
		pf, df := ps.PagesTot-ps.PagesUsed, ds.PagesTot-ds.PagesUsed
		if pl == 0 && dl == 0 && pf == pp.pFree && df == pp.dFree && ps.Running+ps.Waiting+ds.Running+ds.Waiting == 0 {
			for _, w := range []*Worker{pp.p, pp.d} {
				if n := w.counters().Failures(room.ReasonDeadline); n != 0 && !pp.expectWatchdog {
					t.Errorf("%s: the watchdog failed %d rooms; with a working timer it must never fire", w.role.String(), n)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("not quiet: live rooms prefill %d decode %d; free pages prefill %d/%d decode %d/%d; engines %+v %+v\nprefill rooms %+v\ndecode rooms %+v",
				pl, dl, pf, pp.pFree, df, pp.dFree, ps, ds, pp.p.Rooms(), pp.d.Rooms())
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (w *Worker) live() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.d.Live()
}

func (w *Worker) roomState(id room.ID) (room.State, room.Phase, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.d.State(id)
}

var roomSeq byte

func newRoomID() room.ID {
	roomSeq++
	var id room.ID
	id[0], id[15] = 0xAB, roomSeq
	id[7] = byte(time.Now().UnixNano())
	return id
}

// legs returns the prefill and decode legs of room id, as the router
// signs them.
func (pp *pair) legs(id room.ID) (pleg, dleg apileg.Info) {
	pleg = apileg.Info{Room: id.String(), RequestID: "req-" + id.String()[:6], Leg: apileg.KindPrefill}
	dleg = apileg.Info{Room: id.String(), RequestID: "req-" + id.String()[:6], Leg: apileg.KindDecode, Prefill: pp.p.TransferAddr()}
	return pleg, dleg
}

// submit sends req as both legs of room id, decode's first (as the router
// does), and returns the two streams.
func (pp *pair) submit(t *testing.T, id room.ID, req engine.Request) (ds, ps server.Stream) {
	t.Helper()
	pleg, dleg := pp.legs(id)
	ds, err := pp.d.SubmitLeg(context.Background(), dleg, req)
	if err != nil {
		t.Fatal(err)
	}
	ps, err = pp.p.SubmitLeg(context.Background(), pleg, req)
	if err != nil {
		t.Fatal(err)
	}
	return ds, ps
}

func prompt(n int) []int32 {
	p := []int32{1}
	for i := 1; i < n; i++ {
		p = append(p, int32(3+(i*37)%500))
	}
	return p
}

// drain reads a stream to its end and returns its token ids and final update.
func drain(t *testing.T, s server.Stream) ([]int32, engine.Update) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ids []int32
	var last engine.Update
	for {
		u, err := s.Next(ctx)
		if err == io.EOF {
			return ids, last
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		for _, tk := range u.Tokens {
			ids = append(ids, tk.ID)
		}
		last = u
		if u.Done {
			return ids, last
		}
	}
}

func colocated(t *testing.T, e *engine.Engine, p []int32, n int) []int32 {
	t.Helper()
	h, err := e.Submit(context.Background(), engine.Request{Prompt: p, MaxTokens: n, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	s := server.Stream(h)
	ids, _ := drain(t, s)
	return ids
}

func TestHappyPathMatchesColocated(t *testing.T) {
	pp := newPair(t, 32)
	for _, n := range []int{3, 17, 100} {
		p := prompt(n)
		want := colocated(t, pp.de, p, 12)
		id := newRoomID()
		pleg, dleg := pp.legs(id)
		req := engine.Request{Prompt: p, MaxTokens: 12, IgnoreEOS: true}
		ds, err := pp.d.SubmitLeg(context.Background(), dleg, req)
		if err != nil {
			t.Fatal(err)
		}
		ps, err := pp.p.SubmitLeg(context.Background(), pleg, req)
		if err != nil {
			t.Fatal(err)
		}
		got, dl := drain(t, ds)
		pid, pl := drain(t, ps)
		if !slices.Equal(got, want) {
			t.Errorf("prompt %d: disaggregated %v, colocated %v", n, got, want)
		}
		if dl.Err != nil || pl.Err != nil || len(pid) != 1 || pid[0] != want[0] {
			t.Errorf("prompt %d: decode final %+v, prefill ids %v final %+v", n, dl, pid, pl)
		}
		for _, w := range []*Worker{pp.p, pp.d} {
			if st, _, _ := w.roomState(id); st != room.StateSucceeded {
				t.Errorf("prompt %d: %s room state %v, want succeeded", n, w.role.String(), st)
			}
		}
	}
}

// waitPhase polls until the room reaches a phase on w (or fails the test).
func waitPhase(t *testing.T, w *Worker, id room.ID, want ...room.Phase) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, ph, ok := w.roomState(id)
		if ok && slices.Contains(want, ph) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s room %s never reached %v (now %v, known %v)", w.role.String(), id, want, ph, ok)
		}
		time.Sleep(time.Millisecond)
	}
}

func wantFailed(t *testing.T, w *Worker, id room.ID, reasons ...room.Reason) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, ok := w.roomInfo(id)
		if ok && info.State == room.StateFailed {
			if !slices.Contains(reasons, info.Reason) {
				t.Errorf("%s room failed with %v, want one of %v", w.role.String(), info.Reason, reasons)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s room %s not failed: %+v (known %v)", w.role.String(), id, info, ok)
		}
		time.Sleep(time.Millisecond)
	}
}

func (w *Worker) counters() room.Counters {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.d.Counters()
}

func (w *Worker) roomInfo(id room.ID) (room.RoomInfo, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.d.Room(id)
}

// TestClientAbortAtEachStage cancels a leg at each stage of the handoff.
func TestClientAbortAtEachStage(t *testing.T) {
	for _, tc := range []struct {
		name  string
		leg   string // which leg the client (router) cancels
		phase []room.Phase
		on    string // whose phase to wait for
	}{
		{"decode-before-prefill-leg", "decode", []room.Phase{room.PhaseAwaitingKV, room.PhaseAdmission}, "decode"},
		{"decode-during-transfer", "decode", []room.Phase{room.PhaseReceiving}, "decode"},
		{"prefill-before-alloc", "prefill", []room.Phase{room.PhaseAwaitingHello}, "prefill"},
		{"prefill-while-computing", "prefill", []room.Phase{room.PhaseComputing, room.PhaseSending}, "prefill"},
		{"decode-after-success", "decode", []room.Phase{room.PhaseDone}, "decode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pp := newPair(t, 16) // small prefill chunks: a long prompt transfers over many steps
			id := newRoomID()
			pleg, dleg := pp.legs(id)
			req := engine.Request{Prompt: prompt(600), MaxTokens: 200, IgnoreEOS: true}
			var ds, ps server.Stream
			var err error
			if tc.name != "prefill-before-alloc" {
				if ds, err = pp.d.SubmitLeg(context.Background(), dleg, req); err != nil {
					t.Fatal(err)
				}
			}
			if tc.name != "decode-before-prefill-leg" {
				if ps, err = pp.p.SubmitLeg(context.Background(), pleg, req); err != nil {
					t.Fatal(err)
				}
			}
			w := pp.d
			if tc.on == "prefill" {
				w = pp.p
			}
			waitPhase(t, w, id, tc.phase...)
			if tc.leg == "decode" {
				ds.Cancel()
			} else {
				ps.Cancel()
			}
			if tc.name == "decode-after-success" {
				if _, last := drain(t, ds); last.Finish != engine.FinishCancelled {
					t.Errorf("decode final %+v, want cancelled", last)
				}
				return
			}
			other, otherStream := pp.p, ps
			if tc.leg == "prefill" {
				other, otherStream = pp.d, ds
			}
			wantFailed(t, w, id, room.ReasonClientAbort)
			if tc.name == "decode-before-prefill-leg" {
				// prefill had only the parked HELLO; the ABORT ended it, and the
				// router's late prefill leg is answered at once (the silent pin).
				wantFailed(t, other, id, room.ReasonPeerAbort)
				// Submit answers a rejected leg itself, so an error here is immediate.
				_, err := pp.p.SubmitLeg(context.Background(), pleg, req)
				var le *Error
				if !errors.As(err, &le) || le.Status != http.StatusBadGateway {
					t.Errorf("late prefill leg: %v, want an immediate 502", err)
				}
				return
			}
			if tc.name == "prefill-before-alloc" {
				// decode never heard of the room; when its leg comes late, its
				// HELLO meets prefill's tombstone and it fails at once.
				if _, ok := pp.d.roomInfo(id); ok {
					t.Errorf("decode has a room it was never asked for")
				}
				ds, err := pp.d.SubmitLeg(context.Background(), dleg, req)
				if err != nil {
					t.Fatal(err)
				}
				// failed by prefill's answer, not by its own handshake timeout
				wantFailed(t, pp.d, id, room.ReasonPeerFailed, room.ReasonPeerAbort)
				if _, last := drain(t, ds); last.Err == nil {
					t.Errorf("late decode leg ended without an error: %+v", last)
				}
				return
			}
			wantFailed(t, other, id, room.ReasonPeerAbort)
			if otherStream != nil {
				_, last := drain(t, otherStream)
				if last.Err == nil {
					t.Errorf("the other leg's stream ended without an error: %+v", last)
				}
			}
		})
	}
}

// TestPrefillFailsMidTransfer: the prefill worker shuts down while pages
// are in flight; decode fails the room and frees its pages.
func TestPrefillFailsMidTransfer(t *testing.T) {
	pp := newPair(t, 16)
	id := newRoomID()
	pleg, dleg := pp.legs(id)
	req := engine.Request{Prompt: prompt(600), MaxTokens: 20, IgnoreEOS: true}
	ds, err := pp.d.SubmitLeg(context.Background(), dleg, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pp.p.SubmitLeg(context.Background(), pleg, req); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, pp.d, id, room.PhaseReceiving)
	pp.p.Close()
	wantFailed(t, pp.d, id, room.ReasonPeerAbort, room.ReasonPeerLost)
	if _, last := drain(t, ds); last.Err == nil {
		t.Errorf("decode stream ended without an error: %+v", last)
	}
}

// TestPeerKilled: the prefill worker's connections vanish without a word
// (as when its process is killed); decode fails its rooms as peer_lost
// (the transport's heartbeat timeout, not a room deadline).
func TestPeerKilled(t *testing.T) {
	pp := newPair(t, 16)
	id := newRoomID()
	_, dleg := pp.legs(id)
	req := engine.Request{Prompt: prompt(600), MaxTokens: 20, IgnoreEOS: true}
	ds, err := pp.d.SubmitLeg(context.Background(), dleg, req)
	if err != nil {
		t.Fatal(err)
	}
	// Only decode's side: prefill never gets its leg, so the room waits in
	// AwaitingKV on decode with prefill alive until we kill it.
	waitPhase(t, pp.d, id, room.PhaseAwaitingKV)
	pp.p.tr.Close() // no ABORT, no shutdown: the peer just disappears
	wantFailed(t, pp.d, id, room.ReasonPeerLost)
	if _, last := drain(t, ds); last.Err == nil {
		t.Errorf("decode stream ended without an error: %+v", last)
	}
	pp.p.step(room.Event{Kind: room.EventShutdown}) // its own parked room
}

// TestLateFrameForFinishedRoom: frames for a room that already succeeded
// change nothing and write no page: the KV frame is discarded (counted as
// unknown_or_finished_room), DONE and ABORT are counted late.
func TestLateFrameForFinishedRoom(t *testing.T) {
	pp := newPair(t, 512)
	id := newRoomID()
	req := engine.Request{Prompt: prompt(20), MaxTokens: 4, IgnoreEOS: true}
	ds, ps := pp.submit(t, id, req)
	if _, last := drain(t, ds); last.Err != nil {
		t.Fatalf("decode leg: %v", last.Err)
	}
	if _, last := drain(t, ps); last.Err != nil {
		t.Fatalf("prefill leg: %v", last.Err)
	}
	before := pp.d.counters()
	dropsBefore := kvDrops(pp.d, "unknown_or_finished_room")
	ctx := context.Background()
	kvPage := make([]byte, pp.d.kvCfg.PageBytes())
	done := (&kvwire.Done{PageCount: 1, Bytes: 1}).AppendTo(nil)
	abort := (&kvwire.Abort{Reason: room.ReasonPeerAbort, Message: "late"}).AppendTo(nil)
	for _, send := range []func() error{
		func() error { return pp.p.tr.SendKV(ctx, pp.d.TransferAddr(), id, kvwire.KV{}, kvPage) },
		func() error { return pp.p.tr.Send(ctx, pp.d.TransferAddr(), kvwire.TypeDone, id, done) },
		func() error { return pp.p.tr.Send(ctx, pp.d.TransferAddr(), kvwire.TypeAbort, id, abort) },
	} {
		if err := send(); err != nil {
			t.Fatal(err)
		}
	}
	// DONE and ABORT arrive after the KV frame on the same connection.
	waitFor(t, "the late DONE and ABORT to be counted", func() bool { return pp.d.counters().Late >= before.Late+2 })
	if got := kvDrops(pp.d, "unknown_or_finished_room"); got != dropsBefore+1 {
		t.Errorf("late KV frame: unknown_or_finished_room drops %v -> %v, want one more", dropsBefore, got)
	}
	if st, _, _ := pp.d.roomState(id); st != room.StateSucceeded {
		t.Errorf("decode room changed to %v after late frames", st)
	}
}

// kvDrops reads tandem_pd_kv_frames_dropped_total{why}.
func kvDrops(w *Worker, why string) float64 {
	var m dto.Metric
	if err := w.met.kvDrops.WithLabelValues(why).Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

// TestDuplicateRoom: a second leg with a live room's id gets 409 and the
// first goes on to succeed.
func TestDuplicateRoom(t *testing.T) {
	pp := newPair(t, 512)
	id := newRoomID()
	pleg, dleg := pp.legs(id)
	req := engine.Request{Prompt: prompt(40), MaxTokens: 6, IgnoreEOS: true}
	ds, err := pp.d.SubmitLeg(context.Background(), dleg, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pp.d.SubmitLeg(context.Background(), dleg, req); err == nil {
		t.Errorf("duplicate decode leg accepted")
	} else if le := (*Error)(nil); !errors.As(err, &le) || le.Status != http.StatusConflict {
		t.Errorf("duplicate decode leg: %v, want 409", err)
	}
	ps, err := pp.p.SubmitLeg(context.Background(), pleg, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pp.p.SubmitLeg(context.Background(), pleg, req); err == nil {
		t.Errorf("duplicate prefill leg accepted")
	} else if le := (*Error)(nil); !errors.As(err, &le) || le.Status != http.StatusConflict {
		t.Errorf("duplicate prefill leg: %v, want 409", err)
	}
	ids, last := drain(t, ds)
	drain(t, ps)
	if len(ids) != 6 || last.Err != nil {
		t.Errorf("first request after a duplicate: ids %v final %+v", ids, last)
	}
}

// TestWatchdogCatchesAStuckTimer: with the deadline timer disabled, a room
// left waiting past its deadline is failed by the watchdog with reason
// "deadline" and its pages come back.
func TestWatchdogCatchesAStuckTimer(t *testing.T) {
	m := tinyModel(t)
	rc := testRoomConfig()
	rc.PrefillTimeout = room.Duration(200 * time.Millisecond)
	pp := &pair{m: m, expectWatchdog: true}
	// prefill waits long for the router's leg, so its own timeout cannot
	// end the room (with an ABORT to decode) before decode's watchdog does
	prc := testRoomConfig()
	prc.RequestTimeout = room.Duration(30 * time.Second)
	pp.p, pp.pe = newWorkerCfg(t, m, room.RolePrefill, 512, prc, false)
	pp.d, pp.de = newWorkerCfg(t, m, room.RoleDecode, 512, rc, true)
	pp.pFree = pp.pe.Stats().PagesTot - pp.pe.Stats().PagesUsed
	pp.dFree = pp.de.Stats().PagesTot - pp.de.Stats().PagesUsed
	t.Cleanup(func() { pp.checkQuiet(t) })
	id := newRoomID()
	_, dleg := pp.legs(id)
	ds, err := pp.d.SubmitLeg(context.Background(), dleg, engine.Request{Prompt: prompt(30), MaxTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	waitPhase(t, pp.d, id, room.PhaseAwaitingKV) // prefill never gets its leg
	wantFailed(t, pp.d, id, room.ReasonDeadline)
	if n := pp.d.counters().Failures(room.ReasonDeadline); n != 1 {
		t.Errorf("deadline failures = %d, want 1", n)
	}
	if _, last := drain(t, ds); last.Err == nil {
		t.Errorf("stream ended without an error: %+v", last)
	}
	pp.p.step(room.Event{Kind: room.EventShutdown}) // prefill's parked HELLO room
}

// TestDuplicateKVFrameCountsOnce: a KV frame that arrives twice is written
// and counted once, so DONE's byte check cannot be fooled by a duplicate
// standing in for a lost frame.
func TestDuplicateKVFrameCountsOnce(t *testing.T) {
	pp := newPair(t, 512)
	id := newRoomID()
	_, dleg := pp.legs(id)
	ds, err := pp.d.SubmitLeg(context.Background(), dleg, engine.Request{Prompt: prompt(40), MaxTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	waitPhase(t, pp.d, id, room.PhaseAwaitingKV) // no prefill leg: nothing else is sent
	page := make([]byte, pp.d.kvCfg.PageBytes())
	for range 2 {
		if err := pp.p.tr.SendKV(context.Background(), pp.d.TransferAddr(), id, kvwire.KV{}, page); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		pp.d.mu.Lock()
		got, _ := pp.d.d.RecvBytes(id)
		pp.d.mu.Unlock()
		if got == int64(len(page)) {
			if _, ph, _ := pp.d.roomState(id); ph != room.PhaseReceiving {
				t.Errorf("phase %v after one KV frame, want receiving", ph)
			}
			break
		}
		if got > int64(len(page)) || time.Now().After(deadline) {
			t.Fatalf("received bytes %d after the same frame twice, want %d", got, len(page))
		}
		time.Sleep(time.Millisecond)
	}
	waitFor(t, "the duplicate to be dropped", func() bool { return kvDrops(pp.d, "duplicate") == 1 })
	pp.d.mu.Lock()
	got, _ := pp.d.d.RecvBytes(id)
	pp.d.mu.Unlock()
	if got != int64(len(page)) {
		t.Errorf("received bytes %d after a duplicate, want %d", got, len(page))
	}
	ds.Cancel()
	drain(t, ds)
	pp.p.step(room.Event{Kind: room.EventShutdown}) // prefill's parked HELLO room
}
