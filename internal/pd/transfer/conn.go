package transfer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"tandem/internal/pd/kvwire"
)

// conn is one authenticated connection to a peer.
//
// Writes are serialized by a channel lock (wlock) and done on the
// caller's goroutine, with a per-write deadline, instead of by a writer
// goroutine draining a queue: SendKV seals the caller's page memory
// without copying it first, so the write must finish before SendKV
// returns; a queue would make the caller wait anyway and could not drop
// a queued frame on context cancellation without either copying it or
// reading memory the caller had already released. Waiting writers are
// bounded by SendQueueMax; they wait on the lock with their context.
// Every frame is sealed (seal.go) under the lock, in write order, so the
// record counters of both sides agree.
type conn struct {
	t           *Transport
	nc          net.Conn
	p           *peer         // set before the reader starts
	incarnation uint64        // the peer process's incarnation from the handshake
	timeout     time.Duration // peer timeout for this connection (see Transport.timeoutWith)
	hbSeq       uint64        // last heartbeat sequence number sent; runPeer only

	wlock   chan struct{} // capacity 1: held while a frame is sealed and written
	waiting atomic.Int32  // writers waiting for or holding wlock
	send    *sealer       // this node's direction; under wlock
	sbuf    []byte        // sealed bytes waiting to be written; under wlock, ≤ sealBufBytesMax + shmPendBytesMax
	recv    *sealer       // the peer's direction; reader goroutine only

	// readMu is held by the reader while it opens KV data into a
	// destination slice; killConn takes it to be sure no such write is in
	// progress or will start (dead).
	readMu sync.Mutex
	dead   bool

	closeOnce sync.Once
	closed    chan struct{}
	err       error // why it closed; set before closed is closed

	shmState // the shared-memory data path (shm.go)
}

// sealBufBytesMax bounds a connection's send buffer: a whole control
// frame, or a KV frame's header and sub-header and up to two records of
// data (then the buffer is written and refilled).
const sealBufBytesMax = kvwire.HeaderBytes + kvwire.KVSubHeaderBytes + kvwire.SealTagBytes + 2*(kvwire.SealRecordBytesMax+kvwire.SealTagBytes)

func newConn(t *Transport, nc net.Conn, incarnation uint64, timeout time.Duration, keys sessionKeys) *conn {
	return &conn{t: t, nc: nc, incarnation: incarnation, timeout: timeout, wlock: make(chan struct{}, 1), closed: make(chan struct{}),
		send: newSealer(keys.send), recv: newSealer(keys.recv)}
}

// close closes the connection once, recording why.
func (c *conn) close(cause error) {
	c.closeOnce.Do(func() {
		c.err = cause
		close(c.closed)
		c.nc.Close()
		c.closedShm()
	})
}

func (c *conn) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// cause returns why the connection closed (nil while open).
func (c *conn) cause() error {
	if c.isClosed() {
		return c.err
	}
	return nil
}

func (c *conn) peerAddr() string {
	if c.p != nil {
		return c.p.addr
	}
	return c.nc.RemoteAddr().String()
}

// write seals and writes one frame with header h: prefix (a control
// payload, or a KV frame's encoded sub-header), then data (a KV frame's
// data; nil otherwise), which is only read. A heartbeat (try) gives up at
// once when another frame is being written and uses the shorter of
// WriteTimeout and PeerTimeout as its deadline. Any write error closes
// the connection: a partial frame cannot be taken back.
func (c *conn) write(ctx context.Context, h kvwire.Header, prefix, data []byte, try bool) error {
	if err := c.lock(ctx, try); err != nil {
		return err
	}
	defer c.unlock(try)
	return c.writeLocked(h, prefix, data, try, true)
}

