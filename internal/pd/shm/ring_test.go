package shm

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"tandem/internal/pd/kvwire"
)

// heapRegion is a region on the Go heap (the ring logic does not care
// where its memory is).
func heapRegion(size int) *Region {
	return newRegion(make([]byte, size), -1, nil)
}

// TestRingModel runs a producer and a consumer over one region with
// random frame sizes and random consumer lag, and checks that every frame
// arrives whole, in order, and that no two outstanding slots overlap.
func TestRingModel(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	reg := heapRegion(HeaderBytes + 64<<10)
	p, c := NewProducer(reg), NewConsumer(reg)
	type sent struct {
		f    kvwire.KVShm
		want []byte
	}
	var queue []sent // sent, not consumed yet
	produced, full := 0, 0
	for step := 0; step < 20000; step++ {
		if r.IntN(3) > 0 || len(queue) == 0 { // produce
			n := 1 + r.IntN(20<<10)
			if r.IntN(10) == 0 {
				n = 1 + r.IntN(100)
			}
			seq, off, data, ok, err := p.Alloc(n)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				full++
				if len(queue) == 0 {
					t.Fatalf("ring refuses %d bytes while empty", n)
				}
				continue
			}
			for i := range data {
				data[i] = byte(r.Uint32())
			}
			lo, hi := off, off+slotBytes(uint64(n))
			for _, q := range queue {
				qlo, qhi := q.f.Offset, q.f.Offset+slotBytes(uint64(q.f.Length))
				if lo < qhi && qlo < hi {
					t.Fatalf("slot %d [%d,%d) overlaps outstanding slot %d [%d,%d)", seq, lo, hi, q.f.Seq, qlo, qhi)
				}
			}
			queue = append(queue, sent{kvwire.KVShm{Seq: seq, Offset: off, Length: uint32(n)}, bytes.Clone(data)})
			produced++
			continue
		}
		q := queue[0]
		queue = queue[1:]
		got, err := c.Slot(&q.f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, q.want) {
			t.Fatalf("frame %d changed in the ring", q.f.Seq)
		}
		if err := c.Release(&q.f); err != nil {
			t.Fatal(err)
		}
	}
	if full == 0 || produced < 1000 {
		t.Errorf("produced %d frames, ring full %d times: the model did not exercise back-pressure", produced, full)
	}
}

// TestRingRestartsWhenEmpty: a ring used one frame at a time keeps
// writing at offset 0.
func TestRingRestartsWhenEmpty(t *testing.T) {
	reg := heapRegion(HeaderBytes + 1<<20)
	p, c := NewProducer(reg), NewConsumer(reg)
	for range 10 {
		seq, off, _, ok, err := p.Alloc(24 << 10)
		if err != nil || !ok || off != 0 {
			t.Fatalf("Alloc = off %d ok %v err %v, want offset 0", off, ok, err)
		}
		f := kvwire.KVShm{Seq: seq, Offset: off, Length: 24 << 10}
		if _, err := c.Slot(&f); err != nil {
			t.Fatal(err)
		}
		c.Release(&f)
	}
}

// TestProducerRefusesABadRelease: a consumer that publishes a released
// number past what was sent, or going backwards, is a protocol error.
func TestProducerRefusesABadRelease(t *testing.T) {
	reg := heapRegion(HeaderBytes + 1<<20)
	p := NewProducer(reg)
	if _, _, _, _, err := p.Alloc(100); err != nil {
		t.Fatal(err)
	}
	reg.released().Store(5)
	if _, _, _, _, err := p.Alloc(100); !errors.Is(err, ErrPeer) {
		t.Errorf("release past the sent frames: Alloc = %v, want ErrPeer", err)
	}
	reg.released().Store(1)
	p2 := NewProducer(reg)
	p2.last, p2.released = 3, 2
	if _, _, _, _, err := p2.Alloc(100); !errors.Is(err, ErrPeer) {
		t.Errorf("release going backwards: Alloc = %v, want ErrPeer", err)
	}
	if _, _, _, _, err := p.Alloc(2 << 20); !errors.Is(err, ErrTooLarge) {
		t.Errorf("frame above the ring: Alloc = %v, want ErrTooLarge", err)
	}
}

