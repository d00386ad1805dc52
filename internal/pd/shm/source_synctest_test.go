package shm

import (
	"bytes"
	"testing"
	"testing/synctest"

	"tandem/internal/pd/kvwire"
)

// TestSourceCopyReleasedOrRevoked: the two ways a KV_SRC frame's page
// gets back to its producer, with the consumer on a goroutine of its own
// that the bubble holds between its copy and the rest (synctest.Wait: it
// has copied and waits). Until the consumer releases the frame's slot,
// Collect does not report it released. Released without a revoke: the
// copy stands and Collect then reports the frame. Revoked while the
// consumer waits (the producer's connection ended and the page is
// reused): the consumer's check after its copy sees the revoke, and its
// copy, which may hold bytes of the reused page, is not taken.
func TestSourceCopyReleasedOrRevoked(t *testing.T) {
	for _, revoke := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			ring := heapRegion(HeaderBytes + 64<<10)
			p, c := NewProducer(ring), NewConsumer(ring)
			src := heapRegion(HeaderBytes + 64<<10)
			page := src.data[:4096]
			for i := range page {
				page[i] = byte(i)
			}
			want := bytes.Clone(page)
			seq, slot, ok, err := p.Mark()
			if err != nil || !ok {
				t.Fatal(ok, err)
			}
			f := &kvwire.KVSrc{Seq: seq, Slot: slot, Offset: 0, Length: uint32(len(page))}
			pause, kept := make(chan struct{}), make(chan bool)
			dst := make([]byte, len(page))
			go func() {
				if err := c.Mark(f); err != nil {
					t.Error(err)
				}
				data, ok := src.Source(f.Offset, f.Length)
				if !ok {
					t.Error("the frame's bytes are outside the source")
				}
				copy(dst, data)
				<-pause
				revoked := c.Revoked() // after the copy's loads
				if err := c.ReleaseMark(f); err != nil {
					t.Error(err)
				}
				kept <- !revoked
			}()
			synctest.Wait() // the consumer has copied and waits
			if rel, err := p.Collect(); err != nil || rel >= seq {
				t.Fatalf("Collect() = %d, %v before the consumer released frame %d", rel, err, seq)
			}
			if revoke {
				p.Revoke()
				for i := range page {
					page[i] = 0xee // the producer reuses the page
				}
			}
			close(pause)
			took := <-kept
			rel, err := p.Collect()
			switch {
			case err != nil || rel != seq:
				t.Errorf("Collect() = %d, %v after the release, want %d", rel, err, seq)
			case revoke && took:
				t.Errorf("revoked while the consumer held its copy, but the copy was taken")
			case !revoke && (!took || !bytes.Equal(dst, want)):
				t.Errorf("not revoked: copy taken %v, intact %v; want both", took, bytes.Equal(dst, want))
			}
		})
	}
}
