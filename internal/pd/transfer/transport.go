package transfer

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/room"
)

// Handler receives what arrives from peers. The worker edge implements it.
//
// Methods are called from the transport's goroutines: Frame, KVDest,
// KVDone and PeerUp (for heartbeats) from the reader goroutine of the
// peer's connection, in the order the frames arrived; PeerUp (after a
// handshake) and PeerLost from the peer's own goroutine. Calls for
// different peers run concurrently, so a Handler must be safe for
// concurrent use. Methods must return quickly and must not call Send,
// SendKV or Close synchronously: a reader blocked in a callback stops
// every frame from that peer, heartbeats included, and Close waits for
// the callbacks to return. Hand work to the worker's own goroutines.
type Handler interface {
	// Frame delivers a room control frame (HELLO, HELLO_ACK, ALLOC,
	// FIRST_TOKEN, DONE, DONE_ACK, ABORT, FAILED). The payload has been
	// checked (checksum, and it decodes as h.Type); it is only valid
	// during the call.
	Frame(peer string, h kvwire.Header, payload []byte)
	// KVDest returns where to put the n data bytes of a KV frame: a slice
	// of at least n bytes (the first n are written), or nil to discard
	// them (counted). A shorter slice is treated as nil and counted as
	// kv_dest_short.
	KVDest(peer string, room room.ID, kv kvwire.KV, n int) []byte
	// KVDone follows every KVDest call that returned a buffer exactly
	// once, on the same goroutine, when the transport is done with the
	// slice: the data was opened into it, or reading stopped because the
	// connection failed or closed. A frame KVDest gave no buffer (nil, or
	// a short one) is discarded and gets no KVDone. checksumOK is true only when all n
	// bytes arrived and every sealed record of them opened (authentic,
	// unchanged, in order); a page whose KVDone says false holds garbage.
	// A record that fails to open also closes the connection.
	KVDone(peer string, room room.ID, kv kvwire.KV, n int, checksumOK bool)
	// PeerUp reports a completed handshake (with a zero Heartbeat) and
	// then every heartbeat received: the peer's load as it last said.
	PeerUp(peer string, hb kvwire.Heartbeat)
	// PeerLost reports that the peer is gone: nothing was heard from it
	// for PeerTimeout, its connection dropped and was not re-established
	// within PeerTimeout, a reconnect found a new incarnation of it
	// (ErrPeerRestarted, followed by PeerUp for the new one), or a redial
	// was refused. Every non-terminal room with the peer should fail
	// (room.ReasonPeerLost). Once PeerLost has been called, no KV data
	// from the lost connection is written into a KVDest slice any more,
	// so the pages of the failed rooms may be reused. It is not called
	// for peers that never completed a handshake, nor by Close.
	PeerLost(peer string, err error)
}

// PeerStatus is one peer as Peers reports it.
type PeerStatus struct {
	Addr          string           // the peer's transfer address (its identity)
	Dialed        bool             // this node dials the peer (decode side)
	Connected     bool             // a connection is up now
	Incarnation   uint64           // the peer process's random incarnation, 0 before the first handshake
	Timeout       time.Duration    // silence (or disconnection) after which the peer is lost
	LastHeard     time.Time        // when the last frame (or KV data chunk) or handshake arrived
	LastHeartbeat kvwire.Heartbeat // the peer's last reported load
	FramesIn      uint64
	FramesOut     uint64
	BytesIn       uint64
	BytesOut      uint64
	// KVOut and KVIn are how KV data travels on the current connection
	// in each direction: "shm" (shared memory) or "tcp".
	KVOut, KVIn string
}

