package transfer

import (
	"bufio"
	"cmp"
	"context"
	"errors"
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
//
// A node with a source region (Config.ShmSource: a prefill worker's KV
// cache in a memfd) follows its accepting SHM_REPLY with SHM_SOURCE,
// under the same hold of the write lock. The peer's reader maps the
// source read-only (shm.OpenSource, the same checks as Open) and writes
// the offer's ack into its own ring's header; once this side reads the
// ack there, SendKVHeld of data inside the source sends KV_SRC: a
// data-less ring slot (Producer.Mark) keeps the frame's place in the
// ring's sequence and release, and the frame names the data's offset in
// the source. The peer's reader copies it from its mapping of the source
// straight into the KVDest slice, then checks the ring was not revoked
// and releases the slot. This side holds the data (the caller's release
// is not called) until the peer released the slot, seen by Collect
// after a later send or on holdTimer; when the connection ends first it
// revokes the ring (Producer.Revoke) before calling the releases, so a
// copy the peer had not finished fails (KVDone false) instead of taking
// bytes of a page reused meanwhile.

// Test hooks (export_test.go): shmOfferHook edits each offer before it
// is sent, shmFrameHook each KV_SHM frame, shmSourceHook each
// SHM_SOURCE, srcFrameHook each KV_SRC frame. nil outside tests.
var (
	shmOfferHook  func(*kvwire.ShmOffer)
	shmFrameHook  func(*kvwire.KVShm)
	shmSourceHook func(*kvwire.ShmSource)
	srcFrameHook  func(*kvwire.KVSrc)
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

	// Scratch for the KV_SHM or KV_SRC payload being sealed (under the
	// write lock).
	shmPayload [40]byte // a KV_SHM payload is 32 bytes, a KV_SRC one 40
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

	// Sending from the source region (under the write lock): the ack
	// value of the SHM_SOURCE sent (srcOffered), whether the peer wrote
	// it (srcOn), and the KV_SRC frames whose data the peer has not
	// released, oldest first; holdTimer collects releases while holds
	// is not empty (holdArmed: it is set, and holdWG counts it).
	srcAck     [kvwire.NonceBytes]byte
	srcOffered bool
	srcOn      bool
	holds      []srcHold
	holdTimer  *time.Timer
	holdArmed  bool
	holdWG     sync.WaitGroup

	// Receiving from the peer's source region: its read-only mapping.
	// The reader's alone.
	src     *shm.Region
	srcSeen bool

	srcSending, srcReceiving atomic.Bool // for Peers

	shmMu     sync.Mutex
	readerOn  bool // the reader owns the regions from now on
	shmClosed bool
}

// srcHold is a KV_SRC frame sent, not yet released by the peer: its ring
// sequence number, when it was sent, and the caller's release.
type srcHold struct {
	seq     uint64
	at      time.Time
	release func()
}

func isShmType(t kvwire.Type) bool {
	switch t {
	case kvwire.TypeShmOffer, kvwire.TypeShmReply, kvwire.TypeKVShm, kvwire.TypeShmSource, kvwire.TypeKVSrc:
		return true
	}
	return false
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
	if c.src != nil {
		c.src.Close()
		c.src = nil
	}
	c.shmMu.Unlock()
	c.receiving.Store(false)
	c.srcReceiving.Store(false)
	c.wlock <- struct{}{} // writers see the closed connection and leave
	if c.txRegion != nil {
		c.collectHolds()
		if len(c.holds) > 0 {
			c.tx.Revoke() // before any page the peer may still be copying is reused
			c.t.add(cShmSrcRevoked, uint64(len(c.holds)))
			for i, h := range c.holds {
				h.release()
				c.holds[i] = srcHold{}
			}
			c.holds = c.holds[:0]
		}
		c.txRegion.Close()
		c.tx, c.txRegion = nil, nil
	}
	if c.holdArmed && c.holdTimer.Stop() {
		c.holdArmed = false
		c.holdWG.Done()
	}
	c.sending.Store(false)
	c.srcSending.Store(false)
	c.pendBytes, c.pendFrames = 0, 0 // never to be written: the connection is closed
	if c.flushArmed && c.flushTimer.Stop() {
		c.flushArmed = false
		c.flushWG.Done()
	}
	<-c.wlock
	c.flushWG.Wait() // a flush that already fired sees the closed connection and returns
	c.holdWG.Wait()  // likewise a collection
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
	case kvwire.TypeShmSource:
		return r.shmSource(payload)
	case kvwire.TypeKVSrc:
		return r.kvSrc(h, payload)
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
	if err := c.writeLocked(kvwire.NewHeader(kvwire.TypeShmReply, room.ID{}, pl), pl, nil, false, false); err != nil {
		return err
	}
	if region == nil || t.cfg.ShmSource == nil {
		return nil
	}
	so := t.cfg.ShmSource.Offer()
	c.srcAck, c.srcOffered = so.Ack, true
	if shmSourceHook != nil {
		shmSourceHook(&so)
	}
	pl = so.AppendTo(nil)
	if err := c.writeLocked(kvwire.NewHeader(kvwire.TypeShmSource, room.ID{}, pl), pl, nil, false, false); err != nil {
		return err
	}
	t.inc(cShmSourceOffered)
	return nil
}

// shmSource maps the peer's source region read-only and acks it in this
// node's ring, or logs why not (KV then keeps coming through the ring).
func (r *reader) shmSource(payload []byte) error {
	t, c := r.t, r.c
	if !c.rxActive || c.srcSeen {
		return r.unexpected("SHM_SOURCE without an accepted shared-memory region, or a second one")
	}
	c.srcSeen = true
	var o kvwire.ShmSource
	if err := o.Decode(payload); err != nil {
		return err
	}
	region, err := shm.OpenSource(&o, kvwire.ShmSourceBytesMax)
	if err != nil {
		t.inc(cShmSourceFailed)
		t.log.Warn("transfer: could not map the peer's KV memory; its KV keeps coming through the shared-memory ring (two copies a page)", "peer", c.peerAddr(), "err", err)
		return nil
	}
	c.shmMu.Lock()
	c.src = region
	c.shmMu.Unlock()
	c.rx.AckSource(o.Ack)
	c.srcReceiving.Store(true)
	t.inc(cShmSourceMapped)
	t.log.Info("transfer: KV from this peer is copied straight out of its memory", "peer", c.peerAddr(), "source_bytes", region.Bytes())
	return nil
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

// errRevoked fails a KV_SRC frame whose copy the peer revoked: its
// connection ended before this side released the frame.
var errRevoked = errors.New("the peer revoked its KV_SRC frames (its side of the connection ended): the copy is not to be trusted")

// kvSrc delivers a KV frame whose data lies in the peer's source region:
// the same KVDest/KVDone calls as a KV frame over TCP, the data copied
// once, from the peer's memory into the destination.
func (r *reader) kvSrc(h kvwire.Header, payload []byte) error {
	t, c := r.t, r.c
	if c.src == nil {
		return r.unexpected("KV_SRC without a mapped source region")
	}
	m := &r.kvSrcFrame
	if err := m.Decode(payload); err != nil {
		return err
	}
	f, err := r.shmFault(h, m.Length)
	if err != nil {
		return err
	}
	if err := c.rx.Mark(m); err != nil {
		t.reject(cRejectedShm, c.peerAddr(), err)
		return err
	}
	data, ok := c.src.Source(m.Offset, m.Length)
	if !ok {
		err := fmt.Errorf("KV_SRC [%d, +%d) outside the peer's %d-byte source region: %w", m.Offset, m.Length, c.src.DataBytes(), shm.ErrPeer)
		t.reject(cRejectedShm, c.peerAddr(), err)
		return err
	}
	if f.Action == FaultDrop {
		return r.shmReleased("KV_SRC", m.Seq, c.rx.ReleaseMark(m))
	}
	if c.rx.Revoked() {
		// The peer's side of the connection ended and took its pages
		// back: the frame is dropped unseen (no KVDest), as the rest of
		// the stream will be once it ends, and the frames behind it (an
		// ABORT, say) still arrive.
		t.inc(cKVDiscardedFrames)
		t.add(cKVDiscardedBytes, uint64(m.Length))
		return r.shmReleased("KV_SRC", m.Seq, c.rx.ReleaseMark(m))
	}
	return r.deliverShm(h.Room, m.KV, data, f, cShmSrcFramesIn, cShmSrcBytesIn, func() error {
		revoked := c.rx.Revoked() // after the copy's loads
		if err := c.rx.ReleaseMark(m); err != nil || !revoked {
			return r.shmReleased("KV_SRC", m.Seq, err)
		}
		return errRevoked
	})
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
	f, err := r.shmFault(h, m.Length)
	if err != nil {
		return err
	}
	slot, err := c.rx.Slot(m)
	if err != nil {
		t.reject(cRejectedShm, c.peerAddr(), err)
		return err
	}
	if f.Action == FaultDrop {
		return r.shmReleased("KV_SHM", m.Seq, c.rx.Release(m))
	}
	return r.deliverShm(h.Room, m.KV, slot, f, cShmFramesIn, cShmBytesIn, func() error {
		return r.shmReleased("KV_SHM", m.Seq, c.rx.Release(m))
	})
}

// shmFault consults the Faults hook for a shared-memory frame of n data
// bytes in the room of h, as for the KV frame it stands for.
func (r *reader) shmFault(h kvwire.Header, n uint32) (Fault, error) {
	if r.t.cfg.Faults == nil {
		return Fault{}, nil
	}
	kvh := kvwire.Header{Version: kvwire.Version, Type: kvwire.TypeKV, Room: h.Room, Length: kvwire.KVSubHeaderBytes + n}
	return r.readFault(kvh)
}

// deliverShm hands the bytes of a shared-memory KV frame (data, inside a
// mapping) to the Handler: KVDest, the copy under readMu (nothing lands
// after PeerLost), then end, which releases the frame's slot and says
// whether the copy holds up (nil), the frame counted (frames, bytes), and
// KVDone, so a Handler that saw KVDone sees the frame in Counters. It
// returns the error that closes the connection, if any.
func (r *reader) deliverShm(id room.ID, kv kvwire.KV, data []byte, f Fault, frames, bytes counter, end func() error) error {
	t, c := r.t, r.c
	if c.isClosed() {
		return c.err
	}
	n := len(data)
	// From here every path that got a buffer calls KVDone exactly once.
	dest := t.h.KVDest(c.p.addr, id, kv, n)
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
			copy(dest[:n], data)
		}
		c.readMu.Unlock()
	}
	endErr := end()
	if f.Action == FaultCorrupt && endErr == nil {
		endErr = fmt.Errorf("injected corruption of the slot read: %w", shm.ErrSlot)
	}
	t.inc(frames)
	t.add(bytes, uint64(n))
	if dest != nil {
		t.h.KVDone(c.p.addr, id, kv, n, dead == nil && endErr == nil)
	}
	if dead != nil {
		return dead
	}
	return endErr
}

