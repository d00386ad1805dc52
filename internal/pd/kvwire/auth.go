package kvwire

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
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

// AuthMAC returns HMAC-SHA256 keyed by the cluster token over the
// handshake transcript:
//
//	"tandem-kv" || role || listenerNonce || dialerNonce ||
//	u16 len || dialerAddr || u16 len || listenerAddr
//
// The dialer proves the token over the listener's fresh nonce (AUTH_RESPONSE)
// and the listener proves it back over the dialer's (AUTH_OK), so neither
// side can be impersonated by someone who only replays old handshakes, and
// both addresses are bound: a proof for one pair of nodes is worthless for
// another. Compare results with hmac.Equal.
func AuthMAC(token []byte, role AuthRole, listenerNonce, dialerNonce [NonceBytes]byte, dialerAddr, listenerAddr string) [NonceBytes]byte {
	m := hmac.New(sha256.New, token)
	b := make([]byte, 0, 16+1+2*NonceBytes+4+len(dialerAddr)+len(listenerAddr))
	b = append(b, "tandem-kv"...)
	b = append(b, byte(role))
	b = append(b, listenerNonce[:]...)
	b = append(b, dialerNonce[:]...)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(dialerAddr)))
	b = append(b, dialerAddr...)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(listenerAddr)))
	b = append(b, listenerAddr...)
	m.Write(b)
	var out [NonceBytes]byte
	copy(out[:], m.Sum(nil))
	return out
}
