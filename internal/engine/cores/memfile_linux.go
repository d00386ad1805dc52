package cores

import (
	"os"

	"golang.org/x/sys/unix"
)

// memFile returns a new anonymous memory file (memfd), closed on exec
// unless passed on explicitly.
func memFile(name string) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}
