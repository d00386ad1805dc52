//go:build !unix

package bench

// words returns n uint64s of heap memory.
func words(n int) ([]uint64, func()) { return make([]uint64, n), func() {} }
