package transfer

import (
	"bytes"
	"errors"
	"testing"

	"tandem/internal/pd/kvwire"
)

// TestSealerNonces: the nonce is the record counter, it never repeats
// under one key, and the sealer refuses to go past SealRecordsMax.
func TestSealerNonces(t *testing.T) {
	s := newSealer([32]byte{1})
	seen := map[[12]byte]bool{}
	for i := range 1000 {
		n, err := s.next()
		if err != nil {
			t.Fatal(err)
		}
		k := [12]byte(n)
		if seen[k] {
			t.Fatalf("nonce %x repeated at record %d", k, i)
		}
		seen[k] = true
	}
	s.seq = kvwire.SealRecordsMax - 1
	if _, err := s.next(); err != nil {
		t.Fatalf("the last record number: %v", err)
	}
	if _, err := s.seal(nil, []byte("x"), nil); !errors.Is(err, errRecordsSpent) {
		t.Errorf("seal past SealRecordsMax = %v, want errRecordsSpent", err)
	}
}

// TestSealerRejectsReplayReorderTamper opens records with a receiver's
// own counter: only the next record in order, unchanged, opens.
func TestSealerRejectsReplayReorderTamper(t *testing.T) {
	key := [32]byte{7}
	hdr := []byte("header bytes as additional data")
	send := newSealer(key)
	var recs [][]byte
	for i := range 3 {
		r, err := send.seal(nil, bytes.Repeat([]byte{byte(i)}, 100), hdr)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	open := func(s *sealer, rec, ad []byte) error {
		_, err := s.open(nil, bytes.Clone(rec), ad)
		return err
	}
	recv := newSealer(key)
	if err := open(recv, recs[0], hdr); err != nil {
		t.Fatalf("record 0 in order: %v", err)
	}
	if err := open(recv, recs[0], hdr); !errors.Is(err, errOpen) {
		t.Errorf("record 0 replayed: %v, want errOpen", err)
	}
	recv = newSealer(key)
	if err := open(recv, recs[1], hdr); !errors.Is(err, errOpen) {
		t.Errorf("record 1 before record 0 (reordered or dropped): %v, want errOpen", err)
	}
	recv = newSealer(key)
	bad := bytes.Clone(recs[0])
	bad[len(bad)/2] ^= 1
	if err := open(recv, bad, hdr); !errors.Is(err, errOpen) {
		t.Errorf("tampered ciphertext: %v, want errOpen", err)
	}
	recv = newSealer(key)
	if err := open(recv, recs[0], []byte("another header")); !errors.Is(err, errOpen) {
		t.Errorf("record under a changed header: %v, want errOpen", err)
	}
	recv = newSealer([32]byte{8})
	if err := open(recv, recs[0], hdr); !errors.Is(err, errOpen) {
		t.Errorf("record under another key: %v, want errOpen", err)
	}
}
