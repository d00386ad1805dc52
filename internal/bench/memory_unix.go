//go:build unix

package bench

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePage is the transparent huge page size of amd64 and arm64 with 4 KiB
// base pages.
const hugePage = 2 << 20

// words returns n uint64s of anonymous memory aligned to hugePage with
// huge pages advised (as gguf.OpenInMemory holds model weights; the advice
// is ignored where the system has none), and the function that frees
// them; ordinary heap memory if the mapping fails.
func words(n int) ([]uint64, func()) {
	mem, err := unix.Mmap(-1, 0, n*8+hugePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return make([]uint64, n), func() {}
	}
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(mem))) & (hugePage - 1))
	b := mem[off : off+n*8]
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), n), func() { _ = unix.Munmap(mem) }
}