// shmReleased turns an error releasing the slot of frame seq (of type
// what) into the one that closes the connection (counted).
func (r *reader) shmReleased(what string, seq uint64, err error) error {
	if err == nil {
		return nil
	}
	err = fmt.Errorf("%s seq %d: %w", what, seq, err)
	r.t.reject(cRejectedShm, r.c.peerAddr(), err)
	return err
}

// writeKV writes a KV frame: as KV_SRC when release is set, data lies in
// the source region and the peer mapped it (held: release is now c's to
// call); else through the peer's region when there is one and the frame
// fits it; else over TCP (or, with KVShm, fails).
func (c *conn) writeKV(ctx context.Context, h kvwire.Header, sub []byte, kv kvwire.KV, data []byte, release func()) (held bool, err error) {
	if err := c.lock(ctx, false); err != nil {
		return false, err
	}
	defer c.unlock(false)
	if c.tx != nil && len(c.holds) > 0 {
		c.collectHolds()
	}
	if release != nil && c.tx != nil && c.srcUsable() {
		if off, ok := c.t.cfg.ShmSource.Locate(data); ok {
			return c.writeSrc(ctx, h, kv, off, len(data), release)
		}
	}
	if c.tx != nil && c.tx.Fits(len(data)) {
		return false, c.writeShm(ctx, h, kv, data)
	}
	if c.tx == nil && c.t.cfg.KVTransport == KVShm && len(data) > 0 && !c.isClosed() {
		why := cmp.Or(c.txWhy, "it offered none (it runs with --kv-transport tcp, or on another host, or shared memory is not available there)")
		return false, fmt.Errorf("--kv-transport shm: no shared-memory region with this peer: %s: %w", why, ErrIncompatible)
	}
	return false, c.writeLocked(h, sub, data, false, true)
}

