package transfer

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"tandem/internal/pd/kvwire"
)

// The handshake (every connection starts with it; nothing else is
// accepted before it ends), protocol version 3:
//
//	dialer → AUTH_HELLO{version, own address, shape, nonce D, incarnation}
//	listener → AUTH_CHALLENGE{nonce L, own address}   (or AUTH_REJECT: version, identity)
//	dialer → AUTH_RESPONSE{AuthMAC(token, dialer, HandshakeHash(hello, challenge))}
//	listener → AUTH_OK{shape, AuthMAC(token, listener, HandshakeHash(hello, challenge, ok)), incarnation}
//	           (or AUTH_REJECT: bad MAC, shape differs, busy)
//
// The MACs cover the transcript of every payload sent (AUTH_OK with its
// MAC field zeroed), so no field can be changed on the way. The dialer
// checks that the listener's address is the one it dialed, the
// listener's MAC and its shape. The listener checks the version, the
// dialer's address, its MAC, then its shape: authentication comes before
// compatibility, so a stranger dialing a listener learns nothing about
// the node (a stranger that a node dials learns the dialer's identity,
// version and shape from AUTH_HELLO). Then both sides derive the
// connection's session keys from the token and the transcript
// (kvwire.SessionKeys) and seal every later frame (seal.go). The dialer
// runs under DialTimeout, the listener under HandshakeTimeout from
// accept. A version 1 dialer (frames in clear) gets a version 1
// AUTH_REJECT naming the version.

// sessionKeys are a connection's two directions, from this node's view.
type sessionKeys struct{ send, recv [kvwire.SessionKeyBytes]byte }

// handshakeDial runs the dialer's side on nc, dialed at addr, and returns
// the listener's AUTH_OK and the session keys.
func (t *Transport) handshakeDial(nc net.Conn, addr string) (kvwire.AuthOK, sessionKeys, error) {
	hello := kvwire.AuthHello{Version: kvwire.Version, NodeAddr: t.self, Shape: t.cfg.Shape, Incarnation: t.incarnation, HeartbeatMillis: t.heartbeatMillis()}
	rand.Read(hello.Nonce[:])
	helloRaw := hello.AppendTo(nil)
	if err := writeAuth(nc, kvwire.TypeAuthHello, helloRaw); err != nil {
		return kvwire.AuthOK{}, sessionKeys{}, fmt.Errorf("handshake with %s: %w", addr, err)
	}
	var ch kvwire.AuthChallenge
	chRaw, err := t.readAuth(nc, addr, &ch)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
			err = fmt.Errorf("%w (the listener closed the connection after AUTH_HELLO: it may speak an older protocol version than %d, which seals frames; upgrade every node)", err, kvwire.Version)
		}
		return kvwire.AuthOK{}, sessionKeys{}, fmt.Errorf("handshake with %s: %w", addr, err)
	}
	if ch.NodeAddr != addr {
		t.reject(cRejectedIdentity, addr, fmt.Errorf("listener calls itself %q", ch.NodeAddr))
		return kvwire.AuthOK{}, sessionKeys{}, fmt.Errorf("handshake with %s: the node calls itself %q; dial the address it advertises: %w", addr, ch.NodeAddr, ErrIdentity)
	}
	resp := kvwire.AuthResponse{MAC: kvwire.AuthMAC(t.cfg.ClusterToken, kvwire.AuthRoleDialer, kvwire.HandshakeHash(helloRaw, chRaw))}
	if err := writeAuth(nc, kvwire.TypeAuthResponse, resp.AppendTo(nil)); err != nil {
		return kvwire.AuthOK{}, sessionKeys{}, fmt.Errorf("handshake with %s: %w", addr, err)
	}
	var ok kvwire.AuthOK
	if _, err := t.readAuth(nc, addr, &ok); err != nil {
		return kvwire.AuthOK{}, sessionKeys{}, fmt.Errorf("handshake with %s: %w", addr, err)
	}
	unmaced := ok
	unmaced.MAC = [kvwire.NonceBytes]byte{}
	th := kvwire.HandshakeHash(helloRaw, chRaw, unmaced.AppendTo(nil))
	want := kvwire.AuthMAC(t.cfg.ClusterToken, kvwire.AuthRoleListener, th)
	if !hmac.Equal(ok.MAC[:], want[:]) {
		t.reject(cRejectedBadMAC, addr, fmt.Errorf("AUTH_OK MAC does not verify"))
		return kvwire.AuthOK{}, sessionKeys{}, fmt.Errorf("handshake with %s: the listener cannot prove the cluster token (tokens differ, or the handshake was changed on the way): %w", addr, ErrAuth)
	}
	if d := t.cfg.Shape.Diff(ok.Shape); d != "" {
		t.reject(cRejectedShape, addr, fmt.Errorf("shape differs: %s", d))
		return kvwire.AuthOK{}, sessionKeys{}, fmt.Errorf("handshake with %s: shapes differ (this node vs peer): %s: %w", addr, d, ErrIncompatible)
	}
	t.inc(cHandshakesOK)
	var keys sessionKeys
	keys.send, keys.recv = kvwire.SessionKeys(t.cfg.ClusterToken, th)
	return ok, keys, nil
}

