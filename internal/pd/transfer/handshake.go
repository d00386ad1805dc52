package transfer

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"time"

	"tandem/internal/pd/kvwire"
)

// The handshake (every connection starts with it; nothing else is
// accepted before it ends):
//
//	dialer → AUTH_HELLO{version, own address, shape, nonce D, incarnation}
//	listener → AUTH_CHALLENGE{nonce L, own address}   (or AUTH_REJECT: version, identity)
//	dialer → AUTH_RESPONSE{AuthMAC(token, dialer, L, D, addrs)}
//	listener → AUTH_OK{shape, AuthMAC(token, listener, L, D, addrs), incarnation}
//	           (or AUTH_REJECT: bad MAC, shape differs, busy)
//
// The dialer checks that the listener's address is the one it dialed
// (both MACs cover both addresses), the listener's MAC and its shape. The
// listener checks the version, the dialer's address, its MAC, then its
// shape: authentication comes before compatibility, so a stranger learns
// nothing about the node. The dialer runs under DialTimeout, the listener
// under HandshakeTimeout from accept.

// handshakeDial runs the dialer's side on nc, dialed at addr, and returns
// the listener's AUTH_OK.
func (t *Transport) handshakeDial(nc net.Conn, addr string) (kvwire.AuthOK, error) {
	hello := kvwire.AuthHello{Version: kvwire.Version, NodeAddr: t.self, Shape: t.cfg.Shape, Incarnation: t.incarnation, HeartbeatMillis: t.heartbeatMillis()}
	rand.Read(hello.Nonce[:])
	if err := writeAuth(nc, &hello); err != nil {
		return kvwire.AuthOK{}, fmt.Errorf("handshake with %s: %w", addr, err)
	}
	var ch kvwire.AuthChallenge
	if err := t.readAuth(nc, addr, &ch); err != nil {
		return kvwire.AuthOK{}, fmt.Errorf("handshake with %s: %w", addr, err)
	}
	if ch.NodeAddr != addr {
		t.reject(cRejectedIdentity, addr, fmt.Errorf("listener calls itself %q", ch.NodeAddr))
		return kvwire.AuthOK{}, fmt.Errorf("handshake with %s: the node calls itself %q; dial the address it advertises: %w", addr, ch.NodeAddr, ErrIdentity)
	}
	resp := kvwire.AuthResponse{MAC: kvwire.AuthMAC(t.cfg.ClusterToken, kvwire.AuthRoleDialer, ch.Nonce, hello.Nonce, t.self, addr)}
	if err := writeAuth(nc, &resp); err != nil {
		return kvwire.AuthOK{}, fmt.Errorf("handshake with %s: %w", addr, err)
	}
	var ok kvwire.AuthOK
	if err := t.readAuth(nc, addr, &ok); err != nil {
		return kvwire.AuthOK{}, fmt.Errorf("handshake with %s: %w", addr, err)
	}
	want := kvwire.AuthMAC(t.cfg.ClusterToken, kvwire.AuthRoleListener, ch.Nonce, hello.Nonce, t.self, addr)
	if !hmac.Equal(ok.MAC[:], want[:]) {
		t.reject(cRejectedBadMAC, addr, fmt.Errorf("AUTH_OK MAC does not verify"))
		return kvwire.AuthOK{}, fmt.Errorf("handshake with %s: the listener cannot prove the cluster token (tokens differ): %w", addr, ErrAuth)
	}
	if d := t.cfg.Shape.Diff(ok.Shape); d != "" {
		t.reject(cRejectedShape, addr, fmt.Errorf("shape differs: %s", d))
		return kvwire.AuthOK{}, fmt.Errorf("handshake with %s: shapes differ (this node vs peer): %s: %w", addr, d, ErrIncompatible)
	}
	t.inc(cHandshakesOK)
	return ok, nil
}

