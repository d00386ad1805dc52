package transfer

import (
	"bytes"
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
// goroutine draining a queue: SendKV writes the caller's page memory
// without copying it, so the write must finish before SendKV returns; a
// queue would make the caller wait anyway and could not drop a queued
// frame on context cancellation without either copying it or writing
// memory the caller had already released. Waiting writers are bounded
// by SendQueueMax; they wait on the lock with their context.
type conn struct {
	t           *Transport
	nc          net.Conn
	p           *peer         // set before the reader starts
	incarnation uint64        // the peer process's incarnation from the handshake
	timeout     time.Duration // peer timeout for this connection (see Transport.timeoutWith)
	hbSeq       uint64        // last heartbeat sequence number sent; runPeer only

	wlock   chan struct{} // capacity 1: held while a frame is written
	waiting atomic.Int32  // writers waiting for or holding wlock

	// readMu is held by the reader while it reads KV data into a
	// destination slice; killConn takes it to be sure no such write is in
	// progress or will start (dead).
	readMu sync.Mutex
	dead   bool

	closeOnce sync.Once
	closed    chan struct{}
	err       error // why it closed; set before closed is closed
}

func newConn(t *Transport, nc net.Conn, incarnation uint64, timeout time.Duration) *conn {
	return &conn{t: t, nc: nc, incarnation: incarnation, timeout: timeout, wlock: make(chan struct{}, 1), closed: make(chan struct{})}
}

// close closes the connection once, recording why.
func (c *conn) close(cause error) {
	c.closeOnce.Do(func() {
		c.err = cause
		close(c.closed)
		c.nc.Close()
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

// write writes one frame (bufs: header and payload, possibly in pieces).
// A heartbeat (try) gives up at once when another frame is being written
// and uses the shorter of WriteTimeout and PeerTimeout as its deadline.
// Any write error closes the connection: a partial frame cannot be
// taken back.
func (c *conn) write(ctx context.Context, h kvwire.Header, bufs net.Buffers, try bool) error {
	t := c.t
	if !try {
		if int(c.waiting.Add(1)) > t.cfg.SendQueueMax {
			c.waiting.Add(-1)
			t.inc(cSendQueueFull)
			return fmt.Errorf("%d senders waiting: %w", t.cfg.SendQueueMax, ErrSendQueueFull)
		}
		defer c.waiting.Add(-1)
		select {
		case c.wlock <- struct{}{}:
		case <-c.closed:
			return fmt.Errorf("connection closed: %w", c.err)
		case <-ctx.Done():
			return fmt.Errorf("wait to write: %w", context.Cause(ctx))
		}
	} else {
		select {
		case c.wlock <- struct{}{}:
		default:
			t.inc(cHeartbeatsSkipped)
			return ErrSendQueueFull
		}
	}
	defer func() { <-c.wlock }()
	if c.isClosed() {
		return fmt.Errorf("connection closed: %w", c.err)
	}
	size := 0
	for _, b := range bufs {
		size += len(b)
	}
	if t.cfg.Faults != nil {
		var done bool
		var err error
		if bufs, done, err = c.writeFault(h, bufs); done {
			return err
		}
	}
	timeout := t.cfg.WriteTimeout
	if try {
		timeout = min(timeout, c.timeout)
	}
	c.nc.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := bufs.WriteTo(c.nc); err != nil {
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

// writeFault consults the Faults hook. It returns the buffers to write,
// or done with the write's result when the fault replaced the write.
func (c *conn) writeFault(h kvwire.Header, bufs net.Buffers) (net.Buffers, bool, error) {
	t := c.t
	f := t.cfg.Faults.BeforeWrite(c.peerAddr(), h)
	if f.Action != FaultNone || f.Delay > 0 {
		t.inc(cFaultsInjected)
	}
	if !t.sleep(f.Delay, c.closed) {
		return nil, true, fmt.Errorf("write %v frame: connection closed during injected delay: %w", h.Type, ErrInjected)
	}
	switch f.Action {
	case FaultDrop:
		return nil, true, nil
	case FaultFail:
		return nil, true, fmt.Errorf("write %v frame: %w", h.Type, ErrInjected)
	case FaultCut:
		all := bytes.Join(bufs, nil)
		c.nc.SetWriteDeadline(time.Now().Add(t.cfg.WriteTimeout))
		c.nc.Write(all[:len(all)/2])
		err := fmt.Errorf("write %v frame: connection cut mid-frame: %w", h.Type, ErrInjected)
		c.close(err)
		return nil, true, err
	case FaultCorrupt:
		all := bytes.Join(bufs, nil)
		if len(all) > kvwire.HeaderBytes {
			all[kvwire.HeaderBytes+(len(all)-kvwire.HeaderBytes)/2] ^= 0x40
		}
		return net.Buffers{all}, false, nil
	}
	return bufs, false, nil
}

// readLoop reads frames until the connection fails, then closes it.
func (t *Transport) readLoop(c *conn) {
	err := t.readFrames(c)
	c.close(err)
}

// reader is the state of one connection's read loop.
type reader struct {
	t       *Transport
	c       *conn
	hdr     [kvwire.HeaderBytes]byte
	sub     [kvwire.KVSubHeaderBytes]byte
	payload []byte              // control payloads; grows to at most ControlPayloadBytesMax
	discard []byte              // scratch for discarded KV data
	check   [256]kvwire.Payload // scratch values for checking payloads, by type
}

func (t *Transport) readFrames(c *conn) error {
	r := &reader{t: t, c: c}
	for {
		c.nc.SetReadDeadline(time.Now().Add(c.timeout))
		h, err := kvwire.ReadHeader(c.nc, &r.hdr)
		if err != nil {
			return r.failed(err)
		}
		var f Fault
		if t.cfg.Faults != nil {
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
	size := uint64(kvwire.HeaderBytes) + uint64(h.Length)
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

// readControl reads, checks and delivers a non-KV frame.
func (r *reader) readControl(h kvwire.Header, f Fault) error {
	t, c := r.t, r.c
	n := int(h.Length)
	if cap(r.payload) < n {
		r.payload = make([]byte, n, max(n, min(2*cap(r.payload), kvwire.ControlPayloadBytesMax)))
	}
	payload := r.payload[:n]
	if _, err := io.ReadFull(c.nc, payload); err != nil {
		return err
	}
	if f.Action == FaultCorrupt && n > 0 {
		payload[0] ^= 0x40
	}
	if err := h.VerifyChecksum(payload); err != nil {
		return err
	}
	r.received(h)
	if h.Type.IsAuth() {
		err := fmt.Errorf("%v frame after the handshake", h.Type)
		t.reject(cRejectedUnexpected, c.peerAddr(), err)
		return err
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

// readKV reads a KV frame's sub-header, then its data straight into the
// destination the Handler gives (or discards it), checksumming as it
// goes, and reports the result.
func (r *reader) readKV(h kvwire.Header, f Fault) error {
	t, c := r.t, r.c
	if _, err := io.ReadFull(c.nc, r.sub[:]); err != nil {
		return err
	}
	var kv kvwire.KV
	if err := kv.Decode(r.sub[:]); err != nil {
		return err
	}
	n := int(h.Length) - kvwire.KVSubHeaderBytes
	crc := kvwire.Checksum(r.sub[:])
	if f.Action == FaultDrop {
		_, err := r.skip(n, crc)
		if err == nil {
			r.received(h)
		}
		return err
	}
	if c.isClosed() {
		return c.err
	}
	// From here every path calls KVDone exactly once.
	dest := t.h.KVDest(c.p.addr, h.Room, kv, n)
	if dest != nil && len(dest) < n {
		t.inc(cKVDestShort)
		dest = nil
	}
	var err error
	if dest != nil {
		crc, err = r.readInto(dest[:n], crc, f.Action == FaultCorrupt)
	} else {
		crc, err = r.skip(n, crc)
		t.inc(cKVDiscardedFrames)
		t.add(cKVDiscardedBytes, uint64(n))
	}
	ok := err == nil && crc == h.Checksum
	if err == nil {
		r.received(h)
		if !ok {
			t.inc(cKVChecksumErrors)
		}
	}
	t.h.KVDone(c.p.addr, h.Room, kv, n, ok)
	return err
}

// errSilent closes a connection on which nothing arrived for its timeout;
// runPeer counts it (read_timeouts) when it declares the peer lost.
var errSilent = fmt.Errorf("peer silent: %w", ErrPeerLost)

// errConnDead stops a KV read after killConn.
var errConnDead = errors.New("connection closed while reading KV data")

// readInto reads len(dst) bytes in chunks under readMu, refreshing the
// deadline and the last-heard time per chunk.
func (r *reader) readInto(dst []byte, crc uint32, corrupt bool) (uint32, error) {
	t, c := r.t, r.c
	for len(dst) > 0 {
		chunk := dst[:min(len(dst), kvReadChunkBytes)]
		c.readMu.Lock()
		if c.dead {
			c.readMu.Unlock()
			return crc, errConnDead
		}
		c.nc.SetReadDeadline(time.Now().Add(c.timeout))
		_, err := io.ReadFull(c.nc, chunk)
		c.readMu.Unlock()
		if err != nil {
			return crc, err
		}
		if corrupt {
			chunk[0] ^= 0x40
			corrupt = false
		}
		crc = kvwire.UpdateChecksum(crc, chunk)
		dst = dst[len(chunk):]
		c.p.lastHeard.Store(int64(t.now()))
	}
	return crc, nil
}

// skip reads and checksums n bytes into a scratch buffer.
func (r *reader) skip(n int, crc uint32) (uint32, error) {
	t, c := r.t, r.c
	if n > 0 && r.discard == nil {
		r.discard = make([]byte, discardBufBytes)
	}
	for n > 0 {
		chunk := r.discard[:min(n, len(r.discard))]
		c.nc.SetReadDeadline(time.Now().Add(c.timeout))
		if _, err := io.ReadFull(c.nc, chunk); err != nil {
			return crc, err
		}
		crc = kvwire.UpdateChecksum(crc, chunk)
		n -= len(chunk)
		c.p.lastHeard.Store(int64(t.now()))
	}
	return crc, nil
}