// Transport carries frames between this worker and its peers: one
// authenticated TCP connection per peer, carrying every room between the
// two, with heartbeats both ways.
//
// All methods are safe for concurrent use. New starts nothing but the
// listener; Serve accepts connections; Send and SendKV dial when needed.
// Each connection has a reader goroutine, each peer a goroutine that
// dials, sends heartbeats and watches the peer timeout; all are owned by
// the Transport and end within a bounded time after Close (or the end of
// Serve's context), which waits for them.
type Transport struct {
	cfg         Config
	h           Handler
	log         *slog.Logger
	ln          net.Listener // nil when DialOnly
	addr        string       // the listener's address; "" when DialOnly
	self        string       // AdvertiseAddr: this node's identity
	incarnation uint64
	peerTimeout time.Duration
	epoch       time.Time

	// life is the transport's lifetime, cancelled by Close. It scopes the
	// goroutines the Transport owns (dials, waits), not a request.
	life context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu          sync.Mutex
	closed      bool
	serving     bool
	peers       map[string]*peer
	handshaking map[net.Conn]struct{} // every connection in its handshake, dialed or accepted
	preauth     []*preauthConn        // accepted, not yet authenticated, oldest first (≤ handshakesMax)

	closeOnce sync.Once
	closeDone chan struct{}

	counters atomicCounters
	logLimit logLimiter
}

// New checks cfg, listens, and returns a Transport that delivers to h.
// Call Serve to accept connections and Close to release everything.
func New(cfg Config, h Handler) (*Transport, error) {
	if h == nil {
		return nil, errors.New("new transport: nil Handler")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("new transport: %w", err)
	}
	ln := cfg.Listener
	if ln == nil && !cfg.DialOnly {
		lc := net.ListenConfig{KeepAlive: -1}
		if ln, err = lc.Listen(context.Background(), "tcp", cfg.ListenAddr); err != nil {
			return nil, fmt.Errorf("new transport: listen on %s: %w", cfg.ListenAddr, err)
		}
	}
	var inc [8]byte
	rand.Read(inc[:])
	t := &Transport{
		cfg:         cfg,
		h:           h,
		log:         cfg.Logger,
		ln:          ln,
		incarnation: binary.LittleEndian.Uint64(inc[:]) | 1, // never 0
		peerTimeout: 2 * cfg.HeartbeatInterval,
		epoch:       time.Now(),
		peers:       make(map[string]*peer),
		handshaking: make(map[net.Conn]struct{}),
		closeDone:   make(chan struct{}),
	}
	if ln != nil {
		t.addr = ln.Addr().String()
	}
	t.self = cmp.Or(cfg.AdvertiseAddr, t.addr)
	if t.self == "" { // DialOnly without AdvertiseAddr
		t.self = fmt.Sprintf("dial-only.%016x:0", t.incarnation)
	}
	if host, _, err := net.SplitHostPort(t.self); ln != nil && cfg.AdvertiseAddr == "" && err == nil {
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			ln.Close()
			return nil, fmt.Errorf("new transport: listening on all interfaces (%s): set AdvertiseAddr to the address peers dial", t.self)
		}
	}
	t.life, t.stop = context.WithCancel(context.Background())
	return t, nil
}

// Addr returns the address the transport listens on, or "" when it is
// DialOnly.
func (t *Transport) Addr() string { return t.addr }

// AdvertiseAddr returns this node's identity: Config.AdvertiseAddr, or
// Addr when that was empty, or for DialOnly the random name generated.
func (t *Transport) AdvertiseAddr() string { return t.self }

// PeerTimeout returns how long a peer may stay silent (or disconnected)
// before it is lost: twice the heartbeat interval, or twice the peer's
// interval when it announced a longer one (PeerStatus.Timeout).
func (t *Transport) PeerTimeout() time.Duration { return t.peerTimeout }

// now returns the transport's monotonic clock reading.
func (t *Transport) now() time.Duration { return time.Since(t.epoch) }

// Serve accepts connections until ctx is done or Close is called, then
// closes the transport (as Close does) and returns after every goroutine
// the transport started has exited. It returns nil after ctx or Close,
// and an error when the listener fails for another reason. A DialOnly
// transport accepts nothing: Serve only waits. Serve may be called once.
func (t *Transport) Serve(ctx context.Context) error {
	t.mu.Lock()
	if t.serving || t.closed {
		t.mu.Unlock()
		return errors.New("serve transfer: already serving or closed")
	}
	t.serving = true
	t.mu.Unlock()

	var watch sync.WaitGroup
	watch.Go(func() {
		select {
		case <-ctx.Done():
			t.Close()
		case <-t.life.Done():
		}
	})
	var err error
	if t.ln != nil {
		err = t.acceptLoop()
	} else {
		<-t.life.Done()
	}
	t.Close()
	watch.Wait()
	return err
}