// lock takes the write lock: a heartbeat (try) only when it is free,
// other writers waiting with ctx, at most SendQueueMax of them. unlock
// releases it.
func (c *conn) lock(ctx context.Context, try bool) error {
	t := c.t
	if try {
		select {
		case c.wlock <- struct{}{}:
			return nil
		default:
			t.inc(cHeartbeatsSkipped)
			return ErrSendQueueFull
		}
	}
	if int(c.waiting.Add(1)) > t.cfg.SendQueueMax {
		c.waiting.Add(-1)
		t.inc(cSendQueueFull)
		return fmt.Errorf("%d senders waiting: %w", t.cfg.SendQueueMax, ErrSendQueueFull)
	}
	select { // free: take it without the three-way select
	case c.wlock <- struct{}{}:
		return nil
	default:
	}
	select {
	case c.wlock <- struct{}{}:
		return nil
	case <-c.closed:
		c.waiting.Add(-1)
		return fmt.Errorf("connection closed: %w", c.err)
	case <-ctx.Done():
		c.waiting.Add(-1)
		return fmt.Errorf("wait to write: %w", context.Cause(ctx))
	}
}

func (c *conn) unlock(try bool) {
	<-c.wlock
	if !try {
		c.waiting.Add(-1)
	}
}

// writeLocked is write with the lock held. hooked says whether the Faults
// hook sees the frame (not for the shared-memory setup frames, nor for
// a KV_SHM frame, whose hook call saw the KV frame it stands for).
func (c *conn) writeLocked(h kvwire.Header, prefix, data []byte, try, hooked bool) error {
	t := c.t
	if c.isClosed() {
		return fmt.Errorf("connection closed: %w", c.err)
	}
	h.Checksum = 0 // the tags authenticate sealed frames
	size := kvwire.HeaderBytes + kvwire.SealedBytes(h)
	fw := frameWriter{c: c, cutAt: -1, corruptAt: -1}
	if t.cfg.Faults != nil && hooked {
		if done, err := c.writeFault(h, size, &fw); done {
			return err
		}
	}
	return c.sealAndWrite(h, prefix, data, size, try, &fw)
}

// sealAndWrite seals and writes the frame under the write deadline and
// counts it.
func (c *conn) sealAndWrite(h kvwire.Header, prefix, data []byte, size int, try bool, fw *frameWriter) error {
	t := c.t
	timeout := t.cfg.WriteTimeout
	if try {
		timeout = min(timeout, c.timeout)
	}
	c.nc.SetWriteDeadline(time.Now().Add(timeout))
	if err := c.seal(h, prefix, data, size, fw); err != nil {
		if errors.Is(err, ErrInjected) {
			return err
		}
		t.inc(cWriteErrors)
		err = fmt.Errorf("write %v frame: %w", h.Type, err)
		c.close(err)
		return err
	}
	t.inc(cFramesOut)
	t.add(cBytesOut, uint64(size))
	if c.p != nil {
		c.p.framesOut.Add(1)
		c.p.bytesOut.Add(uint64(size))
	}
	return nil
}

