//go:build linux

package shm

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"tandem/internal/pd/kvwire"
)

// fds counts this process's open descriptors.
func fds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// mappings counts this process's mappings of tandem regions.
func mappings(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "memfd:"+namePrefix)
}

// TestCreateOpenShareMemory: a region created and opened (by this one
// process, through /proc like a peer) is the same memory both ways; the
// ack proves it; closing both leaves no descriptor and no mapping.
func TestCreateOpenShareMemory(t *testing.T) {
	fd0, maps0 := fds(t), mappings(t)
	cr, offer, err := Create(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if err := cr.CheckAck(); err == nil {
		t.Errorf("CheckAck before the peer opened the region passed")
	}
	op, err := Open(&offer, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := cr.CheckAck(); err != nil {
		t.Errorf("CheckAck after Open: %v", err)
	}
	if err := cr.CloseFD(); err != nil {
		t.Fatal(err)
	}
	p, c := NewProducer(op), NewConsumer(cr)
	seq, off, data, ok, err := p.Alloc(5000)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	copy(data, bytes.Repeat([]byte("kv"), 2500))
	f := kvwire.KVShm{Seq: seq, Offset: off, Length: 5000}
	got, err := c.Slot(&f)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, bytes.Repeat([]byte("kv"), 2500)) {
		t.Errorf("the consumer sees other bytes than the producer wrote")
	}
	if err := c.Release(&f); err != nil {
		t.Fatal(err)
	}
	if p.r.released().Load() != 1 {
		t.Errorf("the producer does not see the release")
	}
	cr.Close()
	op.Close()
	if fd1, maps1 := fds(t), mappings(t); fd1 != fd0 || maps1 != maps0 {
		t.Errorf("after Close: %d descriptors (was %d), %d region mappings (was %d)", fd1, fd0, maps1, maps0)
	}
}

// TestOpenRefuses: offers that do not name the region they claim, or a
// region that is not what it should be, are refused with ErrRegion and
// leave no descriptor behind.
func TestOpenRefuses(t *testing.T) {
	cr, offer, err := Create(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer cr.Close()
	f, err := os.CreateTemp(t.TempDir(), "plain")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Truncate(1 << 20)
	unsealed, err := unix.MemfdCreate(namePrefix+"00000000000000000000000000000000", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(unsealed)
	unix.Ftruncate(unsealed, 1<<20)
	fd0 := fds(t)
	for _, tc := range []struct {
		name string
		edit func(o *kvwire.ShmOffer)
		max  int
	}{
		{"another name", func(o *kvwire.ShmOffer) { o.Name[0] ^= 1 }, 1 << 20},
		{"another fd", func(o *kvwire.ShmOffer) { o.FD = uint32(f.Fd()) }, 1 << 20},
		{"stdin", func(o *kvwire.ShmOffer) { o.FD = 0 }, 1 << 20},
		{"no such pid", func(o *kvwire.ShmOffer) { o.PID = 1<<22 - 1 }, 1 << 20},
		{"an unsealed memfd of the right name (all-zero random part)", func(o *kvwire.ShmOffer) { o.FD, o.Name = uint32(unsealed), [16]byte{} }, 1 << 20},
		{"another size", func(o *kvwire.ShmOffer) { o.Bytes = 2 << 20 }, 4 << 20},
		{"above this node's limit", func(o *kvwire.ShmOffer) {}, 1<<20 - 4096},
		{"another cookie", func(o *kvwire.ShmOffer) { o.Cookie[5] ^= 1 }, 1 << 20},
	} {
		o := offer
		tc.edit(&o)
		r, err := Open(&o, tc.max)
		if err == nil {
			r.Close()
			t.Errorf("%s: Open succeeded", tc.name)
			continue
		}
		if !errors.Is(err, ErrRegion) {
			t.Errorf("%s: Open = %v, want ErrRegion", tc.name, err)
		}
	}
	if fd1 := fds(t); fd1 != fd0 {
		t.Errorf("refused opens left %d descriptors open", fd1-fd0)
	}
	if _, _, err := Create(1<<20 + 1); !errors.Is(err, ErrRegion) {
		t.Errorf("Create of a size not in pages = %v, want ErrRegion", err)
	}
}
