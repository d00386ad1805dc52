package transfer

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"

	"tandem/internal/invariant"
	"tandem/internal/pd/kvwire"
)

// The record layer: after the handshake every frame is sealed (see
// kvwire.SealedBytes for the format). Each direction of a connection has
// its own key (kvwire.SessionKeys) and its own record counter, which is
// the GCM nonce: the sender never reuses one (the counter only grows, and
// keys are fresh per connection), and the receiver opens records only
// with the nonce it expects next, so a replayed, dropped or reordered
// record fails to open, as does any changed byte of header, ciphertext
// or tag. A frame that fails to open closes the connection
// (rejected_auth_tag).

// errOpen is why a sealed frame was refused.
var errOpen = errors.New("sealed frame fails authentication (tampered, replayed, reordered or corrupted on the way, or another key)")

// errRecordsSpent closes a connection whose direction sealed
// kvwire.SealRecordsMax records; the redial gets fresh keys.
var errRecordsSpent = errors.New("record counter exhausted for this connection's key; reconnect for fresh keys")

// sealer is one direction of a connection: AES-256-GCM under the
// direction's key, with the record counter as nonce. The sending side's
// sealer is used under the connection's write lock, the receiving side's
// by its reader goroutine only.
type sealer struct {
	aead  cipher.AEAD
	seq   uint64 // records sealed (or opened) so far: the next nonce
	nonce [12]byte
}

func newSealer(key [kvwire.SessionKeyBytes]byte) *sealer {
	block, err := aes.NewCipher(key[:])
	if err != nil {
		invariant.Failf("transfer", "AES-256 refused a %d-byte key: %v", len(key), err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		invariant.Failf("transfer", "GCM: %v", err)
	}
	return &sealer{aead: aead}
}

// next returns the nonce of the next record and advances the counter.
func (s *sealer) next() ([]byte, error) {
	if s.seq >= kvwire.SealRecordsMax {
		return nil, errRecordsSpent
	}
	binary.LittleEndian.PutUint64(s.nonce[4:], s.seq)
	s.seq++
	return s.nonce[:], nil
}

// seal appends the record sealing plain (with hdr as additional data) to
// dst.
func (s *sealer) seal(dst, plain, hdr []byte) ([]byte, error) {
	nonce, err := s.next()
	if err != nil {
		return dst, err
	}
	return s.aead.Seal(dst, nonce, plain, hdr), nil
}

// open opens the record rec (ciphertext and tag) into dst, which must
// have room for len(rec)-SealTagBytes bytes in its capacity (dst may be
// rec[:0], in place). On failure dst's bytes are garbage (GCM clears or
// leaves them), and the error wraps errOpen.
func (s *sealer) open(dst, rec, hdr []byte) ([]byte, error) {
	nonce, err := s.next()
	if err != nil {
		return nil, err
	}
	out, err := s.aead.Open(dst, nonce, rec, hdr)
	if err != nil {
		return nil, fmt.Errorf("record %d: %w", s.seq-1, errOpen)
	}
	return out, nil
}
