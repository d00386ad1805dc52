//go:build unix

package gguf

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapFile maps the whole of fd read-only and returns the bytes and a
// function that unmaps them.
func mapFile(fd *os.File) ([]byte, func() error, error) {
	st, err := fd.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("stat: %w", err)
	}
	size := st.Size()
	switch {
	case !st.Mode().IsRegular():
		return nil, nil, errors.New("not a regular file")
	case size == 0: // nothing to map; Parse reports the empty file
		return []byte{}, func() error { return nil }, nil
	case size > math.MaxInt:
		return nil, nil, fmt.Errorf("file of %d bytes is too large to map", size)
	}
	data, err := syscall.Mmap(int(fd.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap: %w", err)
	}
	unmap := func() error {
		if err := syscall.Munmap(data); err != nil {
			return fmt.Errorf("munmap: %w", err)
		}
		return nil
	}
	return data, unmap, nil
}

// hugePage is the size transparent huge pages come in on amd64 and arm64
// (with 4 KiB base pages); readFile aligns its buffer to it.
const hugePage = 2 << 20

// readFile reads the whole of fd into a private anonymous mapping aligned
// to hugePage, with huge pages advised (the advice is ignored where the
// system has none), made read-only once filled. The release function
// unmaps it.
func readFile(fd *os.File) ([]byte, func() error, error) {
	st, err := fd.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("stat: %w", err)
	}
	size := st.Size()
	switch {
	case !st.Mode().IsRegular():
		return nil, nil, errors.New("not a regular file")
	case size == 0:
		return []byte{}, func() error { return nil }, nil
	case size > math.MaxInt-hugePage:
		return nil, nil, fmt.Errorf("file of %d bytes is too large to read into memory", size)
	}
	n := int(size)
	mem, err := unix.Mmap(-1, 0, n+hugePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, nil, fmt.Errorf("allocate %d bytes: %w", n, err)
	}
	release := func() error {
		if err := unix.Munmap(mem); err != nil {
			return fmt.Errorf("munmap: %w", err)
		}
		return nil
	}
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(mem))) & (hugePage - 1))
	data := mem[off : off+n : off+n]
	_ = unix.Madvise(data, unix.MADV_HUGEPAGE)
	if _, err := io.ReadFull(fd, data); err != nil {
		release()
		return nil, nil, fmt.Errorf("read: %w", err)
	}
	if err := unix.Mprotect(mem, unix.PROT_READ); err != nil {
		release()
		return nil, nil, fmt.Errorf("mprotect: %w", err)
	}
	return data, release, nil
}

// dropPages tells the kernel that this process no longer needs the pages
// lying wholly inside b, a part of a file mapping: they leave its resident
// set (the page cache may keep them) and are read from the file again if
// touched. Errors are ignored: the advice only saves memory.
func dropPages(b []byte) {
	ps := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := (start + ps - 1) &^ (ps - 1)
	hi := (start + uintptr(len(b))) &^ (ps - 1)
	if len(b) == 0 || hi <= lo {
		return
	}
	_ = unix.Madvise(unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), lo-start)), hi-lo), unix.MADV_DONTNEED)
}
