package kvwire

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"

	"tandem/internal/invariant"
)

// AuthRole says which side of the handshake computes a MAC. The role is
// part of the MACed bytes, so one side's proof can never be replayed as
// the other's.
type AuthRole uint8

// The roles.
const (
	AuthRoleDialer   AuthRole = 1 // the AUTH_RESPONSE MAC
	AuthRoleListener AuthRole = 2 // the AUTH_OK MAC
)

// HandshakeHash returns the SHA-256 transcript hash of handshake payloads,
// in the order they were sent:
//
//	SHA-256("tandem-kv/2 transcript" || for each part: u32 len || part)
//
// The dialer's MAC covers HandshakeHash(AUTH_HELLO, AUTH_CHALLENGE); the
// listener's MAC and the session keys cover HandshakeHash(AUTH_HELLO,
// AUTH_CHALLENGE, AUTH_OK with its MAC field zeroed). Every field of the
// handshake (versions, both addresses, both nonces, shapes, incarnations,
// heartbeat intervals) is thus bound: an on-path attacker cannot change
// any of them without the MACs failing.
func HandshakeHash(parts ...[]byte) [32]byte {
	h := sha256.New()
	h.Write([]byte("tandem-kv/2 transcript"))
	for _, p := range parts {
		h.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(p))))
		h.Write(p)
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// AuthMAC returns HMAC-SHA256 keyed by the cluster token over
//
//	"tandem-kv/2 mac" || role || transcript
//
// where transcript is a HandshakeHash. The dialer proves the token over a
// transcript holding the listener's fresh nonce (AUTH_RESPONSE) and the
// listener proves it back over one holding the dialer's (AUTH_OK), so
// neither side can be impersonated by someone who only replays old
// handshakes, and both addresses are bound: a proof for one pair of
// nodes is worthless for another. Compare results with hmac.Equal.
func AuthMAC(token []byte, role AuthRole, transcript [32]byte) [NonceBytes]byte {
	m := hmac.New(sha256.New, token)
	m.Write([]byte("tandem-kv/2 mac"))
	m.Write([]byte{byte(role)})
	m.Write(transcript[:])
	var out [NonceBytes]byte
	copy(out[:], m.Sum(nil))
	return out
}

// SessionKeyBytes is the size of a session key (AES-256).
const SessionKeyBytes = 32

// SessionKeys derives the two AES-256-GCM keys of a connection with
// HKDF-SHA256: the cluster token is the secret, the transcript (the
// listener's HandshakeHash, which holds both fresh nonces) the salt, and
// the direction the info ("tandem-kv/2 dialer->listener" and
// "tandem-kv/2 listener->dialer"). Every connection gets fresh keys, and
// each direction its own, so the per-direction record counters used as
// nonces never repeat under one key. Deriving needs the token: a
// stranger who records a handshake cannot compute them. A token holder
// can (there is no ephemeral key exchange): the token protects recorded
// traffic only while it stays secret.
func SessionKeys(token []byte, transcript [32]byte) (dialerToListener, listenerToDialer [SessionKeyBytes]byte) {
	d, err1 := hkdf.Key(sha256.New, token, transcript[:], "tandem-kv/2 dialer->listener", SessionKeyBytes)
	l, err2 := hkdf.Key(sha256.New, token, transcript[:], "tandem-kv/2 listener->dialer", SessionKeyBytes)
	if err1 != nil || err2 != nil { // only for key lengths HKDF cannot produce
		invariant.Failf("kvwire", "HKDF refused a %d-byte key: %v", SessionKeyBytes, errors.Join(err1, err2))
	}
	copy(dialerToListener[:], d)
	copy(listenerToDialer[:], l)
	return dialerToListener, listenerToDialer
}
