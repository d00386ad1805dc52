package transfer_test

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
	"tandem/internal/pd/shm"
	"tandem/internal/pd/transfer"
)

// KV_SRC's release and revoke ordering, exactly, on net.Pipe connections
// inside synctest bubbles: prefill holds a frame's memory until decode
// released its slot (collected within HoldCollectDelay), and when it must
// take the memory back unreleased it revokes the ring first, so decode's
// copy then fails instead of being taken as intact.

// srcPipePair is shmPipePair with a source region of 1 MiB on prefill
// and heartbeats every hb; decode's KVDest blocks until proceed is called
// (entered is closed when it is reached), then returns page. proceed is
// idempotent and is called at cleanup too, before the transports stop.
func srcPipePair(t *testing.T, hb time.Duration, page []byte) (d, p *node, src *shm.Source, entered chan struct{}, proceed func()) {
	t.Helper()
	needShm(t)
	src, err := shm.CreateSource(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() }) // after the transports stop (cleanups run last first)
	d, p = pipePair(t, newPipeNet(), func(dc, pc *transfer.Config) {
		dc.KVTransport, pc.KVTransport = transfer.KVShm, transfer.KVShm
		dc.ShmRegionBytes, pc.ShmRegionBytes = 1<<20, 1<<20
		dc.HeartbeatInterval, pc.HeartbeatInterval = hb, hb
		pc.ShmSource = src
	})
	synctest.Wait()
	entered = make(chan struct{})
	gate := make(chan struct{})
	var once, gone sync.Once
	proceed = func() { gone.Do(func() { close(gate) }) }
	t.Cleanup(proceed)
	d.rec.mu.Lock()
	d.rec.dest = func(string, room.ID, kvwire.KV, int) []byte {
		once.Do(func() { close(entered) })
		<-gate
		return page
	}
	d.rec.mu.Unlock()
	return d, p, src, entered, proceed
}

// held is a KV_SRC frame's release: when it was called, how often, and
// how many revocations prefill had counted by then.
type held struct {
	p       *node
	n       atomic.Int32
	at      time.Time
	revoked uint64
}

func (h *held) release() {
	if h.n.Add(1) == 1 {
		h.at, h.revoked = time.Now(), h.p.Counters()["shm_src_revoked"]
	}
}

// sendSrc sends one page from the source as KV_SRC and waits until
// decode's reader is in KVDest with it.
func sendSrc(t *testing.T, p *node, src *shm.Source, entered chan struct{}, h *held) []byte {
	t.Helper()
	data := src.Data()[:4096]
	for i := range data {
		data[i] = byte(i * 7)
	}
	want := bytes.Clone(data)
	if err := p.SendKVHeld(context.Background(), "d:1", roomID(1), kvwire.KV{}, data, h.release); err != nil {
		t.Fatalf("SendKVHeld = %v", err)
	}
	<-entered
	synctest.Wait()
	if ps := p.Peers(); len(ps) != 1 || ps[0].KVOut != "shm-src" {
		t.Fatalf("prefill Peers() = %+v, want KV out as KV_SRC", ps)
	}
	if n := h.n.Load(); n != 0 {
		t.Fatalf("released %d times before decode copied the frame", n)
	}
	return want
}

// TestShmSourceReleasedAfterTheCopy: prefill keeps a KV_SRC frame's
// memory however long decode takes to copy it (here 100 collection
// periods), and releases it once, within one HoldCollectDelay of decode
// releasing the slot; the copy is intact.
func TestShmSourceReleasedAfterTheCopy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		page := make([]byte, 4096)
		d, p, src, entered, proceed := srcPipePair(t, time.Second, page)
		h := &held{p: p}
		want := sendSrc(t, p, src, entered, h)
		time.Sleep(100 * transfer.HoldCollectDelay)
		synctest.Wait()
		if n := h.n.Load(); n != 0 {
			t.Fatalf("released %d times while decode was still in KVDest", n)
		}
		proceed()
		synctest.Wait() // decode copied, released the slot and called KVDone
		copied := time.Now()
		done := d.rec.all(isKind("kvdone"))
		if len(done) != 1 || !done[0].ok || !bytes.Equal(page, want) {
			t.Fatalf("decode's KVDone %v, page intact %v; want one, ok", done, bytes.Equal(page, want))
		}
		time.Sleep(transfer.HoldCollectDelay)
		synctest.Wait()
		if n := h.n.Load(); n != 1 || h.at.Sub(copied) > transfer.HoldCollectDelay || h.revoked != 0 {
			t.Errorf("released %d times, %v after decode's release, %d revocations; want once within %v, none revoked",
				n, h.at.Sub(copied), h.revoked, transfer.HoldCollectDelay)
		}
	})
}

// TestShmSourceStuckConsumerRevokedFirst: a frame decode does not release
// for WriteTimeout closes prefill's connection within one collection
// period after it; prefill revokes the ring before it releases the
// memory, and decode's copy, made after that, fails. (Heartbeats are set
// far apart: on an unbuffered pipe one would block behind the stuck
// reader and end the connection first.)
func TestShmSourceStuckConsumerRevokedFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		page := make([]byte, 4096)
		d, p, src, entered, proceed := srcPipePair(t, time.Minute, page)
		h := &held{p: p}
		sent := time.Now()
		sendSrc(t, p, src, entered, h)
		wt := config("").WriteTimeout
		time.Sleep(wt - time.Millisecond)
		synctest.Wait()
		if n := h.n.Load(); n != 0 {
			t.Fatalf("released %d times, %v after the send, before WriteTimeout %v", n, h.at.Sub(sent), wt)
		}
		time.Sleep(time.Millisecond + transfer.HoldCollectDelay)
		synctest.Wait()
		if n, after := h.n.Load(), h.at.Sub(sent); n != 1 || after <= wt || after > wt+transfer.HoldCollectDelay || h.revoked != 1 {
			t.Fatalf("released %d times, %v after the send, %d revocations counted by then; want once, within %v past %v, after the revoke",
				n, after, h.revoked, transfer.HoldCollectDelay, wt)
		}
		for i := range src.Data()[:4096] {
			src.Data()[i] = 0xee // prefill reuses the page
		}
		proceed()
		synctest.Wait()
		if done := d.rec.all(isKind("kvdone")); len(done) != 1 || done[0].ok {
			t.Errorf("decode's KVDone %v after the revoke, want one, not ok (page starts %x)", done, page[:4])
		}
	})
}

// TestShmSourceCloseRevokesFirst: prefill's transport closing with a KV_SRC
// frame held revokes the ring, then releases the memory, before Close
// returns; decode's copy after that fails.
func TestShmSourceCloseRevokesFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		page := make([]byte, 4096)
		d, p, src, entered, proceed := srcPipePair(t, time.Second, page)
		h := &held{p: p}
		sendSrc(t, p, src, entered, h)
		p.stop()
		if n := h.n.Load(); n != 1 || h.revoked != 1 {
			t.Fatalf("after Close: released %d times with %d revocations counted by then; want once, after the revoke", n, h.revoked)
		}
		for i := range src.Data()[:4096] {
			src.Data()[i] = 0xee
		}
		proceed()
		synctest.Wait()
		if done := d.rec.all(isKind("kvdone")); len(done) != 1 || done[0].ok {
			t.Errorf("decode's KVDone %v after the revoke, want one, not ok (page starts %x)", done, page[:4])
		}
	})
}