// handshakeAccept runs the listener's side on an accepted nc and returns
// the dialer's AUTH_HELLO and the session keys. authed is called as soon
// as the dialer's MAC verifies: from then on the connection is no longer
// a stranger's and cannot be evicted.
func (t *Transport) handshakeAccept(nc net.Conn, authed func()) (kvwire.AuthHello, sessionKeys, error) {
	remote := nc.RemoteAddr().String()
	var hello kvwire.AuthHello
	helloRaw, err := t.readAuth(nc, remote, &hello)
	if err != nil {
		return hello, sessionKeys{}, fmt.Errorf("handshake from %s: %w", remote, err)
	}
	if hello.Version != kvwire.Version {
		t.reject(cRejectedBadVersion, remote, fmt.Errorf("AUTH_HELLO version %d", hello.Version))
		return hello, sessionKeys{}, t.refuse(nc, kvwire.RejectVersion, fmt.Sprintf("protocol version %d, this node speaks %d", hello.Version, kvwire.Version), ErrIncompatible)
	}
	if _, _, err := net.SplitHostPort(hello.NodeAddr); err != nil || hello.NodeAddr == t.self {
		t.reject(cRejectedIdentity, remote, fmt.Errorf("node address %q", hello.NodeAddr))
		return hello, sessionKeys{}, t.refuse(nc, kvwire.RejectIdentity, fmt.Sprintf("node address %q is not host:port or is this node's own", hello.NodeAddr), ErrIdentity)
	}
	ch := kvwire.AuthChallenge{NodeAddr: t.self}
	rand.Read(ch.Nonce[:])
	chRaw := ch.AppendTo(nil)
	if err := writeAuth(nc, kvwire.TypeAuthChallenge, chRaw); err != nil {
		return hello, sessionKeys{}, fmt.Errorf("handshake from %s: %w", hello.NodeAddr, err)
	}
	var resp kvwire.AuthResponse
	if _, err := t.readAuth(nc, remote, &resp); err != nil {
		return hello, sessionKeys{}, fmt.Errorf("handshake from %s: %w", hello.NodeAddr, err)
	}
	want := kvwire.AuthMAC(t.cfg.ClusterToken, kvwire.AuthRoleDialer, kvwire.HandshakeHash(helloRaw, chRaw))
	if !hmac.Equal(resp.MAC[:], want[:]) {
		t.reject(cRejectedBadMAC, remote, fmt.Errorf("AUTH_RESPONSE from %q does not verify", hello.NodeAddr))
		return hello, sessionKeys{}, t.refuse(nc, kvwire.RejectAuth, "authentication failed: the cluster tokens differ", ErrAuth)
	}
	authed()
	if d := hello.Shape.Diff(t.cfg.Shape); d != "" {
		t.reject(cRejectedShape, remote, fmt.Errorf("shape of %s differs: %s", hello.NodeAddr, d))
		return hello, sessionKeys{}, t.refuse(nc, kvwire.RejectIncompatible, "shapes differ (dialer vs listener): "+d, ErrIncompatible)
	}
	t.mu.Lock()
	busy := t.peers[hello.NodeAddr] == nil && len(t.peers) >= peersMax
	t.mu.Unlock()
	if busy {
		t.reject(cRejectedBusy, remote, fmt.Errorf("%d peers tracked", peersMax))
		return hello, sessionKeys{}, t.refuse(nc, kvwire.RejectBusy, fmt.Sprintf("this node already tracks %d peers", peersMax), ErrTooManyPeers)
	}
	ok := kvwire.AuthOK{
		Shape:           t.cfg.Shape,
		Incarnation:     t.incarnation,
		HeartbeatMillis: t.heartbeatMillis(),
	}
	th := kvwire.HandshakeHash(helloRaw, chRaw, ok.AppendTo(nil))
	ok.MAC = kvwire.AuthMAC(t.cfg.ClusterToken, kvwire.AuthRoleListener, th)
	if err := writeAuth(nc, kvwire.TypeAuthOK, ok.AppendTo(nil)); err != nil {
		return hello, sessionKeys{}, fmt.Errorf("handshake from %s: %w", hello.NodeAddr, err)
	}
	t.inc(cHandshakesOK)
	var keys sessionKeys
	keys.recv, keys.send = kvwire.SessionKeys(t.cfg.ClusterToken, th)
	return hello, keys, nil
}

// refuse sends AUTH_REJECT (best effort) and returns the error for the
// listener's log.
func (t *Transport) refuse(nc net.Conn, code kvwire.RejectCode, msg string, sentinel error) error {
	writeAuth(nc, kvwire.TypeAuthReject, (&kvwire.AuthReject{Code: code, Message: msg}).AppendTo(nil))
	return fmt.Errorf("handshake refused (%v): %s: %w", code, msg, sentinel)
}