// seal seals the frame record by record into the send buffer, writing it
// whenever the next record would not fit, and at the end.
func (c *conn) seal(h kvwire.Header, prefix, data []byte, size int, fw *frameWriter) error {
	// KV_SHM frames sealed earlier but not written yet (shm.go) go first,
	// in the same write.
	pend := c.takePending()
	if need := pend + min(size, sealBufBytesMax); cap(c.sbuf) < need {
		nb := make([]byte, pend, need)
		copy(nb, c.sbuf[:pend])
		c.sbuf = nb
	}
	fw.off = -pend // fault offsets count from this frame's first byte
	var hdr [kvwire.HeaderBytes]byte
	h.Put(&hdr)
	buf := append(c.sbuf[:pend], hdr[:]...)
	buf, err := c.send.seal(buf, prefix, hdr[:])
	if err != nil {
		return err
	}
	for len(data) > 0 {
		n := min(len(data), kvwire.SealRecordBytesMax)
		if len(buf)+n+kvwire.SealTagBytes > cap(buf) {
			if err := fw.write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
		if buf, err = c.send.seal(buf, data[:n], hdr[:]); err != nil {
			return err
		}
		data = data[n:]
	}
	return fw.write(buf)
}

// frameWriter writes a frame's sealed bytes, applying an injected cut or
// corruption at a byte offset of the frame (-1: none).
type frameWriter struct {
	c                *conn
	off              int // bytes of the frame passed so far (negative over pending KV_SHM frames written ahead of it)
	cutAt, corruptAt int
}

func (w *frameWriter) write(b []byte) error {
	if at := w.corruptAt - w.off; w.corruptAt >= 0 && at >= 0 && at < len(b) {
		b[at] ^= 0x40 // in the connection's own buffer, never the caller's data
	}
	if w.cutAt >= 0 && w.off+len(b) > w.cutAt {
		w.c.nc.Write(b[:w.cutAt-w.off])
		err := fmt.Errorf("write frame: connection cut mid-frame: %w", ErrInjected)
		w.c.close(err)
		return err
	}
	w.off += len(b)
	_, err := w.c.nc.Write(b)
	return err
}

// writeFault consults the Faults hook before anything is sealed (a frame
// dropped or failed must not use up a record number). It returns done
// with the write's result when the fault replaced the write, or sets up
// fw for a cut or a corruption.
func (c *conn) writeFault(h kvwire.Header, size int, fw *frameWriter) (bool, error) {
	t := c.t
	f := t.cfg.Faults.BeforeWrite(c.peerAddr(), h)
	if f.Action != FaultNone || f.Delay > 0 {
		t.inc(cFaultsInjected)
	}
	if !t.sleep(f.Delay, c.closed) {
		return true, fmt.Errorf("write %v frame: connection closed during injected delay: %w", h.Type, ErrInjected)
	}
	switch f.Action {
	case FaultDrop:
		return true, nil
	case FaultFail:
		return true, fmt.Errorf("write %v frame: %w", h.Type, ErrInjected)
	case FaultCut:
		fw.cutAt = size / 2
	case FaultCorrupt:
		fw.corruptAt = kvwire.HeaderBytes + (size-kvwire.HeaderBytes)/2
	}
	return false, nil
}

// readLoop reads frames until the connection fails, then closes it and
// releases its shared-memory regions.
func (t *Transport) readLoop(c *conn) {
	err := t.readFrames(c)
	c.close(err)
	c.releaseShm()
}

// reader is the state of one connection's read loop.
type reader struct {
	t       *Transport
	c       *conn
	in      io.Reader // the connection, buffered when KV_SHM frames may come
	hdr     [kvwire.HeaderBytes]byte
	sub     [kvwire.KVSubHeaderBytes + kvwire.SealTagBytes]byte
	payload []byte              // sealed control payloads; grows to at most ControlPayloadBytesMax + a tag
	record  []byte              // sealed KV data records, recvBatchRecords at a time
	check   [256]kvwire.Payload // scratch values for checking payloads, by type

	kvShmFrame kvwire.KVShm
	kvSrcFrame kvwire.KVSrc
}

func (t *Transport) readFrames(c *conn) error {
	r := &reader{t: t, c: c, in: c.nc}
	if c.rx != nil {
		// Many small KV_SHM frames: read them without a system call each.
		r.in = bufio.NewReaderSize(c.nc, readBufBytes)
	}
	for {
		if !r.shmBuffered() {
			c.nc.SetReadDeadline(time.Now().Add(c.timeout))
		}
		h, err := kvwire.ReadHeader(r.in, &r.hdr)
		if err != nil {
			return r.failed(err)
		}
		var f Fault
		if t.cfg.Faults != nil && !isShmType(h.Type) {
			if f, err = r.readFault(h); err != nil {
				return err
			}
		}
		if h.Type == kvwire.TypeKV {
			err = r.readKV(h, f)
		} else {
			err = r.readControl(h, f)
		}
		if err != nil {
			return r.failed(err)
		}
	}
}

// received counts a frame read whole (before it is delivered) and marks
// the peer as heard from.
func (r *reader) received(h kvwire.Header) {
	t, p := r.t, r.c.p
	size := uint64(kvwire.HeaderBytes) + uint64(kvwire.SealedBytes(h))
	t.inc(cFramesIn)
	t.add(cBytesIn, size)
	p.framesIn.Add(1)
	p.bytesIn.Add(size)
	p.lastHeard.Store(int64(t.now()))
}

// failed classifies a read error, counts and logs what deserves it, and
// returns the error that closes the connection.
func (r *reader) failed(err error) error {
	t, c := r.t, r.c
	if c.isClosed() {
		return c.err
	}
	if cn, ok := rejectCounter(err); ok {
		t.reject(cn, c.peerAddr(), err)
		return err
	}
	if errors.Is(err, errOpen) {
		t.reject(cRejectedAuthTag, c.peerAddr(), err)
		return err
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("read from %s: nothing for %v: %w", c.peerAddr(), c.timeout, errSilent)
	}
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("read from %s: connection closed by the peer: %w", c.peerAddr(), err)
	}
	return fmt.Errorf("read from %s: %w", c.peerAddr(), err)
}

