package transfer_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
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

// The shared-memory data path between two transports of this process on
// 127.0.0.1 (the peer opens the region through /proc/PID/fd, as another
// process would).

func needShm(t *testing.T) {
	t.Helper()
	if !shm.Supported() {
		t.Skip("shared-memory regions need Linux")
	}
}

// kvPair is pair with both sides on one KV transport and region size.
func kvPair(t *testing.T, dk, pk transfer.KVTransport, regionBytes int, change func(d, p *transfer.Config)) (d, p *node) {
	return pair(t, func(dc, pc *transfer.Config) {
		dc.KVTransport, pc.KVTransport = dk, pk
		dc.ShmRegionBytes, pc.ShmRegionBytes = regionBytes, regionBytes
		// Not config's 50 ms: a blocked consumer (the back-pressure tests)
		// or a loaded machine must not lose the peer mid-test.
		dc.HeartbeatInterval, pc.HeartbeatInterval = time.Second, time.Second
		if change != nil {
			change(dc, pc)
		}
	})
}

// connect opens the connection (decode's HELLO) and waits until both
// sides handled the shared-memory setup (or there was none).
func connect(t *testing.T, d, p *node) {
	t.Helper()
	if err := d.Send(ctxT(t), p.Addr(), kvwire.TypeHello, roomID(1), nil); err != nil {
		t.Fatal(err)
	}
	p.rec.wait(t, patience, 1, "HELLO", isFrame(kvwire.TypeHello))
	// HELLO_ACK goes after prefill's answer to decode's offer; once decode
	// reads it, decode has handled that answer.
	if err := p.Send(ctxT(t), d.Addr(), kvwire.TypeHelloAck, roomID(1), nil); err != nil {
		t.Fatal(err)
	}
	d.rec.wait(t, patience, 1, "HELLO_ACK", isFrame(kvwire.TypeHelloAck))
}

// frames returns KV frames of the given sizes with random bytes.
func frames(seed uint64, sizes ...int) [][]byte {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([][]byte, len(sizes))
	for i, n := range sizes {
		out[i] = make([]byte, n)
		for j := range out[i] {
			out[i][j] = byte(r.Uint32())
		}
	}
	return out
}

// sendAll sends data as KV frames (ordinal = index) from p to d, into
// fresh pages, and returns the pages and the KVDone events.
func sendAll(t *testing.T, d, p *node, data [][]byte) ([][]byte, []event) {
	t.Helper()
	pages := make([][]byte, len(data))
	for i := range data {
		pages[i] = make([]byte, len(data[i]))
	}
	before := len(d.rec.all(isKind("kvdone")))
	d.rec.mu.Lock()
	d.rec.dest = func(_ string, _ room.ID, kv kvwire.KV, n int) []byte { return pages[kv.Ordinal] }
	d.rec.mu.Unlock()
	for i, b := range data {
		if err := p.SendKV(ctxT(t), d.Addr(), roomID(1), kvwire.KV{Layer: uint16(i % 3), Kind: kvwire.KVKind(i % 2), Ordinal: uint32(i)}, b); err != nil {
			t.Fatalf("SendKV(%d bytes) = %v", len(b), err)
		}
	}
	d.rec.wait(t, patience, before+len(data), "every KVDone", isKind("kvdone"))
	return pages, d.rec.all(isKind("kvdone"))[before:]
}

