package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
	"unsafe"
)

// Limits of MemoryOptions.
const (
	MemoryMinBytes  = 64 << 20 // well above any last-level cache of today's CPUs
	MemoryMaxBytes  = 64 << 30
	MemoryMaxPasses = 100
	MemoryMaxThread = 256
)

// MemoryOptions configures a streaming-bandwidth measurement.
type MemoryOptions struct {
	Bytes   int // buffer size; 0: 2 GiB
	Threads int // goroutines reading it, each a contiguous share; 0: 1
	Passes  int // timed passes over the whole buffer; 0: 5
}

// MemoryResult is what a streaming-bandwidth measurement saw: one rate
// per pass, their median and best, in 10^9 bytes per second.
type MemoryResult struct {
	Bytes   int       `json:"bytes"`
	Threads int       `json:"threads"`
	Method  string    `json:"method"`
	PassGBs []float64 `json:"pass_gb_s"`
	Median  float64   `json:"median_gb_s"`
	Best    float64   `json:"best_gb_s"`
}

// memoryMethod says how Memory measures, for its result and its users.
const memoryMethod = "read-only: each thread sums its contiguous share of one buffer (anonymous memory, huge pages advised, as --mmap=false holds weights) as uint64 words, " +
	"8 independent loads per 64-byte line; the buffer is written once and read once untimed first; rate = buffer bytes / wall time of a pass"

// Memory measures the rate at which Threads goroutines can stream a
// buffer of Bytes from memory: the bandwidth that bounds decode, whose
// every step reads the active weights once. ctx is checked between passes.
func Memory(ctx context.Context, o MemoryOptions) (*MemoryResult, error) {
	if o.Bytes == 0 {
		o.Bytes = 2 << 30
	}
	o.Threads = max(o.Threads, 1)
	if o.Passes == 0 {
		o.Passes = 5
	}
	switch {
	case o.Bytes < MemoryMinBytes || o.Bytes > MemoryMaxBytes:
		return nil, fmt.Errorf("bench: memory buffer of %d bytes: use %d to %d", o.Bytes, MemoryMinBytes, MemoryMaxBytes)
	case o.Threads > MemoryMaxThread:
		return nil, fmt.Errorf("bench: %d memory threads: at most %d", o.Threads, MemoryMaxThread)
	case o.Passes < 1 || o.Passes > MemoryMaxPasses:
		return nil, fmt.Errorf("bench: %d memory passes: use 1 to %d", o.Passes, MemoryMaxPasses)
	}
	buf, free := words(o.Bytes / 8)
	defer free()
	for i := range buf {
		buf[i] = uint64(i) * 0x9e3779b97f4a7c15
	}
	per := len(buf) / o.Threads &^ 7
	parts := make([][]uint64, o.Threads)
	for i := range parts {
		parts[i] = buf[i*per : (i+1)*per]
	}
	sums := make([]uint64, o.Threads)
	pass := func() time.Duration {
		var wg sync.WaitGroup
		start := time.Now()
		for i, p := range parts {
			wg.Go(func() { sums[i] = readWords(p) })
		}
		wg.Wait()
		return time.Since(start)
	}
	pass() // untimed: faults the pages in and warms the TLB walk caches
	read := per * o.Threads * int(unsafe.Sizeof(uint64(0)))
	res := &MemoryResult{Bytes: read, Threads: o.Threads, Method: memoryMethod}
	for range o.Passes {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		res.PassGBs = append(res.PassGBs, float64(read)/pass().Seconds()/1e9)
	}
	sorted := slices.Sorted(slices.Values(res.PassGBs))
	res.Best = sorted[len(sorted)-1]
	if n := len(sorted); n%2 == 1 {
		res.Median = sorted[n/2]
	} else {
		res.Median = (sorted[n/2-1] + sorted[n/2]) / 2
	}
	return res, nil
}

// readWords reads every word of w (a multiple of 8 long) with eight
// independent loads per 64-byte line and returns a value depending on all
// of them, so the compiler cannot drop the loads.
func readWords(w []uint64) uint64 {
	var a, b, c, d uint64
	for i := 0; i+8 <= len(w); i += 8 {
		l := w[i : i+8 : i+8]
		a += l[0] ^ l[4]
		b += l[1] ^ l[5]
		c += l[2] ^ l[6]
		d += l[3] ^ l[7]
	}
	return a ^ b ^ c ^ d
}
