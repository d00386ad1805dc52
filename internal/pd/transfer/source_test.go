package transfer_test

import (
	"bytes"
	"sync/atomic"
	"testing"
	"time"

	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
	"tandem/internal/pd/shm"
	"tandem/internal/pd/transfer"
)

// KV_SRC: prefill's KV memory in a source region that decode maps
// read-only and copies frames out of.

// sourcePair is kvPair (auto on both sides, 2 MiB regions) with a source
// region of srcBytes on the prefill side.
func sourcePair(t *testing.T, srcBytes int) (d, p *node, src *shm.Source) {
	t.Helper()
	needShm(t)
	src, err := shm.CreateSource(srcBytes)
	if err != nil {
		t.Fatal(err)
	}
	d, p = kvPair(t, transfer.KVAuto, transfer.KVAuto, 2<<20, func(_, pc *transfer.Config) { pc.ShmSource = src })
	t.Cleanup(func() { p.stop(); src.Close() }) // after the transports (cleanups run last first)
	connect(t, d, p)
	return d, p, src
}

// releases counts release calls per frame.
type releases struct{ n []atomic.Int32 }

func (r *releases) fn(i int) func() { return func() { r.n[i].Add(1) } }

// waitAll waits until every frame was released, and fails if one was
// released more than once.
func (r *releases) waitAll(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for i := range r.n {
		for r.n[i].Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if got := r.n[i].Load(); got != 1 {
			t.Errorf("frame %d released %d times, want 1", i, got)
		}
	}
}

// TestShmSourceOneCopy: frames whose data lies in the source region go as
// KV_SRC, arrive byte for byte, and each is released once after decode
// copied it; a frame outside the source, or sent without a release, goes
// through the ring (released before SendKVHeld returns).
func TestShmSourceOneCopy(t *testing.T) {
	sizes := []int{24 << 10, 24 << 10, 1, 100, 512 << 10, 24 << 10}
	d, p, src := sourcePair(t, 4<<20)
	data := frames(11, sizes...)
	off := 0
	in := make([][]byte, len(data))
	for i, b := range data {
		in[i] = src.Data()[off : off+len(b)]
		copy(in[i], b)
		off += (len(b) + 63) / 64 * 64
	}
	heap := frames(12, 24<<10)[0]
	pages := make([][]byte, len(data)+2)
	for i := range data {
		pages[i] = make([]byte, len(data[i]))
	}
	pages[len(data)], pages[len(data)+1] = make([]byte, len(heap)), make([]byte, len(heap))
	d.rec.mu.Lock()
	d.rec.dest = func(_ string, _ room.ID, kv kvwire.KV, n int) []byte { return pages[kv.Ordinal] }
	d.rec.mu.Unlock()
	rel := &releases{n: make([]atomic.Int32, len(data)+1)}
	for i := range data {
		if err := p.SendKVHeld(ctxT(t), d.Addr(), roomID(1), kvwire.KV{Ordinal: uint32(i)}, in[i], rel.fn(i)); err != nil {
			t.Fatal(err)
		}
	}
	// Outside the source: through the ring, released at once.
	if err := p.SendKVHeld(ctxT(t), d.Addr(), roomID(1), kvwire.KV{Ordinal: uint32(len(data))}, heap, rel.fn(len(data))); err != nil {
		t.Fatal(err)
	}
	if got := rel.n[len(data)].Load(); got != 1 {
		t.Errorf("a frame outside the source was released %d times when SendKVHeld returned, want 1", got)
	}
	// Inside the source without a release: copied into the ring.
	copy(src.Data()[off:], heap)
	if err := p.SendKV(ctxT(t), d.Addr(), roomID(1), kvwire.KV{Ordinal: uint32(len(data) + 1)}, src.Data()[off:off+len(heap)]); err != nil {
		t.Fatal(err)
	}
	d.rec.wait(t, patience, len(pages), "every KVDone", isKind("kvdone"))
	rel.waitAll(t)
	for i := range data {
		if !bytes.Equal(pages[i], data[i]) {
			t.Errorf("frame %d (%d bytes) did not arrive intact", i, sizes[i])
		}
	}
	if !bytes.Equal(pages[len(data)], heap) || !bytes.Equal(pages[len(data)+1], heap) {
		t.Errorf("the ring frames did not arrive intact")
	}
	for _, e := range d.rec.all(isKind("kvdone")) {
		if !e.ok {
			t.Errorf("KVDone %v", e)
		}
	}
	dc, pc := d.Counters(), p.Counters()
	if dc["shm_src_kv_frames_in"] != uint64(len(data)) || pc["shm_src_kv_frames_out"] != uint64(len(data)) || dc["shm_kv_frames_in"] != 2 {
		t.Errorf("KV_SRC frames in %d, out %d, KV_SHM in %d; want %d, %d, 2", dc["shm_src_kv_frames_in"], pc["shm_src_kv_frames_out"], dc["shm_kv_frames_in"], len(data), len(data))
	}
	if dc["shm_source_mapped"] != 1 || pc["shm_source_offered"] != 1 || pc["shm_src_revoked"] != 0 {
		t.Errorf("counters: decode %v, prefill %v", dc, pc)
	}
	if ps := p.Peers(); len(ps) != 1 || ps[0].KVOut != "shm-src" {
		t.Errorf("prefill Peers() = %+v, want KV out shm-src", ps)
	}
	if ps := d.Peers(); len(ps) != 1 || ps[0].KVIn != "shm-src" {
		t.Errorf("decode Peers() = %+v, want KV in shm-src", ps)
	}
}

