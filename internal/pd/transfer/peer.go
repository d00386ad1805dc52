package transfer

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"tandem/internal/pd/kvwire"
)

// errReplaced closes a connection superseded by a newer one from the
// same peer.
var errReplaced = errors.New("replaced by a newer connection from the same peer")

// peer is one remote worker. Its goroutine (runPeer) owns the connection
// life cycle: dialing and redialing (when this node dials it), installing
// accepted connections, heartbeats, and the peer timeout. Other
// goroutines talk to it through the mailbox fields under mu and a poke.
type peer struct {
	addr   string
	dialer bool          // this node dials the peer; set at creation
	wake   chan struct{} // capacity 1: "look at the mailbox"

	mu       sync.Mutex
	conn     *conn         // installed connection, nil when none; may be closed until runPeer notices
	pending  *conn         // an authenticated accepted connection for runPeer to install
	wantDial bool          // a sender waits for a connection
	gone     bool          // removed from the transport; err says why
	err      error         // why the last dial failed, or why the peer is gone
	changed  chan struct{} // closed and replaced when conn, err or gone change
	incarn   uint64        // incarnation of the installed connection's peer process
	lastHB   kvwire.Heartbeat

	lastHeard atomic.Int64 // Transport.now() of the last frame, data chunk or handshake
	timeout   atomic.Int64 // the installed connection's timeout (written by runPeer only)

	framesIn, framesOut, bytesIn, bytesOut atomic.Uint64

	// Owned by runPeer, no lock.
	up       bool          // PeerUp was called: a loss will call PeerLost
	nextDial time.Duration // no redial before this Transport.now()
}

func newPeer(addr string, dialer bool) *peer {
	p := &peer{addr: addr, dialer: dialer, wake: make(chan struct{}, 1), changed: make(chan struct{})}
	return p
}

// poke wakes runPeer without blocking.
func (p *peer) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// broadcast wakes every sender waiting for a change. Call with mu held.
func (p *peer) broadcast() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// runPeer is the peer's goroutine. It exits when the transport closes,
// when the peer is lost, or when a first dial fails.
func (t *Transport) runPeer(p *peer) {
	heartbeat := time.NewTicker(t.cfg.HeartbeatInterval)
	defer heartbeat.Stop()
	timer := time.NewTimer(t.cfg.DialTimeout)
	defer timer.Stop()
	for {
		if t.life.Err() != nil {
			t.shutdownPeer(p)
			return
		}
		next, ok := t.stepPeer(p)
		if !ok {
			return
		}
		timer.Reset(next)
		p.mu.Lock()
		var connClosed <-chan struct{}
		if p.conn != nil {
			connClosed = p.conn.closed
		}
		p.mu.Unlock()
		select {
		case <-t.life.Done():
		case <-p.wake:
		case <-connClosed:
		case <-timer.C:
		case <-heartbeat.C:
			t.sendHeartbeat(p)
		}
	}
}

// stepPeer brings p's state up to date: notices a closed connection,
// installs a pending one, dials when needed, and declares the peer lost
// when nothing was heard for PeerTimeout. It returns how long until it
// must run again, and false when the peer is gone.
func (t *Transport) stepPeer(p *peer) (time.Duration, bool) {
	p.mu.Lock()
	if c := p.conn; c != nil && c.isClosed() {
		p.conn = nil
		p.err = c.cause()
		p.broadcast()
		t.log.Info("transfer: connection closed", "peer", p.addr, "err", p.err)
	}
	pending := p.pending
	p.pending = nil
	wantDial := p.wantDial && p.conn == nil
	p.mu.Unlock()
	if pending != nil {
		t.install(p, pending)
	}

	timeout := time.Duration(p.timeout.Load())
	now := t.now()
	deadline := time.Duration(p.lastHeard.Load()) + timeout
	if p.dialer && p.connNil() && (wantDial || p.up) && now >= p.nextDial && (!p.up || now < deadline) {
		dialTimeout := t.cfg.DialTimeout
		if p.up {
			dialTimeout = min(dialTimeout, deadline-now)
		}
		c, err := t.dialPeer(p, dialTimeout)
		switch {
		case err == nil:
			t.install(p, c)
		case !p.up:
			// A first dial: the senders get the error; no PeerLost, the
			// peer never came up.
			if t.removePeer(p, err) {
				return 0, false
			}
		case errors.Is(err, ErrAuth) || errors.Is(err, ErrIncompatible) || errors.Is(err, ErrIdentity):
			// The peer is back but refuses us: no point in waiting.
			return 0, !t.losePeer(p, err)
		default:
			p.mu.Lock()
			p.err = err
			p.broadcast()
			p.mu.Unlock()
			p.nextDial = t.now() + max(t.cfg.HeartbeatInterval/4, time.Millisecond)
		}
	}

	now = t.now()
	timeout = time.Duration(p.timeout.Load())
	deadline = time.Duration(p.lastHeard.Load()) + timeout
	if p.up && now >= deadline {
		cause := fmt.Errorf("peer %s: nothing heard for %v: %w", p.addr, now-time.Duration(p.lastHeard.Load()), ErrPeerLost)
		p.mu.Lock()
		lastErr := p.err
		p.mu.Unlock()
		if !p.connNil() || errors.Is(lastErr, errSilent) {
			t.inc(cReadTimeouts)
		} else if lastErr != nil {
			cause = fmt.Errorf("peer %s: connection lost and not re-established within %v (%v): %w", p.addr, timeout, lastErr, ErrPeerLost)
		}
		return 0, !t.losePeer(p, cause)
	}
	next := t.cfg.DialTimeout
	if p.up {
		next = deadline - now
	}
	if p.dialer && p.up && p.connNil() && p.nextDial > now {
		next = min(next, p.nextDial-now)
	}
	return max(next, time.Millisecond/10), true
}