// TestShmMatchesTCP: the same frames sent through shared memory and over
// TCP arrive byte for byte the same, with the same KVDone calls; a frame
// larger than the region goes over TCP on the shared-memory connection.
func TestShmMatchesTCP(t *testing.T) {
	needShm(t)
	sizes := []int{1, 100, 24 << 10, 24 << 10, 64<<10 + 1, 512 << 10, 3 << 20, 24 << 10}
	data := frames(7, sizes...)
	type result struct {
		pages [][]byte
		done  []event
		c     map[string]uint64
		peers []transfer.PeerStatus
	}
	run := func(k transfer.KVTransport) result {
		d, p := kvPair(t, k, k, 2<<20, nil)
		connect(t, d, p)
		pages, done := sendAll(t, d, p, data)
		r := result{pages, done, d.Counters(), p.Peers()}
		d.stop()
		p.stop()
		return r
	}
	viaShm, viaTCP := run(transfer.KVAuto), run(transfer.KVTCP)
	for i := range data {
		if !bytes.Equal(viaShm.pages[i], data[i]) || !bytes.Equal(viaTCP.pages[i], data[i]) {
			t.Errorf("frame %d (%d bytes): shm intact %v, tcp intact %v", i, sizes[i], bytes.Equal(viaShm.pages[i], data[i]), bytes.Equal(viaTCP.pages[i], data[i]))
		}
	}
	for i := range viaShm.done {
		a, b := viaShm.done[i], viaTCP.done[i]
		if a.kv != b.kv || a.n != b.n || a.ok != b.ok || !a.ok {
			t.Errorf("KVDone %d: shm %v, tcp %v", i, a, b)
		}
	}
	// One frame (3 MiB) does not fit the 2 MiB region: it went over TCP.
	if got := viaShm.c["shm_kv_frames_in"]; got != uint64(len(sizes)-1) {
		t.Errorf("shared memory carried %d frames, want %d (all but the 3 MiB one)", got, len(sizes)-1)
	}
	if viaTCP.c["shm_kv_frames_in"] != 0 || viaTCP.c["shm_offered"] != 0 {
		t.Errorf("--kv-transport tcp used shared memory: %v", viaTCP.c)
	}
	if ps := viaShm.peers; len(ps) != 1 || ps[0].KVOut != "shm" {
		t.Errorf("prefill Peers() = %+v, want KV out through shm", ps)
	}
	if ps := viaTCP.peers; len(ps) != 1 || ps[0].KVOut != "tcp" {
		t.Errorf("prefill Peers() over TCP = %+v, want KV out over tcp", ps)
	}
}

// TestShmFallsBackToTCP: when the peer declines (--kv-transport tcp) or
// cannot map the region (here: an offer whose cookie does not match the
// region), KV goes over TCP, intact, and the refusal is counted; with
// --kv-transport shm on the sender, SendKV fails instead, naming why.
func TestShmFallsBackToTCP(t *testing.T) {
	needShm(t)
	data := frames(8, 24<<10, 100)
	check := func(t *testing.T, d, p *node) {
		t.Helper()
		connect(t, d, p)
		pages, done := sendAll(t, d, p, data)
		for i := range data {
			if !bytes.Equal(pages[i], data[i]) || !done[i].ok {
				t.Errorf("frame %d did not arrive intact over TCP", i)
			}
		}
		if c := d.Counters(); c["shm_kv_frames_in"] != 0 || c["shm_refused"] == 0 {
			t.Errorf("decode counters %v: want KV over TCP and the refusal counted", c)
		}
	}
	t.Run("declined", func(t *testing.T) {
		d, p := kvPair(t, transfer.KVAuto, transfer.KVTCP, 0, nil)
		check(t, d, p)
		if c := p.Counters(); c["shm_refused"] != 1 || c["shm_offered"] != 0 {
			t.Errorf("prefill counters %v: want its refusal of decode's offer, no offer of its own", c)
		}
	})
	t.Run("cannot map", func(t *testing.T) {
		t.Cleanup(transfer.SetShmHooks(func(o *kvwire.ShmOffer) { o.Cookie[0] ^= 1 }, nil))
		d, p := kvPair(t, transfer.KVAuto, transfer.KVAuto, 0, nil)
		check(t, d, p)
	})
	t.Run("required by the sender", func(t *testing.T) {
		d, p := kvPair(t, transfer.KVTCP, transfer.KVShm, 0, nil)
		connect(t, d, p)
		err := p.SendKV(ctxT(t), d.Addr(), roomID(1), kvwire.KV{}, data[0])
		if !errors.Is(err, transfer.ErrIncompatible) || !strings.Contains(err.Error(), "--kv-transport shm") {
			t.Errorf("SendKV with shm required and refused = %v, want ErrIncompatible naming --kv-transport shm", err)
		}
	})
}