// srcUsable reports whether the peer mapped this node's source region
// (it wrote the offer's ack into its ring). Write lock held.
func (c *conn) srcUsable() bool {
	if !c.srcOn && c.srcOffered && c.tx.SourceAcked(c.srcAck) {
		c.srcOn = true
		c.srcSending.Store(true)
		c.t.log.Info("transfer: KV to this peer is copied by it straight out of this node's memory", "peer", c.peerAddr())
	}
	return c.srcOn
}

// writeSrc takes a data-less ring slot and writes the KV_SRC frame
// naming n bytes at off in the source region; h is the KV frame it
// stands for (what the Faults hook sees). Once the slot is taken the
// frame is held (release is c's to call, even if writing fails: the
// connection then closes and releaseShm calls it). Write lock held.
func (c *conn) writeSrc(ctx context.Context, h kvwire.Header, kv kvwire.KV, off uint64, n int, release func()) (held bool, err error) {
	t := c.t
	corrupt, done, err := c.shmWriteFault(h)
	if done {
		return false, err
	}
	seq, slot, _, err := c.allocShm(ctx, 0)
	if err != nil {
		return false, err
	}
	c.holds = append(c.holds, srcHold{seq: seq, at: time.Now(), release: release})
	c.armHolds()
	if corrupt {
		c.tx.Damage(slot)
	}
	m := kvwire.KVSrc{KV: kv, Seq: seq, Slot: slot, Offset: off, Length: uint32(n)}
	if srcFrameHook != nil {
		hooked := m
		srcFrameHook(&hooked)
		m = hooked
	}
	pl := m.AppendTo(c.shmPayload[:0])
	dh := kvwire.Header{Version: kvwire.Version, Type: kvwire.TypeKVSrc, Room: h.Room, Length: uint32(len(pl))}
	if err := c.pendShm(dh, pl, seq); err != nil {
		return true, err
	}
	t.inc(cShmSrcFramesOut)
	t.add(cShmSrcBytesOut, uint64(n))
	return true, nil
}