func (r *reader) readFault(h kvwire.Header) (Fault, error) {
	t, c := r.t, r.c
	f := t.cfg.Faults.BeforeRead(c.peerAddr(), h)
	if f.Action != FaultNone || f.Delay > 0 {
		t.inc(cFaultsInjected)
	}
	if !t.sleep(f.Delay, c.closed) {
		return f, fmt.Errorf("read %v frame: connection closed during injected delay: %w", h.Type, ErrInjected)
	}
	if f.Action == FaultCut || f.Action == FaultFail {
		return f, fmt.Errorf("read %v frame: connection cut: %w", h.Type, ErrInjected)
	}
	return f, nil
}

// readControl reads, opens, checks and delivers a non-KV frame.
func (r *reader) readControl(h kvwire.Header, f Fault) error {
	t, c := r.t, r.c
	n := int(h.Length) + kvwire.SealTagBytes
	if cap(r.payload) < n {
		r.payload = make([]byte, n, max(n, min(2*cap(r.payload), kvwire.ControlPayloadBytesMax+kvwire.SealTagBytes)))
	}
	sealed := r.payload[:n]
	if _, err := io.ReadFull(r.in, sealed); err != nil {
		return err
	}
	if f.Action == FaultCorrupt {
		sealed[0] ^= 0x40
	}
	payload, err := c.recv.open(sealed[:0], sealed, r.hdr[:])
	if err != nil {
		return fmt.Errorf("%v frame: %w", h.Type, err)
	}
	r.received(h)
	if h.Type.IsAuth() {
		err := fmt.Errorf("%v frame after the handshake", h.Type)
		t.reject(cRejectedUnexpected, c.peerAddr(), err)
		return err
	}
	if isShmType(h.Type) {
		return r.readShm(h, payload)
	}
	chk := r.check[h.Type]
	if chk == nil {
		chk = kvwire.NewPayload(h.Type)
		r.check[h.Type] = chk
	}
	if err := chk.Decode(payload); err != nil {
		return err
	}
	if f.Action == FaultDrop || c.isClosed() {
		return nil
	}
	if h.Type == kvwire.TypeHeartbeat {
		hb := *chk.(*kvwire.Heartbeat)
		c.p.mu.Lock()
		c.p.lastHB = hb
		c.p.mu.Unlock()
		t.inc(cHeartbeatsIn)
		t.h.PeerUp(c.p.addr, hb)
		return nil
	}
	t.h.Frame(c.p.addr, h, payload)
	return nil
}