// TestShmHostileFrames: KV_SHM frames naming slots out of bounds, out of
// sequence or not holding them are refused: no crash, nothing read
// outside the region, the connection closes (rejected_shm), and after
// decode redials the next frame arrives intact.
func TestShmHostileFrames(t *testing.T) {
	needShm(t)
	for _, tc := range []struct {
		name     string
		edit     func(*kvwire.KVShm)
		wantDone bool // the frame reaches KVDest (and KVDone false)
	}{
		{"offset past the region", func(m *kvwire.KVShm) { m.Offset = 1<<30 - 4096 }, false},
		{"slot crossing the end", func(m *kvwire.KVShm) { m.Offset = 1<<20 - shm.HeaderBytes - 64 }, false},
		{"unaligned", func(m *kvwire.KVShm) { m.Offset += 8 }, false},
		{"sequence skipped", func(m *kvwire.KVShm) { m.Seq += 5 }, false},
		{"another slot", func(m *kvwire.KVShm) { m.Offset += 128 << 10 }, true},
		{"longer than written", func(m *kvwire.KVShm) { m.Length += 64 }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hit atomic.Bool
			t.Cleanup(transfer.SetShmHooks(nil, func(m *kvwire.KVShm) {
				if m.KV.Ordinal == 1 && hit.CompareAndSwap(false, true) {
					tc.edit(m)
				}
			}))
			d, p := kvPair(t, transfer.KVAuto, transfer.KVAuto, 1<<20, nil)
			connect(t, d, p)
			data := frames(9, 1000, 1000, 1000)
			pages := [][]byte{make([]byte, 1064), make([]byte, 1064), make([]byte, 1000)}
			d.rec.mu.Lock()
			d.rec.dest = func(_ string, _ room.ID, kv kvwire.KV, n int) []byte { return pages[kv.Ordinal] }
			d.rec.mu.Unlock()
			for i := range 2 {
				if err := p.SendKV(ctxT(t), d.Addr(), roomID(1), kvwire.KV{Ordinal: uint32(i)}, data[i]); err != nil {
					t.Fatal(err)
				}
			}
			d.rec.wait(t, patience, 2, "the redial", func(e event) bool { return e.kind == "up" && e.hb.Seq == 0 })
			if got := d.Counters()["rejected_shm"]; got != 1 {
				t.Errorf("rejected_shm = %d, want 1", got)
			}
			done := d.rec.all(isKind("kvdone"))
			if len(done) == 0 || !done[0].ok || (len(done) == 2) != tc.wantDone || (len(done) == 2 && done[1].ok) {
				t.Errorf("KVDone calls %v, want frame 0 ok and frame 1 %s", done, map[bool]string{true: "failed", false: "never delivered"}[tc.wantDone])
			}
			if err := p.SendKV(ctxT(t), d.Addr(), roomID(1), kvwire.KV{Ordinal: 2}, data[2]); err != nil {
				t.Fatal(err)
			}
			d.rec.wait(t, patience, 1, "frame 2", func(e event) bool { return e.kind == "kvdone" && e.kv.Ordinal == 2 })
			if !bytes.Equal(pages[2], data[2]) {
				t.Errorf("frame 2 after the redial did not arrive intact")
			}
		})
	}
}

// openFDs and regionMaps count this process's descriptors and its
// mappings of shared-memory regions.
func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func memfdFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(l, "/memfd:tandem-kv-") {
			n++
		}
	}
	return n
}

func regionMaps(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "memfd:tandem-kv-")
}

// TestShmRegionsReleased: while connected, decode maps the region it
// offered and prefill (AcceptOnly: it offers none) maps decode's, and
// neither holds a descriptor for it; when the connection
// ends (the peer closes) the survivor unmaps both, and closing everything
// leaves the descriptors and mappings as before.
func TestShmRegionsReleased(t *testing.T) {
	needShm(t)
	runtime.GC()
	fd0, maps0 := openFDs(t), regionMaps(t)
	d, p := kvPair(t, transfer.KVAuto, transfer.KVAuto, 1<<20, nil)
	connect(t, d, p)
	sendAll(t, d, p, frames(10, 5000))
	if got := regionMaps(t) - maps0; got != 2 {
		t.Errorf("%d region mappings while connected, want 2 (decode's region, mapped by both)", got)
	}
	if got := memfdFDs(t); got != 0 {
		t.Errorf("%d descriptors of regions open while connected, want 0 (only the mappings)", got)
	}
	d.stop()
	p.rec.wait(t, patience, 1, "PeerLost", isKind("lost"))
	if got := regionMaps(t) - maps0; got != 0 {
		t.Errorf("%d region mappings after the connection ended, want 0", got)
	}
	p.stop()
	if fd1 := openFDs(t); fd1 != fd0 {
		t.Errorf("%d descriptors open after both transports closed, was %d", fd1, fd0)
	}
}