// acceptLoop accepts until the listener is closed.
func (t *Transport) acceptLoop() error {
	backoff := 5 * time.Millisecond
	for {
		nc, err := t.ln.Accept()
		if err != nil {
			if t.life.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("serve transfer: accept on %s: %w", t.addr, err)
			}
			t.log.Warn("transfer: accept failed, retrying", "addr", t.addr, "err", err, "backoff", backoff)
			if !t.sleep(backoff, nil) {
				return nil
			}
			backoff = min(2*backoff, acceptBackoffMax)
			continue
		}
		backoff = 5 * time.Millisecond
		t.inc(cConnsAccepted)
		pc := t.admit(nc)
		if pc == nil {
			nc.Close()
			continue
		}
		go func() { // counted in t.wg by admit
			defer t.wg.Done()
			t.handleAccepted(pc)
		}()
	}
}

// sleep waits d, or until the transport closes or stop (if not nil) is
// closed; it reports whether the full time passed.
func (t *Transport) sleep(d time.Duration, stop <-chan struct{}) bool {
	if d <= 0 {
		return true
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-t.life.Done():
	case <-stop:
	}
	return false
}

// track registers a dialed connection in its handshake so Close can
// close it; it refuses when the transport is closed. The connection
// belongs to a peer goroutine already counted in t.wg.
func (t *Transport) track(nc net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.handshaking[nc] = struct{}{}
	return true
}

// untrack forgets a connection whose handshake ended.
func (t *Transport) untrack(nc net.Conn) {
	t.mu.Lock()
	delete(t.handshaking, nc)
	t.dropPreauthLocked(nc)
	t.mu.Unlock()
}

// preauthConn is an accepted connection that has not authenticated yet.
type preauthConn struct {
	nc      net.Conn
	host    string      // source IP (the remote address without its port)
	evicted atomic.Bool // closed to make room for a newer connection
}

// remoteHost is the source IP of nc, or its whole remote address when it
// has no port.
func remoteHost(nc net.Conn) string {
	a := nc.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(a); err == nil {
		return host
	}
	return a
}

// admit registers an accepted connection as pre-auth, so Close can close
// it, and counts its goroutine in t.wg (under the lock Close takes before
// waiting, so the count never rises from zero while Close waits; the
// goroutine calls t.wg.Done). It never refuses a new connection for lack
// of room: when the source host already holds handshakesPerHostMax
// pre-auth connections its oldest is evicted, else when handshakesMax are
// held the oldest of the host holding the most is. A stranger's
// connections thus only push out each other (or, once every slot is
// taken, the oldest of the biggest holder), and a real peer that dials
// during a flood keeps its slot for the round trip it needs as long as
// fewer than handshakesPerHostMax newer connections from its host arrive
// meanwhile. It returns nil when the transport is closed.
func (t *Transport) admit(nc net.Conn) *preauthConn {
	pc := &preauthConn{nc: nc, host: remoteHost(nc)}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	counts := make(map[string]int, len(t.preauth))
	busiest := 0
	for _, o := range t.preauth {
		counts[o.host]++
		busiest = max(busiest, counts[o.host])
	}
	var victim *preauthConn
	for _, o := range t.preauth { // oldest first
		if (counts[pc.host] >= handshakesPerHostMax && o.host == pc.host) ||
			(counts[pc.host] < handshakesPerHostMax && len(t.preauth) >= handshakesMax && counts[o.host] == busiest) {
			victim = o
			break
		}
	}
	if victim != nil {
		victim.evicted.Store(true)
		t.dropPreauthLocked(victim.nc)
	}
	t.preauth = append(t.preauth, pc)
	t.handshaking[nc] = struct{}{}
	t.wg.Add(1)
	t.mu.Unlock()
	if victim != nil {
		t.inc(cHandshakesEvicted)
		victim.nc.Close()
		if n, ok := t.logLimit.allow(time.Now()); ok {
			t.log.Warn("transfer: too many connections in their handshake, closed the oldest", "evicted", victim.nc.RemoteAddr().String(), "new", nc.RemoteAddr().String(), "suppressed", n)
		}
	}
	return pc
}

// dropPreauthLocked removes nc from the pre-auth list (if there). Call
// with t.mu held.
func (t *Transport) dropPreauthLocked(nc net.Conn) {
	for i, o := range t.preauth {
		if o.nc == nc {
			t.preauth = slices.Delete(t.preauth, i, i+1)
			return
		}
	}
}

