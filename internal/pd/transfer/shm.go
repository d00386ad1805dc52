package transfer

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
	"tandem/internal/pd/shm"
)

// The shared-memory data path (internal/pd/shm). On a new connection,
// before its reader starts, each side that wants shared memory with the
// peer (wantShm) creates a region to receive into and offers it: an
// SHM_OFFER, sealed like every frame after the handshake, so only a peer
// that proved the cluster token learns where it is. The other side's
// reader maps it (shm.Open checks it is that very memfd of the same
// user, sealed, of the offered size, with the offer's cookie) and
// answers SHM_REPLY (accepted, declined, failed) under the same hold of
// the write lock that installs its producer, so no KV_SHM frame precedes
// the answer. The offering side's reader checks the ack the peer wrote
// into the region; on any refusal it unmaps the region and KV keeps
// coming over TCP.
//
// With a producer installed, SendKV copies the data into a ring slot
// and seals a KV_SHM frame naming it (sequence, offset, length) into the
// stream, in order with every other frame (written in batches: see
// pendShm); a full ring makes SendKV wait
// (back-pressure) until the consumer frees a slot, ctx ends, or
// WriteTimeout passes (then the connection closes). The consumer's
// reader checks each KV_SHM against its ring (strict sequence, bounds)
// and copies the slot into the KVDest slice, under readMu like TCP data,
// then releases it and calls KVDone: false when the slot did not hold
// that frame. A frame that breaks the ring protocol closes the
// connection (rejected_shm). Regions live as long as their connection:
// the reader unmaps them when it ends (taking the write lock for the
// producer's), or Close does when the reader never started.

// Test hooks (export_test.go): shmOfferHook edits each offer before it
// is sent, shmFrameHook each KV_SHM frame. nil outside tests.
var (
	shmOfferHook func(*kvwire.ShmOffer)
	shmFrameHook func(*kvwire.KVShm)
)

// readBufBytes is the read buffer of a connection that receives KV_SHM
// frames (80 bytes each on the wire).
const readBufBytes = 64 << 10

// shmState is a connection's shared-memory data path.
type shmState struct {
	// Receiving: the region this node offered. Set before the reader
	// starts, then the reader's alone.
	rx        *shm.Consumer
	rxRegion  *shm.Region
	rxActive  bool // the peer accepted and wrote the ack
	replySeen bool
	offerSeen bool // the peer's SHM_OFFER was handled (reader only)

	// Sending: the peer's region, mapped. Under the write lock.
	tx       *shm.Producer
	txRegion *shm.Region
	txWhy    string // why the peer's offer was not taken, if it failed here

	sending, receiving atomic.Bool // for Peers

	// Scratch for the KV_SHM payload being sealed (under the write lock).
	shmPayload [32]byte // a KV_SHM payload is 32 bytes
	shmHeader  [kvwire.HeaderBytes]byte

	// Batched KV_SHM frames (under the write lock): the first pendBytes
	// of sbuf are pendFrames sealed KV_SHM frames not written yet, the
	// newest naming slot pendSeq; flushedSeq is the newest slot whose
	// frame was written. The next write of any frame carries them
	// first; flushTimer writes them when nothing else does within
	// shmFlushDelay (flushArmed: it is set, and flushWG counts it).
	pendBytes, pendFrames int
	pendSeq, flushedSeq   uint64
	lastFlush             time.Time // when flushShm last wrote
	flushTimer            *time.Timer
	flushArmed            bool
	flushWG               sync.WaitGroup

	shmMu     sync.Mutex
	readerOn  bool // the reader owns the regions from now on
	shmClosed bool
}

func isShmType(t kvwire.Type) bool {
	return t == kvwire.TypeShmOffer || t == kvwire.TypeShmReply || t == kvwire.TypeKVShm
}

// sameHost reports whether nc's peer is on this host: a loopback
// address, or the connection's own local address (an interface of this
// host dialed by its own address).
func sameHost(nc net.Conn) bool {
	ra, ok := nc.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return false
	}
	la, ok := nc.LocalAddr().(*net.TCPAddr)
	return ra.IP.IsLoopback() || (ok && la.IP.Equal(ra.IP))
}