// blockingDest makes decode's KVDest wait until release is closed, so
// decode stops freeing ring slots.
func blockingDest(d *node, pages [][]byte, release chan struct{}) {
	d.rec.mu.Lock()
	d.rec.dest = func(_ string, _ room.ID, kv kvwire.KV, n int) []byte {
		<-release
		return pages[kv.Ordinal]
	}
	d.rec.mu.Unlock()
}

// waitCounter waits until n's counter reaches want.
func waitCounter(t *testing.T, n *node, name string, want uint64) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(patience)
	for n.Counters()[name] < want {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s stayed at %d, want %d", name, n.Counters()[name], want)
		}
	}
}

// TestShmBackPressure: with the ring full, SendKV waits for the consumer
// instead of allocating more; a cancelled context ends the wait without
// harming the connection; once the consumer moves, every frame arrives.
func TestShmBackPressure(t *testing.T) {
	needShm(t)
	d, p := kvPair(t, transfer.KVAuto, transfer.KVAuto, 1<<20, nil)
	connect(t, d, p)
	const n = 6 // 6 × 256 KiB: the 1 MiB region holds 3
	data := frames(11, 256<<10, 256<<10, 256<<10, 256<<10, 256<<10, 256<<10)
	pages := make([][]byte, n)
	for i := range pages {
		pages[i] = make([]byte, len(data[i]))
	}
	release := make(chan struct{})
	blockingDest(d, pages, release)
	ctx := ctxT(t)
	sent := make(chan int, n)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range n {
			if err := p.SendKV(ctx, d.Addr(), roomID(1), kvwire.KV{Ordinal: uint32(i)}, data[i]); err != nil {
				t.Errorf("SendKV %d = %v", i, err)
				return
			}
			sent <- i
		}
	})
	waitCounter(t, p, "shm_ring_full", 1)
	if got := len(sent); got >= n {
		t.Fatalf("%d frames sent with the consumer stopped", got)
	}
	// A sender whose context ends while the ring is full gives up and
	// leaves the connection up.
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.SendKV(cctx, d.Addr(), roomID(1), kvwire.KV{Ordinal: 0}, data[0]); !errors.Is(err, context.Canceled) {
		t.Errorf("SendKV with a cancelled context = %v, want context.Canceled", err)
	}
	close(release)
	wg.Wait()
	d.rec.wait(t, patience, n, "every KVDone", isKind("kvdone"))
	for i := range n {
		if !bytes.Equal(pages[i], data[i]) {
			t.Errorf("frame %d changed", i)
		}
	}
	if c := d.Counters(); c["shm_kv_frames_in"] != n || c["rejected_shm"] != 0 || p.Counters()["handshakes_ok"] != 1 {
		t.Errorf("counters decode %v prefill %v: want %d frames through shared memory on the one connection", c, p.Counters(), n)
	}
}

// TestShmStuckConsumerTimesOut: a consumer that frees no slot for
// WriteTimeout makes the waiting SendKV fail and the connection close,
// as a write stuck past its deadline does.
func TestShmStuckConsumerTimesOut(t *testing.T) {
	needShm(t)
	d, p := kvPair(t, transfer.KVAuto, transfer.KVAuto, 1<<20, func(dc, pc *transfer.Config) {
		pc.WriteTimeout = 100 * time.Millisecond
	})
	connect(t, d, p)
	release := make(chan struct{})
	defer close(release)
	data := frames(12, 512<<10, 512<<10)
	blockingDest(d, [][]byte{make([]byte, 512<<10), make([]byte, 512<<10)}, release)
	if err := p.SendKV(ctxT(t), d.Addr(), roomID(1), kvwire.KV{Ordinal: 0}, data[0]); err != nil {
		t.Fatal(err)
	}
	err := p.SendKV(ctxT(t), d.Addr(), roomID(1), kvwire.KV{Ordinal: 1}, data[1])
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("SendKV into a ring nobody frees = %v, want a deadline error", err)
	}
}

