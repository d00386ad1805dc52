//go:build linux

package shm

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"tandem/internal/pd/kvwire"
)

// seals are the seals a region must carry: nobody can change its size
// (a shrink under a mapping would fault the other process) or add or
// remove seals.
const seals = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL

// sourceSeals are a source region's: also F_SEAL_FUTURE_WRITE, added once
// its creator has mapped it writable, so that no process (another of the
// same user reopening /proc/PID/fd/N, or a receiver) can make a new
// writable mapping, write(2) to it or punch a hole in it; the creator's
// own mapping keeps writing (Linux 5.1 and later).
const sourceSeals = seals | unix.F_SEAL_FUTURE_WRITE

// Supported reports whether this platform has shared-memory regions.
func Supported() bool { return true }

// memfdName is the name a region with random part name has, as
// /proc/*/fd links show it.
func memfdName(name [kvwire.ShmNameBytes]byte) string {
	return "/memfd:" + namePrefix + hex.EncodeToString(name[:]) + " (deleted)"
}

// Create makes a region of size bytes (whole pages, within
// kvwire.ShmRegionBytesMin..Max) to receive into, and the offer that
// lets the peer map it. The region keeps its descriptor open (the peer
// opens it through /proc) until CloseFD.
func Create(size int) (*Region, kvwire.ShmOffer, error) {
	if size < kvwire.ShmRegionBytesMin || size > kvwire.ShmRegionBytesMax || size%kvwire.ShmPageBytes != 0 {
		return nil, kvwire.ShmOffer{}, fmt.Errorf("create region of %d bytes: want whole %d-byte pages within %d..%d: %w", size, kvwire.ShmPageBytes, kvwire.ShmRegionBytesMin, kvwire.ShmRegionBytesMax, ErrRegion)
	}
	r, o, err := create(uint64(size), seals)
	if err != nil {
		return nil, o, err
	}
	rand.Read(o.Ack[:])
	r.ack = o.Ack
	return r, o, nil
}

// create makes a memfd of size bytes with a random name, maps it, seals it
// with with (after the mapping: F_SEAL_FUTURE_WRITE would refuse a
// writable one), writes the header with a random cookie, and returns the
// region and the offer's fields but the ack. The region keeps its
// descriptor.
func create(size uint64, with int) (*Region, kvwire.ShmOffer, error) {
	var o kvwire.ShmOffer
	rand.Read(o.Name[:])
	rand.Read(o.Cookie[:])
	fd, err := unix.MemfdCreate(namePrefix+hex.EncodeToString(o.Name[:]), unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, o, fmt.Errorf("memfd_create: %w: %w", err, ErrRegion)
	}
	fail := func(what string, err error) (*Region, kvwire.ShmOffer, error) {
		unix.Close(fd)
		return nil, o, fmt.Errorf("region: %s: %w: %w", what, err, ErrRegion)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return fail("ftruncate", err)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail("mmap", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, with); err != nil {
		unix.Munmap(mem)
		return fail(fmt.Sprintf("seal %#x", with), err)
	}
	r := newRegion(mem, fd, unix.Munmap)
	r.writeHeader(o.Cookie)
	o.PID, o.FD, o.Bytes = uint32(os.Getpid()), uint32(fd), size
	return r, o, nil
}

// CloseFD closes the creator's descriptor (the mapping stays). It is
// idempotent.
func (r *Region) CloseFD() error {
	if r.fd < 0 {
		return nil
	}
	err := unix.Close(r.fd)
	r.fd = -1
	return err
}

// Open maps the region o offers, after checking that it is what the
// offer says (see the package documentation), and writes the ack into
// it. maxBytes bounds the size this side accepts. It keeps no
// descriptor.
func Open(o *kvwire.ShmOffer, maxBytes int) (*Region, error) {
	r, err := open(o, uint64(max(maxBytes, 0)), true, seals)
	if err != nil {
		return nil, err
	}
	r.writeAck(o.Ack)
	return r, nil
}

// OpenSource maps the source region o names read-only, after the checks
// Open makes (but it writes nothing: the caller acks in its own ring,
// Consumer.AckSource). maxBytes bounds the size this side maps. It keeps
// no descriptor.
func OpenSource(o *kvwire.ShmSource, maxBytes uint64) (*Region, error) {
	return open(&o.ShmOffer, maxBytes, false, sourceSeals)
}

// open maps the region o offers, read-write or read-only, if it carries
// at least the seals want.
func open(o *kvwire.ShmOffer, maxBytes uint64, write bool, want int) (*Region, error) {
	if o.Bytes > maxBytes {
		return nil, fmt.Errorf("offered region of %d bytes, this node maps at most %d: %w", o.Bytes, maxBytes, ErrRegion)
	}
	path := fmt.Sprintf("/proc/%d/fd/%d", o.PID, o.FD)
	name := memfdName(o.Name)
	// Look before opening: a wrong pid (another pid namespace) or fd
	// could name a FIFO or a device, which must not be opened.
	if target, err := os.Readlink(path); err != nil || target != name {
		return nil, fmt.Errorf("%s is %q (%v), not the offered memfd (another host, pid namespace or user?): %w", path, target, err, ErrRegion)
	}
	mode, prot := unix.O_RDWR, unix.PROT_READ|unix.PROT_WRITE
	if !write {
		mode, prot = unix.O_RDONLY, unix.PROT_READ
	}
	fd, err := unix.Open(path, mode|unix.O_CLOEXEC|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w: %w", path, err, ErrRegion)
	}
	defer unix.Close(fd)
	if target, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd)); err != nil || target != name {
		return nil, fmt.Errorf("%s changed before it was opened (now %q): %w", path, target, ErrRegion)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("fstat %s: %w: %w", path, err, ErrRegion)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != int64(o.Bytes) || st.Uid != uint32(os.Geteuid()) {
		return nil, fmt.Errorf("%s: mode %#o, %d bytes, owner %d; want a regular file of %d bytes owned by %d: %w", path, st.Mode, st.Size, st.Uid, o.Bytes, os.Geteuid(), ErrRegion)
	}
	got, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil || got&want != want {
		return nil, fmt.Errorf("%s: seals %#x (%v), want at least %#x (shrink, grow, seal; future write for a source): %w", path, got, err, want, ErrRegion)
	}
	mem, err := unix.Mmap(fd, 0, int(o.Bytes), prot, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w: %w", path, err, ErrRegion)
	}
	r := newRegion(mem, -1, unix.Munmap)
	if err := r.checkHeader(o); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// CreateSource makes a source region whose data area holds dataBytes
// (rounded up to whole pages): memory of this process (its KV cache)
// that peers map read-only to copy KV_SRC frames' bytes out of. It keeps
// its descriptor open until Close, so every new connection can be
// offered it (Source.Offer).
func CreateSource(dataBytes int) (*Source, error) {
	pages := (uint64(max(dataBytes, 1)) + kvwire.ShmPageBytes - 1) / kvwire.ShmPageBytes
	size := HeaderBytes + pages*kvwire.ShmPageBytes
	if size > kvwire.ShmSourceBytesMax {
		return nil, fmt.Errorf("create a source region of %d bytes: above %d: %w", size, uint64(kvwire.ShmSourceBytesMax), ErrRegion)
	}
	r, o, err := create(size, sourceSeals)
	if err != nil {
		return nil, fmt.Errorf("source %w", err)
	}
	return &Source{r: r, offer: o, data: r.data[:dataBytes:dataBytes]}, nil
}