// wantShm reports whether to offer the peer at nc a region. An
// AcceptOnly node (a prefill worker) never receives KV, so it offers
// none.
func (t *Transport) wantShm(nc net.Conn) bool {
	if t.cfg.AcceptOnly {
		return false
	}
	switch t.cfg.KVTransport {
	case KVTCP:
		return false
	case KVShm:
		return shm.Supported()
	}
	return shm.Supported() && sameHost(nc)
}

// offerShm creates a region and offers it on c, a new connection whose
// reader has not started, when this node wants shared memory with the
// peer. Failing to create one only means TCP; an error means the offer
// could not be written (the connection is broken).
func (t *Transport) offerShm(c *conn) error {
	if !t.wantShm(c.nc) {
		return nil
	}
	region, offer, err := shm.Create(t.cfg.ShmRegionBytes)
	if err != nil {
		t.inc(cShmUnavailable)
		t.log.Warn("transfer: no shared-memory region for this connection; KV to this node goes over TCP", "remote", c.nc.RemoteAddr().String(), "err", err)
		return nil
	}
	c.rx, c.rxRegion = shm.NewConsumer(region), region
	if shmOfferHook != nil {
		shmOfferHook(&offer)
	}
	payload := offer.AppendTo(nil)
	if err := c.lock(t.life, false); err != nil {
		return err
	}
	defer c.unlock(false)
	if err := c.writeLocked(kvwire.NewHeader(kvwire.TypeShmOffer, room.ID{}, payload), payload, nil, false, false); err != nil {
		return fmt.Errorf("offer shared memory: %w", err)
	}
	t.inc(cShmOffered)
	return nil
}

// startReader hands the regions to the reader about to start.
func (c *conn) startReader() {
	c.shmMu.Lock()
	c.readerOn = true
	c.shmMu.Unlock()
}

// closedShm runs when c closes: without a reader nothing else would
// release the region it offered (no producer exists without a reader).
func (c *conn) closedShm() {
	c.shmMu.Lock()
	defer c.shmMu.Unlock()
	c.shmClosed = true
	if !c.readerOn && c.rxRegion != nil {
		c.rxRegion.Close()
		c.rx, c.rxRegion = nil, nil
	}
}

// releaseShm unmaps c's regions when its reader has ended (c is closed):
// the receiving one at once (only the reader used it), the sending one
// under the write lock, so no SendKV is copying into it.
func (c *conn) releaseShm() {
	c.shmMu.Lock()
	if c.rxRegion != nil {
		c.rxRegion.Close()
		c.rx, c.rxRegion = nil, nil
	}
	c.shmMu.Unlock()
	c.receiving.Store(false)
	c.wlock <- struct{}{} // writers see the closed connection and leave
	if c.txRegion != nil {
		c.txRegion.Close()
		c.tx, c.txRegion = nil, nil
	}
	c.sending.Store(false)
	c.pendBytes, c.pendFrames = 0, 0 // never to be written: the connection is closed
	if c.flushArmed && c.flushTimer.Stop() {
		c.flushArmed = false
		c.flushWG.Done()
	}
	<-c.wlock
	c.flushWG.Wait() // a flush that already fired sees the closed connection and returns
}

// kvShmSealedBytes is a KV_SHM frame on the wire.
const kvShmSealedBytes = kvwire.HeaderBytes + 32 + kvwire.SealTagBytes

// shmBuffered reports whether the read buffer already holds a whole
// KV_SHM frame's worth of bytes: then the next frame most likely needs no
// read from the socket, and its read deadline need not be set again (a
// batch of KV_SHM frames costs one deadline, not one each). A larger
// frame that still needs the socket reads under the deadline set before
// the buffer was last filled, a moment ago.
func (r *reader) shmBuffered() bool {
	b, ok := r.in.(*bufio.Reader)
	return ok && b.Buffered() >= kvShmSealedBytes
}