// shmPipePair is pipePair with both sides on --kv-transport shm (a pipe
// is not a same-host TCP connection, so auto would not offer a region),
// and decode's pages for frames by ordinal.
func shmPipePair(t *testing.T, pages [][]byte) (d, p *node) {
	t.Helper()
	d, p = pipePair(t, newPipeNet(), func(dc, pc *transfer.Config) {
		dc.KVTransport, pc.KVTransport = transfer.KVShm, transfer.KVShm
		dc.ShmRegionBytes, pc.ShmRegionBytes = 1<<20, 1<<20
	})
	synctest.Wait()
	if ps := p.Peers(); len(ps) != 1 || ps[0].KVOut != "shm" {
		t.Fatalf("prefill Peers() = %+v, want KV out through shm", ps)
	}
	d.rec.mu.Lock()
	d.rec.dest = func(_ string, _ room.ID, kv kvwire.KV, n int) []byte { return pages[kv.Ordinal] }
	d.rec.mu.Unlock()
	return d, p
}

// sendFrames sends data[from:to] from p to decode ("d:1") as KV frames
// (ordinal = index).
func sendFrames(t *testing.T, p *node, data [][]byte, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := p.SendKV(context.Background(), "d:1", roomID(1), kvwire.KV{Ordinal: uint32(i)}, data[i]); err != nil {
			t.Fatalf("SendKV %d = %v", i, err)
		}
	}
}

// TestShmDoorbellsBatched: KV_SHM frames sent in a stream are written in
// batches (time stands still in the bubble, so after the first frame,
// which finds the consumer idle, only a full batch or the flush timer
// writes them): 200 frames take 1 + 3 full batches + the timer's write,
// every frame arrives intact and in order, and the last 7 arrive through
// the timer alone, with nothing else written after them.
func TestShmDoorbellsBatched(t *testing.T) {
	needShm(t)
	synctest.Test(t, func(t *testing.T) {
		const n = 200
		sizes := make([]int, n)
		for i := range sizes {
			sizes[i] = 1000 + i
		}
		data := frames(13, sizes...)
		pages := make([][]byte, n)
		for i := range pages {
			pages[i] = make([]byte, sizes[i])
		}
		d, p := shmPipePair(t, pages)
		defer d.stop()
		defer p.stop()
		sendFrames(t, p, data, 0, n)
		synctest.Wait()
		batched := 1 + (n-1)/transfer.ShmBatchFrames*transfer.ShmBatchFrames
		if got := len(d.rec.all(isKind("kvdone"))); got != batched {
			t.Errorf("%d frames delivered before the flush timer, want %d (the first, then full batches of %d); prefill counters %v", got, batched, transfer.ShmBatchFrames, p.Counters())
		}
		time.Sleep(transfer.ShmFlushDelay)
		synctest.Wait()
		done := d.rec.all(isKind("kvdone"))
		if len(done) != n {
			t.Fatalf("%d frames delivered after the flush timer, want %d", len(done), n)
		}
		for i, e := range done {
			if e.kv.Ordinal != uint32(i) || !e.ok || !bytes.Equal(pages[i], data[i]) {
				t.Errorf("frame %d: KVDone %v, intact %v", i, e, bytes.Equal(pages[i], data[i]))
			}
		}
		want := uint64(1 + (n-1)/transfer.ShmBatchFrames + 1)
		if c := p.Counters(); c["shm_doorbells"] != want || c["shm_kv_frames_out"] != n {
			t.Errorf("prefill counters %v: want %d doorbells for %d frames", c, want, n)
		}
	})
}

// TestShmControlFrameCarriesPending: a control frame written after KV
// frames carries the pending KV_SHM frames ahead of itself (one write,
// no doorbell of their own), so decode sees every KVDone before it; the
// flush timer then has nothing left to write.
func TestShmControlFrameCarriesPending(t *testing.T) {
	needShm(t)
	synctest.Test(t, func(t *testing.T) {
		const n = 10
		data := frames(14, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500)
		pages := make([][]byte, n)
		for i := range pages {
			pages[i] = make([]byte, 500)
		}
		d, p := shmPipePair(t, pages)
		defer d.stop()
		defer p.stop()
		sendFrames(t, p, data, 0, n)
		if err := p.Send(context.Background(), "d:1", kvwire.TypeDone, roomID(1), payload(&kvwire.Done{PageCount: 1, Bytes: n * 500})); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		var order []string
		for _, e := range d.rec.all(func(e event) bool { return e.kind == "kvdone" || e.kind == "frame" }) {
			order = append(order, e.kind)
		}
		if len(order) != n+1 || order[n] != "frame" {
			t.Errorf("decode saw %v, want %d KVDone then DONE", order, n)
		}
		time.Sleep(2 * transfer.ShmFlushDelay)
		synctest.Wait()
		if c := p.Counters(); c["shm_doorbells"] != 1 {
			t.Errorf("%d doorbells, want 1 (the first frame; the others went with DONE)", c["shm_doorbells"])
		}
		for i := range n {
			if !bytes.Equal(pages[i], data[i]) {
				t.Errorf("frame %d changed", i)
			}
		}
	})
}