// holdCollectDelay is how often the releases of held KV_SRC frames are
// collected while no send does it.
const holdCollectDelay = time.Millisecond

// collectHolds calls the release of every held frame the peer released
// (write lock held). A released number that breaks the protocol closes
// the connection, and so does a frame the peer has not released for
// WriteTimeout (a stuck consumer must not keep this node's pages: like a
// full ring, it ends the connection); releaseShm then revokes and
// releases the rest.
func (c *conn) collectHolds() {
	rel, err := c.tx.Collect()
	if err != nil {
		c.t.reject(cRejectedShm, c.peerAddr(), err)
		c.close(fmt.Errorf("collect KV_SRC releases: %w", err))
		return
	}
	i := 0
	for ; i < len(c.holds) && c.holds[i].seq <= rel; i++ {
		c.holds[i].release()
		c.holds[i] = srcHold{}
	}
	if i > 0 {
		c.holds = append(c.holds[:0], c.holds[i:]...)
	}
	if len(c.holds) > 0 && time.Since(c.holds[0].at) > c.t.cfg.WriteTimeout {
		c.t.inc(cWriteErrors)
		c.close(fmt.Errorf("the peer released no KV_SRC frame for %v (%d held): %w", c.t.cfg.WriteTimeout, len(c.holds), os.ErrDeadlineExceeded))
	}
}