// authenticated moves an accepted connection out of the pre-auth list:
// its dialer proved the token, so it can no longer be evicted.
func (t *Transport) authenticated(nc net.Conn) {
	t.mu.Lock()
	t.dropPreauthLocked(nc)
	t.mu.Unlock()
}

// handleAccepted runs the listener side of the handshake, within
// HandshakeTimeout from accept, and hands the connection to its peer.
func (t *Transport) handleAccepted(pc *preauthConn) {
	nc := pc.nc
	defer t.untrack(nc)
	nc.SetDeadline(time.Now().Add(t.cfg.HandshakeTimeout))
	hello, keys, err := t.handshakeAccept(nc, func() { t.authenticated(nc) })
	if err != nil {
		switch {
		case pc.evicted.Load() || t.life.Err() != nil:
			// counted as evicted, or the transport is closing
		case errors.Is(err, os.ErrDeadlineExceeded):
			t.inc(cHandshakeTimeouts)
		case !countedHandshakeError(err):
			t.inc(cHandshakesFailed)
		}
		t.log.Debug("transfer: handshake failed", "remote", nc.RemoteAddr().String(), "err", err)
		nc.Close()
		return
	}
	nc.SetDeadline(time.Time{})
	c := newConn(t, nc, hello.Incarnation, t.timeoutWith(hello.HeartbeatMillis), keys)
	if err := t.offerShm(c); err != nil {
		t.log.Debug("transfer: shared-memory offer failed", "remote", nc.RemoteAddr().String(), "err", err)
		c.close(err)
		return
	}
	t.adopt(hello.NodeAddr, c)
}

// Close stops accepting, closes every connection, and returns after every
// goroutine the transport started has exited (bounded: connections are
// closed, so only Handler callbacks in progress can delay it). No Handler
// method is called after Close returns. Close must not be called from a
// Handler method. It always returns nil; calling it again waits for the
// first call.
func (t *Transport) Close() error {
	t.closeOnce.Do(func() {
		t.mu.Lock()
		t.closed = true
		t.stop()
		for nc := range t.handshaking {
			nc.Close()
		}
		peers := make([]*peer, 0, len(t.peers))
		for _, p := range t.peers {
			peers = append(peers, p)
		}
		t.mu.Unlock()
		for _, p := range peers {
			p.mu.Lock()
			if p.conn != nil {
				p.conn.close(ErrClosed)
			}
			if p.pending != nil {
				p.pending.close(ErrClosed)
			}
			p.mu.Unlock()
		}
		if t.ln != nil {
			t.ln.Close()
		}
		t.wg.Wait()
		close(t.closeDone)
	})
	<-t.closeDone
	return nil
}

// Peers returns the tracked peers, sorted by address.
func (t *Transport) Peers() []PeerStatus {
	t.mu.Lock()
	peers := make([]*peer, 0, len(t.peers))
	for _, p := range t.peers {
		peers = append(peers, p)
	}
	t.mu.Unlock()
	out := make([]PeerStatus, 0, len(peers))
	for _, p := range peers {
		p.mu.Lock()
		st := PeerStatus{
			Addr:          p.addr,
			Dialed:        p.dialer,
			Connected:     p.conn != nil && !p.conn.isClosed(),
			Incarnation:   p.incarn,
			Timeout:       time.Duration(p.timeout.Load()),
			LastHeartbeat: p.lastHB,
			KVOut:         "tcp",
			KVIn:          "tcp",
		}
		if c := p.conn; c != nil && !c.isClosed() {
			if c.sending.Load() {
				st.KVOut = "shm"
			}
			if c.srcSending.Load() {
				st.KVOut = "shm-src"
			}
			if c.receiving.Load() {
				st.KVIn = "shm"
			}
			if c.srcReceiving.Load() {
				st.KVIn = "shm-src"
			}
		}
		p.mu.Unlock()
		st.LastHeard = t.epoch.Add(time.Duration(p.lastHeard.Load()))
		st.FramesIn, st.FramesOut = p.framesIn.Load(), p.framesOut.Load()
		st.BytesIn, st.BytesOut = p.bytesIn.Load(), p.bytesOut.Load()
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b PeerStatus) int { return cmp.Compare(a.Addr, b.Addr) })
	return out
}

