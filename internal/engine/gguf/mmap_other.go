//go:build !unix

package gguf

import (
	"fmt"
	"io"
	"os"
)

// mapFile reads the whole of fd into memory on systems where Tandem does
// not map files; the release function does nothing.
func mapFile(fd *os.File) ([]byte, func() error, error) {
	data, err := io.ReadAll(fd)
	if err != nil {
		return nil, nil, fmt.Errorf("read: %w", err)
	}
	return data, func() error { return nil }, nil
}

// dropPages does nothing where the file is read into memory.
func dropPages([]byte) {}

// readFile is mapFile where Tandem does not map files.
func readFile(fd *os.File) ([]byte, func() error, error) { return mapFile(fd) }