// readShm handles SHM_OFFER, SHM_REPLY and KV_SHM frames (opened).
func (r *reader) readShm(h kvwire.Header, payload []byte) error {
	switch h.Type {
	case kvwire.TypeShmOffer:
		return r.shmOffer(payload)
	case kvwire.TypeShmReply:
		return r.shmReply(payload)
	}
	return r.kvShm(h, payload)
}

// unexpected refuses a shared-memory frame that has no place here.
func (r *reader) unexpected(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	r.t.reject(cRejectedUnexpected, r.c.peerAddr(), err)
	return err
}

// shmOffer maps the peer's region (or declines) and answers.
func (r *reader) shmOffer(payload []byte) error {
	t, c := r.t, r.c
	if c.offerSeen {
		return r.unexpected("a second SHM_OFFER on one connection")
	}
	c.offerSeen = true
	var o kvwire.ShmOffer
	if err := o.Decode(payload); err != nil {
		return err
	}
	reply := kvwire.ShmReply{Status: kvwire.ShmAccepted}
	var region *shm.Region
	if t.cfg.KVTransport == KVTCP {
		reply = kvwire.ShmReply{Status: kvwire.ShmDeclined, Message: "the peer runs with --kv-transport tcp"}
	} else {
		var err error
		if region, err = shm.Open(&o, t.cfg.ShmRegionBytes); err != nil {
			reply = kvwire.ShmReply{Status: kvwire.ShmFailed, Message: err.Error()}
		}
	}
	if err := c.lock(t.life, false); err != nil {
		if region != nil {
			region.Close()
		}
		return err
	}
	defer c.unlock(false)
	if region != nil {
		c.tx, c.txRegion = shm.NewProducer(region), region
		c.sending.Store(true)
		t.inc(cShmAccepted)
		t.log.Info("transfer: KV to this peer goes through shared memory", "peer", c.peerAddr(), "region_bytes", region.Bytes())
	} else {
		c.txWhy = fmt.Sprintf("its region was %s here: %s", reply.Status, reply.Message)
		t.inc(cShmRefused)
		t.shmLog("transfer: KV to this peer goes over TCP: its shared-memory offer was not taken", "peer", c.peerAddr(), "status", reply.Status, "why", reply.Message)
	}
	pl := reply.AppendTo(nil)
	return c.writeLocked(kvwire.NewHeader(kvwire.TypeShmReply, room.ID{}, pl), pl, nil, false, false)
}

// shmLog logs a fallback to TCP: a warning when shared memory was
// required, else information.
func (t *Transport) shmLog(msg string, args ...any) {
	if t.cfg.KVTransport == KVShm {
		t.log.Warn(msg, args...)
	} else {
		t.log.Info(msg, args...)
	}
}

// shmReply handles the answer to this node's offer.
func (r *reader) shmReply(payload []byte) error {
	t, c := r.t, r.c
	if c.rx == nil || c.replySeen {
		return r.unexpected("SHM_REPLY without an open SHM_OFFER")
	}
	c.replySeen = true
	var m kvwire.ShmReply
	if err := m.Decode(payload); err != nil {
		return err
	}
	if m.Status == kvwire.ShmAccepted {
		if err := c.rxRegion.CheckAck(); err != nil {
			t.reject(cRejectedShm, c.peerAddr(), err)
			return err
		}
		c.rxRegion.CloseFD()
		c.rxActive = true
		c.receiving.Store(true)
		t.inc(cShmAccepted)
		t.log.Info("transfer: KV from this peer comes through shared memory", "peer", c.peerAddr(), "region_bytes", c.rxRegion.Bytes())
		return nil
	}
	t.inc(cShmRefused)
	t.shmLog("transfer: KV from this peer comes over TCP: it did not take this node's shared-memory offer", "peer", c.peerAddr(), "status", m.Status, "why", m.Message)
	c.shmMu.Lock()
	c.rxRegion.Close()
	c.rx, c.rxRegion = nil, nil
	c.shmMu.Unlock()
	return nil
}