// Send sends a room control frame (HELLO, HELLO_ACK, ALLOC, FIRST_TOKEN,
// DONE, DONE_ACK, ABORT, FAILED) with an encoded payload to peer, dialing
// and authenticating first when there is no connection (unless
// AcceptOnly). It returns when the frame was written, or with the error
// that stopped it: the payload does not decode as typ, the dial or
// handshake failed (ErrAuth, ErrIncompatible naming the difference, ...),
// the peer was lost, the send queue is full, or ctx ended while waiting
// for the connection or its write lock. Errors about the frame itself
// (it does not pass the codec) wrap ErrFrame and leave the connection up. ctx does not cut a write in
// progress (WriteTimeout bounds it), since half a frame would break the
// connection for every room on it.
//
// Frames sent one after another (each Send returning before the next) to
// one peer arrive in that order; concurrent Sends are ordered arbitrarily.
func (t *Transport) Send(ctx context.Context, peer string, typ kvwire.Type, id room.ID, payload []byte) error {
	if !typ.HasRoom() || typ == kvwire.TypeKV || typ == kvwire.TypeKVShm || typ == kvwire.TypeKVSrc {
		return fmt.Errorf("send %v to %s: not a room control frame (use SendKV for KV): %w: %w", typ, peer, ErrFrame, kvwire.ErrType)
	}
	h := kvwire.NewHeader(typ, id, payload)
	if err := h.Check(); err != nil {
		return fmt.Errorf("send %v to %s: %w: %w", typ, peer, ErrFrame, err)
	}
	if _, err := kvwire.DecodePayload(typ, payload); err != nil {
		return fmt.Errorf("send %v to %s: %w: %w", typ, peer, ErrFrame, err)
	}
	c, err := t.connFor(ctx, peer)
	if err != nil {
		return fmt.Errorf("send %v to %s: %w", typ, peer, err)
	}
	if err := c.write(ctx, h, payload, nil, false); err != nil {
		return fmt.Errorf("send %v to %s: %w", typ, peer, err)
	}
	return nil
}

// SendKV sends one KV frame to peer: the header and kv's sub-header, then
// data, sealed record by record from data into the connection's send
// buffer (data itself is only read, never copied whole or changed).
// data must stay unchanged until SendKV returns, which it does only after
// the write finished or failed. Dialing, errors and ordering are as for
// Send; a KV frame sent before a FIRST_TOKEN or DONE for the same room
// (sequentially) arrives before it. Errors about the frame itself wrap
// ErrFrame.
func (t *Transport) SendKV(ctx context.Context, peer string, id room.ID, kv kvwire.KV, data []byte) error {
	return t.SendKVHeld(ctx, peer, id, kv, data, nil)
}

// SendKVHeld is SendKV for data the caller keeps unchanged until release
// is called, which happens exactly once: before SendKVHeld returns,
// unless data lies in Config.ShmSource and the peer maps that region; the
// frame then goes as KV_SRC (the peer copies data out of this memory)
// and release comes later, from another goroutine, once the peer has
// copied it or its connection ended (the peer was first told not to
// trust a copy it had not finished). release must not block. A nil
// release is SendKV.
func (t *Transport) SendKVHeld(ctx context.Context, peer string, id room.ID, kv kvwire.KV, data []byte, release func()) error {
	held := false
	if release != nil {
		defer func() {
			if !held {
				release()
			}
		}()
	}
	if len(data) > kvwire.KVDataBytesMax {
		return fmt.Errorf("send KV to %s: %d data bytes above the limit %d: %w: %w", peer, len(data), kvwire.KVDataBytesMax, ErrFrame, kvwire.ErrTooLarge)
	}
	if kv.Kind > kvwire.KindState || (kv.Kind == kvwire.KindState && kv.Layer != 0) {
		return fmt.Errorf("send KV to %s: kind %d of layer %d is neither K, V nor the state (layer 0): %w: %w", peer, kv.Kind, kv.Layer, ErrFrame, kvwire.ErrMalformed)
	}
	var sub [kvwire.KVSubHeaderBytes]byte
	kv.AppendTo(sub[:0])
	h := kvwire.Header{
		Version: kvwire.Version,
		Type:    kvwire.TypeKV,
		Room:    id,
		Length:  uint32(kvwire.KVSubHeaderBytes + len(data)),
	}
	if err := h.Check(); err != nil {
		return fmt.Errorf("send KV to %s: %w: %w", peer, ErrFrame, err)
	}
	c, err := t.connFor(ctx, peer)
	if err != nil {
		return fmt.Errorf("send KV to %s: %w", peer, err)
	}
	held, err = c.writeKV(ctx, h, sub[:], kv, data, release)
	if err != nil {
		return fmt.Errorf("send KV to %s: %w", peer, err)
	}
	return nil
}