// handshakeAccept runs the listener's side on an accepted nc and returns
// the dialer's AUTH_HELLO.
// authed is called as soon as the dialer's MAC verifies: from then on the
// connection is no longer a stranger's and cannot be evicted.
func (t *Transport) handshakeAccept(nc net.Conn, authed func()) (kvwire.AuthHello, error) {
	remote := nc.RemoteAddr().String()
	var hello kvwire.AuthHello
	if err := t.readAuth(nc, remote, &hello); err != nil {
		return hello, fmt.Errorf("handshake from %s: %w", remote, err)
	}
	if hello.Version != kvwire.Version {
		t.reject(cRejectedBadVersion, remote, fmt.Errorf("AUTH_HELLO version %d", hello.Version))
		return hello, t.refuse(nc, kvwire.RejectVersion, fmt.Sprintf("protocol version %d, this node speaks %d", hello.Version, kvwire.Version), ErrIncompatible)
	}
	if _, _, err := net.SplitHostPort(hello.NodeAddr); err != nil || hello.NodeAddr == t.self {
		t.reject(cRejectedIdentity, remote, fmt.Errorf("node address %q", hello.NodeAddr))
		return hello, t.refuse(nc, kvwire.RejectIdentity, fmt.Sprintf("node address %q is not host:port or is this node's own", hello.NodeAddr), ErrIdentity)
	}
	ch := kvwire.AuthChallenge{NodeAddr: t.self}
	rand.Read(ch.Nonce[:])
	if err := writeAuth(nc, &ch); err != nil {
		return hello, fmt.Errorf("handshake from %s: %w", hello.NodeAddr, err)
	}
	var resp kvwire.AuthResponse
	if err := t.readAuth(nc, remote, &resp); err != nil {
		return hello, fmt.Errorf("handshake from %s: %w", hello.NodeAddr, err)
	}
	want := kvwire.AuthMAC(t.cfg.ClusterToken, kvwire.AuthRoleDialer, ch.Nonce, hello.Nonce, hello.NodeAddr, t.self)
	if !hmac.Equal(resp.MAC[:], want[:]) {
		t.reject(cRejectedBadMAC, remote, fmt.Errorf("AUTH_RESPONSE from %q does not verify", hello.NodeAddr))
		return hello, t.refuse(nc, kvwire.RejectAuth, "authentication failed: the cluster tokens differ", ErrAuth)
	}
	authed()
	if d := hello.Shape.Diff(t.cfg.Shape); d != "" {
		t.reject(cRejectedShape, remote, fmt.Errorf("shape of %s differs: %s", hello.NodeAddr, d))
		return hello, t.refuse(nc, kvwire.RejectIncompatible, "shapes differ (dialer vs listener): "+d, ErrIncompatible)
	}
	t.mu.Lock()
	busy := t.peers[hello.NodeAddr] == nil && len(t.peers) >= peersMax
	t.mu.Unlock()
	if busy {
		t.reject(cRejectedBusy, remote, fmt.Errorf("%d peers tracked", peersMax))
		return hello, t.refuse(nc, kvwire.RejectBusy, fmt.Sprintf("this node already tracks %d peers", peersMax), ErrTooManyPeers)
	}
	ok := kvwire.AuthOK{
		Shape:           t.cfg.Shape,
		MAC:             kvwire.AuthMAC(t.cfg.ClusterToken, kvwire.AuthRoleListener, ch.Nonce, hello.Nonce, hello.NodeAddr, t.self),
		Incarnation:     t.incarnation,
		HeartbeatMillis: t.heartbeatMillis(),
	}
	if err := writeAuth(nc, &ok); err != nil {
		return hello, fmt.Errorf("handshake from %s: %w", hello.NodeAddr, err)
	}
	t.inc(cHandshakesOK)
	return hello, nil
}

// refuse sends AUTH_REJECT (best effort) and returns the error for the
// listener's log.
func (t *Transport) refuse(nc net.Conn, code kvwire.RejectCode, msg string, sentinel error) error {
	writeAuth(nc, &kvwire.AuthReject{Code: code, Message: msg})
	return fmt.Errorf("handshake refused (%v): %s: %w", code, msg, sentinel)
}

// writeAuth writes one handshake frame.
func writeAuth(nc net.Conn, p kvwire.Payload) error {
	frame := kvwire.AppendFrame(nil, p.Type(), [16]byte{}, p.AppendTo(nil))
	if _, err := nc.Write(frame); err != nil {
		return fmt.Errorf("write %v: %w", p.Type(), err)
	}
	return nil
}