// kvShm delivers a KV frame whose data lies in this node's region: the
// same KVDest/KVDone calls as a KV frame over TCP.
func (r *reader) kvShm(h kvwire.Header, payload []byte) error {
	t, c := r.t, r.c
	if !c.rxActive {
		return r.unexpected("KV_SHM without an accepted shared-memory region")
	}
	m := &r.kvShmFrame
	if err := m.Decode(payload); err != nil {
		return err
	}
	n := int(m.Length)
	var f Fault
	if t.cfg.Faults != nil {
		kvh := kvwire.Header{Version: kvwire.Version, Type: kvwire.TypeKV, Room: h.Room, Length: uint32(kvwire.KVSubHeaderBytes + n)}
		var err error
		if f, err = r.readFault(kvh); err != nil {
			return err
		}
	}
	slot, err := c.rx.Slot(m)
	if err != nil {
		t.reject(cRejectedShm, c.peerAddr(), err)
		return err
	}
	if f.Action == FaultDrop {
		return r.shmReleased(m, c.rx.Release(m))
	}
	if c.isClosed() {
		return c.err
	}
	// From here every path that got a buffer calls KVDone exactly once.
	dest := t.h.KVDest(c.p.addr, h.Room, m.KV, n)
	if dest != nil && len(dest) < n {
		t.inc(cKVDestShort)
		dest = nil
	}
	var dead error
	if dest == nil {
		t.inc(cKVDiscardedFrames)
		t.add(cKVDiscardedBytes, uint64(n))
	} else {
		c.readMu.Lock()
		if c.dead {
			dead = errConnDead
		} else {
			copy(dest[:n], slot)
		}
		c.readMu.Unlock()
	}
	relErr := c.rx.Release(m)
	if f.Action == FaultCorrupt && relErr == nil {
		relErr = fmt.Errorf("injected corruption of the slot read: %w", shm.ErrSlot)
	}
	t.inc(cShmFramesIn)
	t.add(cShmBytesIn, uint64(n))
	if dest != nil {
		t.h.KVDone(c.p.addr, h.Room, m.KV, n, dead == nil && relErr == nil)
	}
	if dead != nil {
		return dead
	}
	return r.shmReleased(m, relErr)
}

// shmReleased turns a Release error into the one that closes the
// connection (counted).
func (r *reader) shmReleased(m *kvwire.KVShm, err error) error {
	if err == nil {
		return nil
	}
	err = fmt.Errorf("KV_SHM seq %d: %w", m.Seq, err)
	r.t.reject(cRejectedShm, r.c.peerAddr(), err)
	return err
}

// writeKV writes a KV frame: through the peer's region when there is one
// and the frame fits it, else over TCP (or, with KVShm, fails).
func (c *conn) writeKV(ctx context.Context, h kvwire.Header, sub []byte, kv kvwire.KV, data []byte) error {
	if err := c.lock(ctx, false); err != nil {
		return err
	}
	defer c.unlock(false)
	if c.tx != nil && c.tx.Fits(len(data)) {
		return c.writeShm(ctx, h, kv, data)
	}
	if c.tx == nil && c.t.cfg.KVTransport == KVShm && len(data) > 0 && !c.isClosed() {
		why := cmp.Or(c.txWhy, "it offered none (it runs with --kv-transport tcp, or on another host, or shared memory is not available there)")
		return fmt.Errorf("--kv-transport shm: no shared-memory region with this peer: %s: %w", why, ErrIncompatible)
	}
	return c.writeLocked(h, sub, data, false, true)
}

