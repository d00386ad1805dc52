//go:build unix

package gguf

import (
	"errors"
	"fmt"
	"math"
	"os"
	"syscall"
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