// TestSlotOverwriteDetected: a slot rewritten between Slot and Release
// fails the frame.
func TestSlotOverwriteDetected(t *testing.T) {
	reg := heapRegion(HeaderBytes + 1<<20)
	p, c := NewProducer(reg), NewConsumer(reg)
	seq, off, _, _, _ := p.Alloc(1000)
	f := kvwire.KVShm{Seq: seq, Offset: off, Length: 1000}
	if _, err := c.Slot(&f); err != nil {
		t.Fatal(err)
	}
	word(reg.data, off).Store(99)
	if err := c.Release(&f); !errors.Is(err, ErrSlot) {
		t.Errorf("Release after an overwrite = %v, want ErrSlot", err)
	}
}

// TestConsumerBounds: frames naming slots out of order, out of bounds,
// unaligned or unstamped are refused.
func TestConsumerBounds(t *testing.T) {
	reg := heapRegion(HeaderBytes + 1<<20)
	p := NewProducer(reg)
	seq, off, _, _, _ := p.Alloc(1000)
	good := kvwire.KVShm{Seq: seq, Offset: off, Length: 1000}
	data := uint64(reg.DataBytes())
	for _, tc := range []struct {
		name string
		f    kvwire.KVShm
		want error
	}{
		{"seq skips", kvwire.KVShm{Seq: 2, Offset: off, Length: 1000}, ErrPeer},
		{"offset past the end", kvwire.KVShm{Seq: 1, Offset: data, Length: 1000}, ErrPeer},
		{"slot crosses the end", kvwire.KVShm{Seq: 1, Offset: data - 64, Length: 1000}, ErrPeer},
		{"huge offset", kvwire.KVShm{Seq: 1, Offset: 1<<64 - 64, Length: 1000}, ErrPeer},
		{"unaligned", kvwire.KVShm{Seq: 1, Offset: 8, Length: 1000}, ErrPeer},
		{"too long", kvwire.KVShm{Seq: 1, Offset: 0, Length: kvwire.KVDataBytesMax + 1}, ErrPeer},
	} {
		c := NewConsumer(reg)
		if _, err := c.Slot(&tc.f); !errors.Is(err, tc.want) {
			t.Errorf("%s: Slot = %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := NewConsumer(reg).Slot(&good); err != nil {
		t.Errorf("the good frame: %v", err)
	}
	for _, f := range []kvwire.KVShm{{Seq: 1, Offset: off, Length: 999}, {Seq: 1, Offset: 4096, Length: 1000}} {
		c := NewConsumer(reg)
		if _, err := c.Slot(&f); err != nil {
			t.Fatal(err)
		}
		if err := c.Release(&f); !errors.Is(err, ErrSlot) {
			t.Errorf("frame %+v naming a slot that does not hold it: Release = %v, want ErrSlot", f, err)
		}
	}
}

// FuzzConsumer feeds arbitrary KV_SHM payloads to a consumer whose ring
// holds a few stamped slots: decoding and checking never panic, and a
// slot returned lies inside the data area and matches the frame.
func FuzzConsumer(f *testing.F) {
	reg := heapRegion(HeaderBytes + 1<<20)
	p := NewProducer(reg)
	for _, n := range []int{1000, 24 << 10, 64} {
		seq, off, _, _, _ := p.Alloc(n)
		f.Add((&kvwire.KVShm{Seq: seq, Offset: off, Length: uint32(n)}).AppendTo(nil))
	}
	f.Add((&kvwire.KVShm{Seq: 1, Offset: 1<<30 - 64, Length: kvwire.KVDataBytesMax}).AppendTo(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m kvwire.KVShm
		if err := m.Decode(b); err != nil {
			if !errors.Is(err, kvwire.ErrMalformed) {
				t.Fatalf("Decode error %v does not wrap ErrMalformed", err)
			}
			return
		}
		for _, next := range []uint64{1, m.Seq} {
			c := NewConsumer(reg)
			c.next = next
			slot, err := c.Slot(&m)
			if err != nil {
				if !errors.Is(err, ErrPeer) && !errors.Is(err, ErrSlot) {
					t.Fatalf("Slot error %v wraps neither ErrPeer nor ErrSlot", err)
				}
				continue
			}
			if len(slot) != int(m.Length) || m.Offset+SlotHeaderBytes+uint64(m.Length) > uint64(reg.DataBytes()) {
				t.Fatalf("slot of %d bytes at %d for frame %+v", len(slot), m.Offset, m)
			}
		}
	})
}

// TestRingStaysSmall: a consumer a few slots behind the producer keeps
// the ring's used span near what is in flight plus the wrap slack (the
// producer wraps early) instead of sweeping the whole region, so the
// slots stay in cache.
func TestRingStaysSmall(t *testing.T) {
	const n, lag = 16 << 10, 4
	reg := heapRegion(HeaderBytes + 64<<20)
	p, c := NewProducer(reg), NewConsumer(reg)
	var queue []kvwire.KVShm
	var span uint64
	for range 10000 {
		seq, off, _, ok, err := p.Alloc(n)
		if err != nil || !ok {
			t.Fatalf("Alloc = ok %v err %v with %d outstanding", ok, err, len(queue))
		}
		span = max(span, off+slotBytes(n))
		queue = append(queue, kvwire.KVShm{Seq: seq, Offset: off, Length: n})
		if len(queue) > lag {
			f := queue[0]
			queue = queue[1:]
			if _, err := c.Slot(&f); err != nil {
				t.Fatal(err)
			}
			if err := c.Release(&f); err != nil {
				t.Fatal(err)
			}
		}
	}
	if limit := uint64(2*(lag+2))*slotBytes(n) + wrapSlackBytes; span > limit {
		t.Errorf("the ring spanned %d bytes with %d slots of %d in flight, want at most %d", span, lag+1, n, limit)
	}
}

// TestRingBoundsInflight: the producer refuses a slot that would take the
// outstanding slots past InflightBytesMax, unless fewer than two are
// outstanding, and takes it again once the consumer released one.
func TestRingBoundsInflight(t *testing.T) {
	reg := heapRegion(HeaderBytes + 64<<20)
	p, c := NewProducer(reg), NewConsumer(reg)
	const n = 1 << 20
	var sent []kvwire.KVShm
	for {
		seq, off, _, ok, err := p.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		sent = append(sent, kvwire.KVShm{Seq: seq, Offset: off, Length: n})
		if len(sent) > 64 {
			t.Fatal("the producer never stopped")
		}
	}
	if got, want := uint64(len(sent)), uint64(InflightBytesMax/slotBytes(n)); got != want {
		t.Errorf("%d slots of %d bytes outstanding before the producer waits, want %d", got, n, want)
	}
	if _, err := c.Slot(&sent[0]); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(&sent[0]); err != nil {
		t.Fatal(err)
	}
	if _, _, _, ok, err := p.Alloc(n); !ok || err != nil {
		t.Errorf("Alloc after a release = ok %v err %v, want a slot", ok, err)
	}
	// Frames above half the bound: two may still be in flight.
	reg2 := heapRegion(HeaderBytes + 64<<20)
	p2 := NewProducer(reg2)
	for i := range 3 {
		_, _, _, ok, err := p2.Alloc(5 << 20)
		if err != nil || ok != (i < 2) {
			t.Errorf("Alloc of 5 MiB frame %d = ok %v err %v, want ok %v", i, ok, err, i < 2)
		}
	}
}

// TestMarksShareTheRing: data-less slots (KV_SRC frames) interleave with
// data slots in one sequence, are released in order, and Collect frees
// what the consumer released; a mark whose slot was overwritten fails.
func TestMarksShareTheRing(t *testing.T) {
	reg := heapRegion(HeaderBytes + 64<<10)
	p, c := NewProducer(reg), NewConsumer(reg)
	s1, o1, d1, ok, err := p.Alloc(100)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	copy(d1, "abc")
	s2, o2, ok, err := p.Mark()
	if err != nil || !ok || s2 != s1+1 || o2 != o1+slotBytes(100) {
		t.Fatalf("Mark() = seq %d off %d ok %v err %v after slot %d at %d", s2, o2, ok, err, s1, o1)
	}
	if rel, err := p.Collect(); err != nil || rel != 0 {
		t.Fatalf("Collect() before any release = %d, %v", rel, err)
	}
	if _, err := c.Slot(&kvwire.KVShm{Seq: s1, Offset: o1, Length: 100}); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(&kvwire.KVShm{Seq: s1, Offset: o1, Length: 100}); err != nil {
		t.Fatal(err)
	}
	m := &kvwire.KVSrc{Seq: s2, Slot: o2, Length: 24 << 10}
	if err := c.Mark(&kvwire.KVSrc{Seq: s2 + 1, Slot: o2, Length: 1}); !errors.Is(err, ErrPeer) {
		t.Errorf("Mark out of sequence = %v, want ErrPeer", err)
	}
	if err := c.Mark(&kvwire.KVSrc{Seq: s2, Slot: uint64(reg.DataBytes()) - 32, Length: 1}); !errors.Is(err, ErrPeer) {
		t.Errorf("Mark past the ring = %v, want ErrPeer", err)
	}
	if err := c.Mark(m); err != nil {
		t.Fatal(err)
	}
	if err := c.ReleaseMark(m); err != nil {
		t.Fatal(err)
	}
	if rel, err := p.Collect(); err != nil || rel != s2 || p.Outstanding() != 0 {
		t.Errorf("Collect() = %d, %v with %d outstanding; want %d, none", rel, err, p.Outstanding(), s2)
	}
	// A mark overwritten before its release fails it.
	s3, o3, _, _ := p.Mark()
	p.Damage(o3)
	m3 := &kvwire.KVSrc{Seq: s3, Slot: o3, Length: 1}
	if err := c.Mark(m3); err != nil {
		t.Fatal(err)
	}
	if err := c.ReleaseMark(m3); !errors.Is(err, ErrSlot) {
		t.Errorf("ReleaseMark of a damaged slot = %v, want ErrSlot", err)
	}
	// A released number past what was sent is the consumer's fault.
	reg.released().Store(s3 + 5)
	if _, err := p.Collect(); !errors.Is(err, ErrPeer) {
		t.Errorf("Collect() of a release past what was sent = %v, want ErrPeer", err)
	}
}

// TestSourceAckAndRevoke: the consumer's ack is the offer's and no other;
// Revoked is false until the producer revokes.
func TestSourceAckAndRevoke(t *testing.T) {
	reg := heapRegion(HeaderBytes + 64<<10)
	p, c := NewProducer(reg), NewConsumer(reg)
	ack := [kvwire.NonceBytes]byte{1, 2, 3}
	if p.SourceAcked(ack) {
		t.Errorf("acked before the consumer wrote anything")
	}
	c.AckSource([kvwire.NonceBytes]byte{9})
	if p.SourceAcked(ack) {
		t.Errorf("acked by another offer's value")
	}
	c.AckSource(ack)
	if !p.SourceAcked(ack) {
		t.Errorf("not acked after AckSource")
	}
	if c.Revoked() {
		t.Errorf("revoked before Revoke")
	}
	p.Revoke()
	if !c.Revoked() {
		t.Errorf("not revoked after Revoke")
	}
}