// armHolds sets holdTimer when frames are held and it is not set (write
// lock held).
func (c *conn) armHolds() {
	if c.holdArmed || len(c.holds) == 0 {
		return
	}
	c.holdArmed = true
	c.holdWG.Add(1)
	if c.holdTimer == nil {
		c.holdTimer = time.AfterFunc(holdCollectDelay, c.collectLater)
	} else {
		c.holdTimer.Reset(holdCollectDelay)
	}
}

// collectLater is holdTimer's function: it collects releases, and sets
// the timer again while frames are still held, unless the connection
// closed.
func (c *conn) collectLater() {
	defer c.holdWG.Done()
	select {
	case c.wlock <- struct{}{}:
	case <-c.closed:
		return
	}
	defer func() { <-c.wlock }()
	c.holdArmed = false
	if c.tx == nil || c.isClosed() {
		return
	}
	c.collectHolds()
	c.armHolds()
}

// shmWriteFault checks, before a KV frame h goes through shared memory,
// that the connection is open and what the Faults hook does to the frame:
// done (with err) when it is not to be written (closed, dropped, failed,
// or cut: a cut closes the connection), corrupt when its slot is to be
// damaged (the consumer then fails it, as a broken tag would). Write lock
// held.
func (c *conn) shmWriteFault(h kvwire.Header) (corrupt, done bool, err error) {
	if c.isClosed() {
		return false, true, fmt.Errorf("connection closed: %w", c.err)
	}
	if c.t.cfg.Faults == nil {
		return false, false, nil
	}
	fw := frameWriter{c: c, cutAt: -1, corruptAt: -1}
	if done, err := c.writeFault(h, kvwire.HeaderBytes+kvwire.SealedBytes(h), &fw); done {
		return false, true, err
	}
	if fw.cutAt >= 0 {
		err := fmt.Errorf("write KV frame: connection cut mid-frame: %w", ErrInjected)
		c.close(err)
		return false, true, err
	}
	return fw.corruptAt >= 0, false, nil
}

// writeShm copies data into a slot of the peer's region and writes the
// KV_SHM frame naming it; h is the KV frame it stands for (what the
// Faults hook sees). Called with the write lock held.
func (c *conn) writeShm(ctx context.Context, h kvwire.Header, kv kvwire.KV, data []byte) error {
	t := c.t
	corrupt, done, err := c.shmWriteFault(h)
	if done {
		return err
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
	// shmPendBytesMax is their sealed size at most (a KV_SHM frame is 80
	// bytes sealed, a KV_SRC frame 88).
	shmPendBytesMax = shmBatchFrames * (kvwire.HeaderBytes + 40 + kvwire.SealTagBytes)
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

// allocShm takes a ring slot for n bytes (0: a data-less one, for a
// KV_SRC frame), waiting while the ring is full:
// until ctx ends (nothing was written; the connection stays up), the
// connection closes, or WriteTimeout passes (the connection closes, as a
// write past its deadline does). A released number that breaks the
// protocol closes the connection.
func (c *conn) allocShm(ctx context.Context, n int) (seq, off uint64, slot []byte, err error) {
	t := c.t
	wait := shmWaitMin
	var deadline time.Time
	for {
		var (
			seq, off uint64
			slot     []byte
			ok       bool
			err      error
		)
		if n == 0 {
			seq, off, ok, err = c.tx.Mark()
		} else {
			seq, off, slot, ok, err = c.tx.Alloc(n)
		}
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