func (p *peer) connNil() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conn == nil
}

// install makes c the peer's connection: it closes the previous one,
// reports a restarted peer as lost first, starts c's reader, and calls
// PeerUp.
func (t *Transport) install(p *peer, c *conn) {
	p.mu.Lock()
	if t.life.Err() != nil {
		p.mu.Unlock()
		c.close(ErrClosed)
		return
	}
	old := p.conn
	restarted := p.up && c.incarnation != p.incarn
	p.mu.Unlock()
	if old != nil {
		t.killConn(old, errReplaced)
	}
	if restarted {
		t.inc(cPeerRestarts)
		t.inc(cPeersLost)
		err := fmt.Errorf("peer %s: came back as a new process (incarnation %#x, was %#x): %w", p.addr, c.incarnation, p.incarn, ErrPeerRestarted)
		t.log.Warn("transfer: peer restarted", "peer", p.addr, "err", err)
		t.h.PeerLost(p.addr, err)
	}
	p.mu.Lock()
	if t.life.Err() != nil {
		p.mu.Unlock()
		c.close(ErrClosed)
		return
	}
	c.p = p
	p.conn = c
	p.incarn = c.incarnation
	p.wantDial = false
	p.err = nil
	p.broadcast()
	p.mu.Unlock()
	p.up = true
	p.timeout.Store(int64(c.timeout))
	p.lastHeard.Store(int64(t.now()))
	t.log.Info("transfer: peer connected", "peer", p.addr, "dialed", p.dialer, "incarnation", c.incarnation)
	t.h.PeerUp(p.addr, kvwire.Heartbeat{})
	c.startReader()
	t.wg.Go(func() { t.readLoop(c) })
}

// losePeer closes p's connection, forgets p and calls PeerLost. It
// returns false, doing nothing, when a new connection arrived meanwhile.
func (t *Transport) losePeer(p *peer, cause error) bool {
	p.mu.Lock()
	c := p.conn
	p.mu.Unlock()
	if c != nil {
		t.killConn(c, cause)
	}
	if !t.removePeer(p, cause) {
		return false
	}
	t.inc(cPeersLost)
	t.log.Warn("transfer: peer lost", "peer", p.addr, "err", cause)
	t.h.PeerLost(p.addr, cause)
	return true
}

// shutdownPeer closes p's connections when the transport closes.
func (t *Transport) shutdownPeer(p *peer) {
	p.mu.Lock()
	c, pending := p.conn, p.pending
	p.pending = nil
	p.mu.Unlock()
	if c != nil {
		t.killConn(c, ErrClosed)
	}
	if pending != nil {
		pending.close(ErrClosed)
	}
	t.removePeer(p, ErrClosed)
}

// killConn closes c and waits until its reader can no longer write KV
// data into a destination slice. It does not wait for Handler callbacks
// in progress (they might be waiting on this peer).
func (t *Transport) killConn(c *conn, cause error) {
	c.close(cause)
	c.readMu.Lock()
	c.dead = true
	c.readMu.Unlock()
}

// sendHeartbeat writes a heartbeat on p's connection, unless another
// frame is being written (then bytes are flowing anyway).
func (t *Transport) sendHeartbeat(p *peer) {
	p.mu.Lock()
	c := p.conn
	p.mu.Unlock()
	if c == nil || c.isClosed() {
		return
	}
	c.hbSeq++
	hb := t.cfg.Load()
	hb.Seq = c.hbSeq
	payload := hb.AppendTo(make([]byte, 0, kvwire.TypeHeartbeat.PayloadBytesMax()))
	h := kvwire.Header{Version: kvwire.Version, Type: kvwire.TypeHeartbeat, Length: uint32(len(payload))}
	if err := c.write(t.life, h, payload, nil, true); err == nil {
		t.inc(cHeartbeatsOut)
	}
}