// readKV reads and opens a KV frame's sub-header (so the destination is
// chosen from authenticated coordinates), then its data record by record
// straight into the destination the Handler gives (or discards it), and
// reports the result. A record that fails to open ends the frame
// (KVDone false) and closes the connection.
func (r *reader) readKV(h kvwire.Header, f Fault) error {
	t, c := r.t, r.c
	if _, err := io.ReadFull(r.in, r.sub[:]); err != nil {
		return err
	}
	n := int(h.Length) - kvwire.KVSubHeaderBytes
	if f.Action == FaultCorrupt && n == 0 {
		r.sub[0] ^= 0x40
	}
	sub, err := c.recv.open(r.sub[:0], r.sub[:], r.hdr[:])
	if err != nil {
		return fmt.Errorf("KV sub-header: %w", err)
	}
	var kv kvwire.KV
	if err := kv.Decode(sub); err != nil {
		return err
	}
	corrupt := f.Action == FaultCorrupt
	if f.Action == FaultDrop {
		err := r.readData(nil, n, corrupt)
		if err == nil {
			r.received(h)
		}
		return err
	}
	if c.isClosed() {
		return c.err
	}
	// From here every path that got a buffer calls KVDone exactly once.
	dest := t.h.KVDest(c.p.addr, h.Room, kv, n)
	if dest != nil && len(dest) < n {
		t.inc(cKVDestShort)
		dest = nil
	}
	if dest == nil {
		t.inc(cKVDiscardedFrames)
		t.add(cKVDiscardedBytes, uint64(n))
	} else {
		dest = dest[:n]
	}
	err = r.readData(dest, n, corrupt)
	if err == nil {
		r.received(h)
	}
	if dest != nil {
		t.h.KVDone(c.p.addr, h.Room, kv, n, err == nil)
	}
	return err
}

// errSilent closes a connection on which nothing arrived for its timeout;
// runPeer counts it (read_timeouts) when it declares the peer lost.
var errSilent = fmt.Errorf("peer silent: %w", ErrPeerLost)

// errConnDead stops a KV read after killConn.
var errConnDead = errors.New("connection closed while reading KV data")

// recvBatchRecords is how many KV data records the reader reads with one
// ReadFull before opening them one by one: fewer wake-ups on a fast link.
const recvBatchRecords = 4

// readData reads the n data bytes of a KV frame in sealed records, a few
// at a time into the record buffer, and opens each from there into dst
// (under readMu), or in place and drops it when dst is nil; it refreshes
// the read deadline and the last-heard time per batch, so a large frame
// on a slow link does not look like a silent peer. corrupt flips the
// first byte read (fault injection).
func (r *reader) readData(dst []byte, n int, corrupt bool) error {
	t, c := r.t, r.c
	const rec = kvwire.SealRecordBytesMax + kvwire.SealTagBytes
	if n > 0 && r.record == nil {
		r.record = make([]byte, recvBatchRecords*rec)
	}
	for off := 0; off < n; {
		data := min(n-off, recvBatchRecords*kvwire.SealRecordBytesMax)
		records := (data + kvwire.SealRecordBytesMax - 1) / kvwire.SealRecordBytesMax
		batch := r.record[:data+records*kvwire.SealTagBytes]
		c.nc.SetReadDeadline(time.Now().Add(c.timeout))
		if _, err := io.ReadFull(r.in, batch); err != nil {
			return err
		}
		if corrupt {
			batch[0] ^= 0x40
			corrupt = false
		}
		for len(batch) > 0 {
			m := min(len(batch), rec) - kvwire.SealTagBytes
			sealed := batch[:m+kvwire.SealTagBytes]
			batch = batch[len(sealed):]
			var err error
			if dst == nil {
				_, err = c.recv.open(sealed[:0], sealed, r.hdr[:])
			} else {
				c.readMu.Lock()
				if c.dead {
					c.readMu.Unlock()
					return errConnDead
				}
				_, err = c.recv.open(dst[off:off], sealed, r.hdr[:])
				c.readMu.Unlock()
			}
			if err != nil {
				return fmt.Errorf("KV data at byte %d: %w", off, err)
			}
			off += m
		}
		c.p.lastHeard.Store(int64(t.now()))
	}
	return nil
}