// writeAuth writes one handshake frame (in clear, with its checksum).
func writeAuth(nc net.Conn, typ kvwire.Type, payload []byte) error {
	frame := kvwire.AppendFrame(nil, typ, [16]byte{}, payload)
	if _, err := nc.Write(frame); err != nil {
		return fmt.Errorf("write %v: %w", typ, err)
	}
	return nil
}

// refuseOldVersion answers an AUTH_HELLO of an older version (whose
// header hdr failed ParseHeader with ErrVersion) with an AUTH_REJECT of
// that version, whose layout every version shares, so the old dialer
// reports why instead of a bare close. It reads the hello's payload first (within the auth
// bound) so that closing does not reset the connection before the
// reject arrives.
func (t *Transport) refuseOldVersion(nc net.Conn, hdr *[kvwire.HeaderBytes]byte) {
	if n := binary.LittleEndian.Uint32(hdr[24:]); n <= kvwire.AuthPayloadBytesMax {
		io.CopyN(io.Discard, nc, int64(n))
	}
	rej := (&kvwire.AuthReject{Code: kvwire.RejectVersion, Message: fmt.Sprintf(
		"this node speaks transfer protocol version %d (frames encrypted after the handshake since version 2, recurrent state since 3); version %d is refused: upgrade every node of the cluster", kvwire.Version, hdr[4])}).AppendTo(nil)
	h := kvwire.Header{Version: hdr[4], Type: kvwire.TypeAuthReject, Length: uint32(len(rej)), Checksum: kvwire.Checksum(rej)}
	nc.Write(append(h.AppendTo(nil), rej...))
}

// readAuth reads one handshake frame into want and returns its raw
// payload (for the transcript). An AUTH_REJECT from the peer becomes an
// error wrapping the sentinel for its code; any other frame, or one that
// fails its checks, is counted as rejected traffic.
func (t *Transport) readAuth(nc net.Conn, remote string, want kvwire.Payload) ([]byte, error) {
	var hdr [kvwire.HeaderBytes]byte
	h, err := kvwire.ReadHeader(nc, &hdr)
	if err != nil {
		if c, ok := rejectCounter(err); ok {
			t.reject(c, remote, err)
		}
		if errors.Is(err, kvwire.ErrVersion) && want.Type() == kvwire.TypeAuthHello && hdr[4] >= kvwire.VersionPlaintext && hdr[4] < kvwire.Version && hdr[5] == byte(kvwire.TypeAuthHello) {
			t.refuseOldVersion(nc, &hdr)
		}
		return nil, err
	}
	if !h.Type.IsAuth() {
		// Refused at the header: nothing announced by a peer that has not
		// authenticated is read or allocated beyond the 32 header bytes.
		err := fmt.Errorf("got %v during the handshake, want %v: %w", h.Type, want.Type(), ErrProtocol)
		t.reject(cRejectedUnauthenticated, remote, err)
		return nil, err
	}
	if h.Length > kvwire.AuthPayloadBytesMax { // the type's own bound is lower; kept in case it grows
		err := fmt.Errorf("%v payload of %d bytes before authentication, limit %d: %w", h.Type, h.Length, kvwire.AuthPayloadBytesMax, kvwire.ErrTooLarge)
		t.reject(cRejectedOversize, remote, err)
		return nil, err
	}
	payload := make([]byte, h.Length) // at most AuthPayloadBytesMax
	if _, err := io.ReadFull(nc, payload); err != nil {
		return nil, fmt.Errorf("read %v payload: %w", h.Type, err)
	}
	if err := h.VerifyChecksum(payload); err != nil {
		t.reject(cRejectedChecksum, remote, err)
		return nil, err
	}
	if h.Type == kvwire.TypeAuthReject && want.Type() != kvwire.TypeAuthHello {
		return nil, t.peerRefused(payload)
	}
	if h.Type != want.Type() {
		err := fmt.Errorf("got %v during the handshake, want %v: %w", h.Type, want.Type(), ErrProtocol)
		t.reject(cRejectedUnexpected, remote, err)
		return nil, err
	}
	if err := want.Decode(payload); err != nil {
		t.reject(cRejectedMalformed, remote, err)
		return nil, err
	}
	return payload, nil
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
	ok, keys, err := t.handshakeDial(nc, p.addr)
	if err != nil {
		nc.Close()
		if t.life.Err() != nil {
			return nil, ErrClosed
		}
		return nil, err
	}
	nc.SetDeadline(time.Time{})
	c := newConn(t, nc, ok.Incarnation, t.timeoutWith(ok.HeartbeatMillis), keys)
	if err := t.offerShm(c); err != nil {
		c.close(err)
		return nil, fmt.Errorf("handshake with %s: %w", p.addr, err)
	}
	return c, nil
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