// TestShmSourceRevokedOnClose: when prefill's connection ends while decode
// is about to copy a KV_SRC frame, prefill releases the frame's memory
// only after revoking the ring, and decode's copy fails (KVDone false)
// instead of being taken as intact.
func TestShmSourceRevokedOnClose(t *testing.T) {
	d, p, src := sourcePair(t, 1<<20)
	data := src.Data()[:24<<10]
	copy(data, frames(13, len(data))[0])
	page := make([]byte, len(data))
	entered, proceed := make(chan struct{}), make(chan struct{})
	d.rec.mu.Lock()
	d.rec.dest = func(string, room.ID, kvwire.KV, int) []byte {
		close(entered)
		<-proceed // decode's reader stops here, before its copy
		return page
	}
	d.rec.mu.Unlock()
	rel := &releases{n: make([]atomic.Int32, 1)}
	if err := p.SendKVHeld(ctxT(t), d.Addr(), roomID(1), kvwire.KV{}, data, rel.fn(0)); err != nil {
		t.Fatal(err)
	}
	<-entered
	if got := rel.n[0].Load(); got != 0 {
		t.Fatalf("released %d times before decode copied it", got)
	}
	p.stop() // prefill's connection ends: it revokes, then releases
	rel.waitAll(t)
	for i := range data {
		data[i] = 0xee // the memory is reused
	}
	close(proceed)
	e := d.rec.wait(t, patience, 1, "KVDone", isKind("kvdone"))
	if e.ok {
		t.Errorf("KVDone ok after prefill revoked the frame (page starts %x)", page[:4])
	}
	if got := p.Counters()["shm_src_revoked"]; got != 1 {
		t.Errorf("shm_src_revoked = %d, want 1", got)
	}
}