// writeShm copies data into a slot of the peer's region and writes the
// KV_SHM frame naming it; h is the KV frame it stands for (what the
// Faults hook sees). Called with the write lock held.
func (c *conn) writeShm(ctx context.Context, h kvwire.Header, kv kvwire.KV, data []byte) error {
	t := c.t
	if c.isClosed() {
		return fmt.Errorf("connection closed: %w", c.err)
	}
	fw := frameWriter{c: c, cutAt: -1, corruptAt: -1}
	corrupt := false
	if t.cfg.Faults != nil {
		if done, err := c.writeFault(h, kvwire.HeaderBytes+kvwire.SealedBytes(h), &fw); done {
			return err
		}
		if fw.cutAt >= 0 {
			err := fmt.Errorf("write KV frame: connection cut mid-frame: %w", ErrInjected)
			c.close(err)
			return err
		}
		corrupt = fw.corruptAt >= 0
		fw.corruptAt = -1
	}
	seq, off, slot, err := c.allocShm(ctx, len(data))
	if err != nil {
		return err
	}
	copy(slot, data)
	if corrupt {
		c.tx.Damage(off) // the consumer fails the frame, as a broken tag would
	}
	m := kvwire.KVShm{KV: kv, Seq: seq, Offset: off, Length: uint32(len(data))}
	if shmFrameHook != nil {
		hooked := m
		shmFrameHook(&hooked)
		m = hooked
	}
	pl := m.AppendTo(c.shmPayload[:0])
	dh := kvwire.Header{Version: kvwire.Version, Type: kvwire.TypeKVShm, Room: h.Room, Length: uint32(len(pl))}
	if err := c.pendShm(dh, pl, seq); err != nil {
		return err
	}
	t.inc(cShmFramesOut)
	t.add(cShmBytesOut, uint64(len(data)))
	return nil
}

// Batching of KV_SHM frames. A KV_SHM frame is the doorbell that tells
// the consumer a slot is ready; writing one per page costs a system call
// on this side and a wake-up and a read on the other, several times the
// copy of a small page. So a KV_SHM frame is sealed into the send buffer
// and written at once only when the consumer is idle (it released every
// slot it was told about, so it waits for this doorbell), or when
// shmBatchFrames are pending; otherwise it waits for the next frame of
// any kind written on the connection (which carries it first, in the
// same write: the stream keeps its order), for a SendKV that finds the
// consumer idle or the ring full (the consumer only frees slots it was
// told about), or for flushTimer after shmFlushDelay, whichever comes
// first. A consumer that keeps up gets each frame at once; a busy one
// finds many frames in one read when it comes back.
const (
	// shmBatchFrames bounds the KV_SHM frames pending on a connection.
	shmBatchFrames = 64
	// shmPendBytesMax is their sealed size (a KV_SHM frame is 80 bytes
	// sealed).
	shmPendBytesMax = shmBatchFrames * (kvwire.HeaderBytes + 32 + kvwire.SealTagBytes)
	// shmDoorbellGap is the least time between two writes of pending
	// KV_SHM frames to an idle consumer.
	shmDoorbellGap = 200 * time.Microsecond
	// shmFlushDelay bounds how long a pending KV_SHM frame waits when no
	// other write comes (the end of a burst of pages).
	shmFlushDelay = 200 * time.Microsecond
)

// pendShm seals a KV_SHM frame (header h, payload pl, naming slot seq)
// behind the pending ones, then writes them all or arranges for that
// (see above). Called with the write lock held.
func (c *conn) pendShm(h kvwire.Header, pl []byte, seq uint64) error {
	t := c.t
	if need := c.pendBytes + shmPendBytesMax; cap(c.sbuf) < need {
		nb := make([]byte, c.pendBytes, max(need, sealBufBytesMax+shmPendBytesMax))
		copy(nb, c.sbuf[:c.pendBytes])
		c.sbuf = nb
	}
	hdr := &c.shmHeader // a local array would escape through the AEAD
	h.Put(hdr)
	buf := append(c.sbuf[:c.pendBytes], hdr[:]...)
	buf, err := c.send.seal(buf, pl, hdr[:])
	if err != nil {
		err = fmt.Errorf("seal KV_SHM frame: %w", err)
		t.inc(cWriteErrors)
		c.close(err)
		return err
	}
	c.pendBytes, c.pendFrames, c.pendSeq = len(buf), c.pendFrames+1, seq
	size := uint64(kvwire.HeaderBytes + kvwire.SealedBytes(h))
	t.inc(cFramesOut)
	t.add(cBytesOut, size)
	if c.p != nil {
		c.p.framesOut.Add(1)
		c.p.bytesOut.Add(size)
	}
	if c.pendFrames >= shmBatchFrames {
		return c.flushShm()
	}
	if c.tx.Released() == c.flushedSeq {
		// The consumer is idle: ring now, unless it was rung a moment
		// ago (a stream of pages then gets one doorbell per
		// shmDoorbellGap, not one per page).
		if now := time.Now(); now.Sub(c.lastFlush) >= shmDoorbellGap {
			return c.flushShm()
		}
	}
	if !c.flushArmed {
		c.flushArmed = true
		c.flushWG.Add(1)
		if c.flushTimer == nil {
			c.flushTimer = time.AfterFunc(shmFlushDelay, c.flushLater)
		} else {
			c.flushTimer.Reset(shmFlushDelay)
		}
	}
	return nil
}