// TestShmPeerLostWithPendingFrames: when decode goes away while KV_SHM
// frames are pending on prefill's side, the connection ends cleanly:
// the pending frames are never written, the flush timer is stopped (the
// bubble ends with no goroutine left), prefill reports the peer lost and
// unmaps the region.
func TestShmPeerLostWithPendingFrames(t *testing.T) {
	needShm(t)
	maps0 := regionMaps(t)
	synctest.Test(t, func(t *testing.T) {
		const n = 10
		data := frames(15, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500)
		pages := make([][]byte, n)
		for i := range pages {
			pages[i] = make([]byte, 500)
		}
		d, p := shmPipePair(t, pages)
		defer p.stop()
		sendFrames(t, p, data, 0, n)
		d.stop()
		p.rec.wait(t, time.Minute, 1, "PeerLost", isKind("lost"))
		synctest.Wait()
		// The first frame went out at once (the doorbell below); decode
		// may have stopped before reading it, but never sees the others.
		if got := len(d.rec.all(isKind("kvdone"))); got > 1 {
			t.Errorf("decode got %d frames, want at most 1 (the rest were pending when it stopped)", got)
		}
		if c := p.Counters(); c["shm_doorbells"] != 1 {
			t.Errorf("%d doorbells, want 1", c["shm_doorbells"])
		}
		if got := regionMaps(t) - maps0; got != 0 {
			t.Errorf("%d region mappings after decode went away, want 0", got)
		}
	})
}

// TestStateFramesTravel: state frames (kind state) go through shared memory
// and over TCP like pages, intact, and reach KVDest and KVDone with their
// kind; a state frame naming a layer is refused before it is sent.
func TestStateFramesTravel(t *testing.T) {
	needShm(t)
	data := frames(11, 24<<10, 24<<10, 777)
	for _, k := range []transfer.KVTransport{transfer.KVAuto, transfer.KVTCP} {
		d, p := kvPair(t, k, k, 2<<20, nil)
		connect(t, d, p)
		got := make([][]byte, len(data))
		for i := range data {
			got[i] = make([]byte, len(data[i]))
		}
		d.rec.mu.Lock()
		d.rec.dest = func(_ string, _ room.ID, kv kvwire.KV, n int) []byte {
			if kv.Kind != kvwire.KindState || int(kv.Ordinal) >= len(got) || n != len(got[kv.Ordinal]) {
				return nil
			}
			return got[kv.Ordinal]
		}
		d.rec.mu.Unlock()
		for i, b := range data {
			if err := p.SendKV(ctxT(t), d.Addr(), roomID(1), kvwire.KV{Kind: kvwire.KindState, Ordinal: uint32(i)}, b); err != nil {
				t.Fatalf("%v: SendKV(state %d) = %v", k, i, err)
			}
		}
		d.rec.wait(t, patience, len(data), "every KVDone", isKind("kvdone"))
		for i, ev := range d.rec.all(isKind("kvdone")) {
			if ev.kv.Kind != kvwire.KindState || !ev.ok || !bytes.Equal(got[ev.kv.Ordinal], data[ev.kv.Ordinal]) {
				t.Errorf("%v: KVDone %d = %v, intact %v; want a good state frame", k, i, ev, bytes.Equal(got[ev.kv.Ordinal], data[ev.kv.Ordinal]))
			}
		}
		if c := d.Counters()["shm_kv_frames_in"]; (k == transfer.KVAuto) != (c == uint64(len(data))) {
			t.Errorf("%v: shared memory carried %d state frames", k, c)
		}
		err := p.SendKV(ctxT(t), d.Addr(), roomID(1), kvwire.KV{Kind: kvwire.KindState, Layer: 2}, data[2])
		if !errors.Is(err, transfer.ErrFrame) {
			t.Errorf("%v: SendKV(state frame of layer 2) = %v, want ErrFrame", k, err)
		}
		d.stop()
		p.stop()
	}
}
