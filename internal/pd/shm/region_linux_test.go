//go:build linux

package shm

import (
	"bytes"
	"errors"
	"fmt"
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

// TestSourceSharedReadOnly: a source region opened through /proc is the
// creator's memory, read-only on the opening side; Locate and Source
// bound every range; closing both leaves no descriptor and no mapping.
func TestSourceSharedReadOnly(t *testing.T) {
	fd0, maps0 := fds(t), mappings(t)
	src, err := CreateSource(10000)
	if err != nil {
		t.Fatal(err)
	}
	if len(src.Data()) != 10000 {
		t.Fatalf("Data() has %d bytes, want 10000", len(src.Data()))
	}
	o := src.Offer()
	if o2 := src.Offer(); o2.Ack == o.Ack || o2.Cookie != o.Cookie {
		t.Errorf("two offers: acks equal %v, cookies equal %v (want a fresh ack, the same cookie)", o2.Ack == o.Ack, o2.Cookie == o.Cookie)
	}
	rd, err := OpenSource(&o, kvwire.ShmSourceBytesMax)
	if err != nil {
		t.Fatal(err)
	}
	copy(src.Data()[4096:], "kv page")
	got, ok := rd.Source(4096, 7)
	if !ok || string(got) != "kv page" {
		t.Errorf("Source(4096, 7) = %q, %v", got, ok)
	}
	for _, r := range [][2]uint64{{0, 0}, {uint64(rd.DataBytes()), 1}, {uint64(rd.DataBytes()) - 1, 2}, {1 << 62, 1}} {
		if _, ok := rd.Source(r[0], uint32(r[1])); ok {
			t.Errorf("Source(%d, %d) accepted a range outside %d bytes", r[0], r[1], rd.DataBytes())
		}
	}
	if off, ok := src.Locate(src.Data()[100:200]); !ok || off != 100 {
		t.Errorf("Locate of Data()[100:200] = %d, %v", off, ok)
	}
	if _, ok := src.Locate(make([]byte, 10)); ok {
		t.Errorf("Locate of heap memory succeeded")
	}
	if _, ok := src.Locate(src.Data()[9990:10000:10000][:10]); !ok {
		t.Errorf("Locate of the last bytes failed")
	}
	// The opening side cannot write: mprotect to writable fails on a
	// read-only descriptor's mapping.
	if err := unix.Mprotect(rd.mem, unix.PROT_READ|unix.PROT_WRITE); err == nil {
		t.Errorf("the source mapping could be made writable")
	}
	if _, err := OpenSource(&o, 4096); err == nil {
		t.Errorf("OpenSource above maxBytes succeeded")
	}
	bad := o
	bad.Cookie[0] ^= 1
	if _, err := OpenSource(&bad, kvwire.ShmSourceBytesMax); !errors.Is(err, ErrRegion) {
		t.Errorf("OpenSource with another cookie = %v, want ErrRegion", err)
	}
	rd.Close()
	src.Close()
	if fds(t) != fd0 || mappings(t) != maps0 {
		t.Errorf("after Close: %d descriptors (was %d), %d mappings (was %d)", fds(t), fd0, mappings(t), maps0)
	}
}

// TestSourceRefusesNewWriters: once CreateSource returns, nobody can make
// a new writable view of the region (finding 7 of the 2026-12-03 red-team
// run: a process of the cluster's user reopened prefill's memfd read-write
// and rewrote other clients' KV). Reopening it read-write through /proc
// still succeeds, but a shared writable mapping, write(2), pwrite(2) and
// punching a hole all fail; the creator's own mapping still writes, and a
// reader sees what it wrote.
func TestSourceRefusesNewWriters(t *testing.T) {
	src, err := CreateSource(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	path := fmt.Sprintf("/proc/self/fd/%d", src.r.fd)
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("reopen %s read-write: %v (the kernel lets the same user do it; the seals are what refuse writes)", path, err)
	}
	defer unix.Close(fd)
	size := HeaderBytes + 1<<16
	if mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err == nil {
		mem[HeaderBytes] = 0xff
		unix.Munmap(mem)
		t.Errorf("a new shared writable mapping of the source region succeeded")
	}
	if _, err := unix.Write(fd, []byte("scribble")); err == nil {
		t.Errorf("write(2) to the source region succeeded")
	}
	if _, err := unix.Pwrite(fd, []byte("scribble"), int64(HeaderBytes)); err == nil {
		t.Errorf("pwrite(2) to the source region succeeded")
	}
	if err := unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, int64(HeaderBytes), 4096); err == nil {
		t.Errorf("punching a hole in the source region succeeded")
	}
	// A read-only shared mapping is what a receiver makes; it must not be
	// upgradable to writable.
	ro, err := unix.Mmap(fd, 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatalf("a read-only mapping of the source region: %v", err)
	}
	defer unix.Munmap(ro)
	if err := unix.Mprotect(ro, unix.PROT_READ|unix.PROT_WRITE); err == nil {
		t.Errorf("a read-only shared mapping of the source region could be made writable")
	}
	copy(src.Data()[100:], "prefill's own write")
	if got := string(ro[HeaderBytes+100 : HeaderBytes+100+len("prefill's own write")]); got != "prefill's own write" {
		t.Errorf("a reader sees %q where the creator wrote through its own mapping", got)
	}
	o := src.Offer()
	rd, err := OpenSource(&o, kvwire.ShmSourceBytesMax)
	if err != nil {
		t.Fatalf("OpenSource of a sealed source: %v", err)
	}
	rd.Close()
	// A receiver maps only sources sealed that way.
	plain, po, err := create(HeaderBytes+4096, seals)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if r, err := OpenSource(&kvwire.ShmSource{ShmOffer: po}, kvwire.ShmSourceBytesMax); !errors.Is(err, ErrRegion) {
		if err == nil {
			r.Close()
		}
		t.Errorf("OpenSource of a source without F_SEAL_FUTURE_WRITE = %v, want ErrRegion", err)
	}
}