// readAuth reads one handshake frame into want. An AUTH_REJECT from the
// peer becomes an error wrapping the sentinel for its code; any other
// frame, or one that fails its checks, is counted as rejected traffic.
func (t *Transport) readAuth(nc net.Conn, remote string, want kvwire.Payload) error {
	var hdr [kvwire.HeaderBytes]byte
	h, err := kvwire.ReadHeader(nc, &hdr)
	if err != nil {
		if c, ok := rejectCounter(err); ok {
			t.reject(c, remote, err)
		}
		return err
	}
	if !h.Type.IsAuth() {
		// Refused at the header: nothing announced by a peer that has not
		// authenticated is read or allocated beyond the 32 header bytes.
		err := fmt.Errorf("got %v during the handshake, want %v: %w", h.Type, want.Type(), ErrProtocol)
		t.reject(cRejectedUnauthenticated, remote, err)
		return err
	}
	if h.Length > kvwire.AuthPayloadBytesMax { // the type's own bound is lower; kept in case it grows
		err := fmt.Errorf("%v payload of %d bytes before authentication, limit %d: %w", h.Type, h.Length, kvwire.AuthPayloadBytesMax, kvwire.ErrTooLarge)
		t.reject(cRejectedOversize, remote, err)
		return err
	}
	payload := make([]byte, h.Length) // at most AuthPayloadBytesMax
	if _, err := io.ReadFull(nc, payload); err != nil {
		return fmt.Errorf("read %v payload: %w", h.Type, err)
	}
	if err := h.VerifyChecksum(payload); err != nil {
		t.reject(cRejectedChecksum, remote, err)
		return err
	}
	if h.Type == kvwire.TypeAuthReject && want.Type() != kvwire.TypeAuthHello {
		return t.peerRefused(payload)
	}
	if h.Type != want.Type() {
		err := fmt.Errorf("got %v during the handshake, want %v: %w", h.Type, want.Type(), ErrProtocol)
		t.reject(cRejectedUnexpected, remote, err)
		return err
	}
	if err := want.Decode(payload); err != nil {
		t.reject(cRejectedMalformed, remote, err)
		return err
	}
	return nil
}

// peerRefused turns a received AUTH_REJECT into an error.
func (t *Transport) peerRefused(payload []byte) error {
	t.inc(cAuthRejectedByPeer)
	var rej kvwire.AuthReject
	if err := rej.Decode(payload); err != nil {
		t.reject(cRejectedMalformed, "", err)
		return err
	}
	sentinel := ErrRejected
	switch rej.Code {
	case kvwire.RejectAuth:
		sentinel = ErrAuth
	case kvwire.RejectIncompatible, kvwire.RejectVersion:
		sentinel = ErrIncompatible
	case kvwire.RejectIdentity:
		sentinel = ErrIdentity
	}
	return fmt.Errorf("refused by the peer (%v): %q: %w", rej.Code, rej.Message, sentinel)
}

// dialPeer dials p and runs the handshake, all within timeout; Close
// interrupts it.
func (t *Transport) dialPeer(p *peer, timeout time.Duration) (*conn, error) {
	ctx, cancel := context.WithTimeout(t.life, timeout)
	defer cancel()
	nc, err := t.cfg.Dial(ctx, p.addr)
	if err != nil {
		t.inc(cDialErrors)
		if t.life.Err() != nil {
			return nil, ErrClosed
		}
		return nil, fmt.Errorf("dial %s: %w", p.addr, err)
	}
	t.inc(cConnsDialed)
	if !t.track(nc) {
		nc.Close()
		return nil, ErrClosed
	}
	defer t.untrack(nc)
	deadline, _ := ctx.Deadline()
	nc.SetDeadline(deadline)
	ok, err := t.handshakeDial(nc, p.addr)
	if err != nil {
		nc.Close()
		if t.life.Err() != nil {
			return nil, ErrClosed
		}
		return nil, err
	}
	nc.SetDeadline(time.Time{})
	return newConn(t, nc, ok.Incarnation, t.timeoutWith(ok.HeartbeatMillis)), nil
}

// heartbeatMillisMax caps the heartbeat interval a peer may announce, so
// a peer cannot stretch its own timeout without bound.
const heartbeatMillisMax = 60_000

// heartbeatMillis is this node's heartbeat interval as announced in the
// handshake.
func (t *Transport) heartbeatMillis() uint32 {
	return uint32(min(t.cfg.HeartbeatInterval.Milliseconds(), heartbeatMillisMax))
}

// timeoutWith returns the peer timeout for a connection to a peer that
// announced peerMillis: twice the longer of the two heartbeat intervals,
// so nodes configured differently do not declare each other lost between
// heartbeats.
func (t *Transport) timeoutWith(peerMillis uint32) time.Duration {
	peer := time.Duration(min(peerMillis, heartbeatMillisMax)) * time.Millisecond
	return 2 * max(t.cfg.HeartbeatInterval, peer)
}