// connFor returns the live connection to addr, creating the peer (and
// asking its goroutine to dial) when needed, and waiting while it
// connects or reconnects.
func (t *Transport) connFor(ctx context.Context, addr string) (*conn, error) {
	for {
		p, err := t.peerFor(addr)
		if err != nil {
			return nil, err
		}
		p.mu.Lock()
		if c := p.conn; c != nil && !c.isClosed() {
			p.mu.Unlock()
			return c, nil
		}
		if p.gone {
			err := p.err
			p.mu.Unlock()
			return nil, err
		}
		p.wantDial = true
		changed := p.changed
		p.mu.Unlock()
		p.poke()
		select {
		case <-changed:
			p.mu.Lock()
			gone, err := p.gone, p.err
			p.mu.Unlock()
			if gone {
				return nil, err
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for connection: %w", context.Cause(ctx))
		case <-t.life.Done():
			return nil, ErrClosed
		}
	}
}

// peerFor returns the peer for addr, creating it (as a peer this node
// dials) unless AcceptOnly.
func (t *Transport) peerFor(addr string) (*peer, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, ErrClosed
	}
	if p := t.peers[addr]; p != nil {
		return p, nil
	}
	switch {
	case t.cfg.AcceptOnly:
		return nil, ErrNotConnected
	case addr == t.self:
		return nil, fmt.Errorf("peer %s is this node: %w", addr, ErrIdentity)
	case addr == "" || len(addr) > kvwire.NodeAddrBytesMax:
		return nil, fmt.Errorf("peer address %q is empty or longer than %d bytes: %w", addr, kvwire.NodeAddrBytesMax, ErrIdentity)
	case len(t.peers) >= peersMax:
		return nil, fmt.Errorf("%d peers tracked: %w", len(t.peers), ErrTooManyPeers)
	}
	p := newPeer(addr, true)
	t.peers[addr] = p
	t.wg.Go(func() { t.runPeer(p) })
	return p, nil
}

// adopt hands an authenticated accepted connection to the peer it belongs
// to, creating the peer when new.
func (t *Transport) adopt(addr string, c *conn) {
	t.mu.Lock()
	p := t.peers[addr]
	if t.closed || (p == nil && len(t.peers) >= peersMax) {
		t.mu.Unlock()
		c.close(ErrClosed)
		return
	}
	if p == nil {
		p = newPeer(addr, false)
		t.peers[addr] = p
		t.wg.Go(func() { t.runPeer(p) })
	}
	p.mu.Lock()
	if p.pending != nil {
		p.pending.close(errReplaced)
	}
	c.p = p
	p.pending = c
	p.mu.Unlock()
	t.mu.Unlock()
	p.poke()
}

// removePeer forgets p, recording err for its waiting senders. It
// refuses (returns false) when a new connection is waiting to be
// installed, so that connection is not lost.
func (t *Transport) removePeer(p *peer, err error) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pending != nil && t.life.Err() == nil {
		return false
	}
	if t.peers[p.addr] == p {
		delete(t.peers, p.addr)
	}
	p.gone, p.err = true, err
	p.broadcast()
	return true
}

// countedHandshakeError reports whether a failed handshake was already
// counted by the check that refused it (a rejected_* counter).
func countedHandshakeError(err error) bool {
	for _, s := range []error{kvwire.ErrMagic, kvwire.ErrVersion, kvwire.ErrType, kvwire.ErrTooLarge, kvwire.ErrMalformed, kvwire.ErrChecksum,
		ErrProtocol, ErrAuth, ErrIncompatible, ErrIdentity, ErrTooManyPeers} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}