// TestShmSourceHostile: a KV_SRC frame out of the source's bounds, or out
// of the ring's sequence, closes the connection (rejected_shm) without a
// crash, and the redialed connection carries KV_SRC again; a source
// offer decode cannot map leaves KV in the ring.
func TestShmSourceHostile(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*kvwire.KVSrc)
	}{
		{"offset past the source", func(m *kvwire.KVSrc) { m.Offset = 1 << 30 }},
		{"crossing the end", func(m *kvwire.KVSrc) { m.Offset = 1<<20 - 100 }},
		{"sequence skipped", func(m *kvwire.KVSrc) { m.Seq += 3 }},
		{"slot unaligned", func(m *kvwire.KVSrc) { m.Slot += 8 }},
		{"slot past the ring", func(m *kvwire.KVSrc) { m.Slot = 1 << 29 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hit atomic.Bool
			t.Cleanup(transfer.SetSrcHooks(nil, func(m *kvwire.KVSrc) {
				if m.KV.Ordinal == 1 && hit.CompareAndSwap(false, true) {
					tc.edit(m)
				}
			}))
			d, p, src := sourcePair(t, 1<<20)
			data := src.Data()[:3000]
			copy(data, frames(14, 3000)[0])
			pages := [][]byte{make([]byte, 1000), make([]byte, 1000), make([]byte, 1000), make([]byte, 1000)}
			d.rec.mu.Lock()
			d.rec.dest = func(_ string, _ room.ID, kv kvwire.KV, n int) []byte { return pages[kv.Ordinal] }
			d.rec.mu.Unlock()
			rel := &releases{n: make([]atomic.Int32, 3)}
			for i := range 2 {
				if err := p.SendKVHeld(ctxT(t), d.Addr(), roomID(1), kvwire.KV{Ordinal: uint32(i)}, data[i*1000:(i+1)*1000], rel.fn(i)); err != nil {
					t.Fatal(err)
				}
			}
			d.rec.wait(t, patience, 2, "the redial", func(e event) bool { return e.kind == "up" && e.hb.Seq == 0 })
			if got := d.Counters()["rejected_shm"]; got != 1 {
				t.Errorf("rejected_shm = %d, want 1", got)
			}
			if done := d.rec.all(isKind("kvdone")); len(done) != 1 || !done[0].ok {
				t.Errorf("KVDone calls %v, want frame 0 ok and frame 1 never delivered", done)
			}
			// The new connection maps the source again.
			deadline := time.Now().Add(patience)
			for len(p.Peers()) == 0 || p.Peers()[0].KVOut != "shm-src" {
				// ordinal 3: a page of its own, not read below
				if err := p.SendKVHeld(ctxT(t), d.Addr(), roomID(1), kvwire.KV{Ordinal: 3}, data[2000:], func() {}); err != nil || time.Now().After(deadline) {
					t.Fatalf("no KV_SRC after the redial (%v): %+v", err, p.Peers())
				}
				time.Sleep(time.Millisecond)
			}
			if err := p.SendKVHeld(ctxT(t), d.Addr(), roomID(1), kvwire.KV{Ordinal: 2}, data[2000:], rel.fn(2)); err != nil {
				t.Fatal(err)
			}
			e := d.rec.wait(t, patience, 1, "frame 2", func(e event) bool { return e.kind == "kvdone" && e.kv.Ordinal == 2 })
			if !e.ok || !bytes.Equal(pages[2], data[2000:]) {
				t.Errorf("frame 2 after the redial: %v, intact %v", e, bytes.Equal(pages[2], data[2000:]))
			}
			rel.waitAll(t)
		})
	}
	t.Run("source not mappable", func(t *testing.T) {
		t.Cleanup(transfer.SetSrcHooks(func(o *kvwire.ShmSource) { o.Cookie[0] ^= 1 }, nil))
		d, p, src := sourcePair(t, 1<<20)
		data := src.Data()[:5000]
		copy(data, frames(15, 5000)[0])
		page := make([]byte, len(data))
		d.rec.mu.Lock()
		d.rec.dest = func(string, room.ID, kvwire.KV, int) []byte { return page }
		d.rec.mu.Unlock()
		rel := &releases{n: make([]atomic.Int32, 1)}
		if err := p.SendKVHeld(ctxT(t), d.Addr(), roomID(1), kvwire.KV{}, data, rel.fn(0)); err != nil {
			t.Fatal(err)
		}
		if rel.n[0].Load() != 1 {
			t.Errorf("not released when SendKVHeld returned, though it went through the ring")
		}
		e := d.rec.wait(t, patience, 1, "KVDone", isKind("kvdone"))
		if !e.ok || !bytes.Equal(page, data) {
			t.Errorf("KVDone %v, intact %v", e, bytes.Equal(page, data))
		}
		if c := d.Counters(); c["shm_source_failed"] != 1 || c["shm_kv_frames_in"] != 1 || c["shm_src_kv_frames_in"] != 0 {
			t.Errorf("decode counters %v", c)
		}
	})
}

// TestShmSourceStuckConsumer: a decode reader that never gets to release a
// KV_SRC frame does not keep prefill's page: after WriteTimeout prefill
// closes the connection, revokes, and releases it.
func TestShmSourceStuckConsumer(t *testing.T) {
	needShm(t)
	src, err := shm.CreateSource(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	d, p := kvPair(t, transfer.KVAuto, transfer.KVAuto, 2<<20, func(dc, pc *transfer.Config) {
		pc.ShmSource = src
		pc.WriteTimeout = 200 * time.Millisecond
		// A peer timeout far beyond the test's patience: only the held
		// frame's timeout can end the connection.
		dc.HeartbeatInterval, pc.HeartbeatInterval = 20*time.Second, 20*time.Second
	})
	t.Cleanup(func() { p.stop(); src.Close() })
	connect(t, d, p)
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	d.rec.mu.Lock()
	d.rec.dest = func(string, room.ID, kvwire.KV, int) []byte { <-stuck; return nil }
	d.rec.mu.Unlock()
	rel := &releases{n: make([]atomic.Int32, 1)}
	if err := p.SendKVHeld(ctxT(t), d.Addr(), roomID(1), kvwire.KV{}, src.Data()[:4096], rel.fn(0)); err != nil {
		t.Fatal(err)
	}
	rel.waitAll(t)
	if c := p.Counters(); c["shm_src_revoked"] != 1 || c["write_errors"] == 0 {
		t.Errorf("prefill counters %v, want one frame revoked and a write error", c)
	}
}