// takePending hands the pending KV_SHM frames to a write about to start
// (write lock held): it returns their length at the head of sbuf.
func (c *conn) takePending() int {
	n := c.pendBytes
	if n > 0 {
		c.flushedSeq = c.pendSeq
		c.pendBytes, c.pendFrames = 0, 0
	}
	return n
}

// flushShm writes the pending KV_SHM frames (write lock held); an error
// closes the connection.
func (c *conn) flushShm() error {
	n := c.takePending()
	if n == 0 {
		return nil
	}
	if c.isClosed() {
		return fmt.Errorf("connection closed: %w", c.err)
	}
	c.lastFlush = time.Now()
	c.nc.SetWriteDeadline(c.lastFlush.Add(c.t.cfg.WriteTimeout))
	if _, err := c.nc.Write(c.sbuf[:n]); err != nil {
		c.t.inc(cWriteErrors)
		err = fmt.Errorf("write KV_SHM frames: %w", err)
		c.close(err)
		return err
	}
	c.t.inc(cShmDoorbells)
	return nil
}

// flushLater is flushTimer's function: it writes the KV_SHM frames still
// pending, unless the connection closed.
func (c *conn) flushLater() {
	defer c.flushWG.Done()
	select {
	case c.wlock <- struct{}{}:
	case <-c.closed:
		return
	}
	defer func() { <-c.wlock }()
	c.flushArmed = false
	c.flushShm()
}

// Back-pressure polling: the first wait and the longest.
const (
	shmWaitMin = 5 * time.Microsecond
	shmWaitMax = time.Millisecond
)

// allocShm takes a ring slot for n bytes, waiting while the ring is full:
// until ctx ends (nothing was written; the connection stays up), the
// connection closes, or WriteTimeout passes (the connection closes, as a
// write past its deadline does). A released number that breaks the
// protocol closes the connection.
func (c *conn) allocShm(ctx context.Context, n int) (seq, off uint64, slot []byte, err error) {
	t := c.t
	wait := shmWaitMin
	var deadline time.Time
	for {
		seq, off, slot, ok, err := c.tx.Alloc(n)
		if err != nil {
			t.reject(cRejectedShm, c.peerAddr(), err)
			err = fmt.Errorf("write KV frame: %w", err)
			c.close(err)
			return 0, 0, nil, err
		}
		if ok {
			return seq, off, slot, nil
		}
		// The consumer frees only slots it was told about.
		if err := c.flushShm(); err != nil {
			return 0, 0, nil, err
		}
		now := time.Now()
		if deadline.IsZero() {
			t.inc(cShmRingFull)
			deadline = now.Add(t.cfg.WriteTimeout)
		} else if now.After(deadline) {
			err := fmt.Errorf("write KV frame: the peer freed no shared-memory ring space for %v (%d frames outstanding): %w", t.cfg.WriteTimeout, c.tx.Outstanding(), os.ErrDeadlineExceeded)
			t.inc(cWriteErrors)
			c.close(err)
			return 0, 0, nil, err
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-c.closed:
			timer.Stop()
			return 0, 0, nil, fmt.Errorf("connection closed: %w", c.err)
		case <-ctx.Done():
			timer.Stop()
			return 0, 0, nil, fmt.Errorf("wait for shared-memory ring space: %w", context.Cause(ctx))
		}
		wait = min(2*wait, shmWaitMax)
	}
}
