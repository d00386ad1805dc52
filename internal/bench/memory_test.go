package bench

import (
	"context"
	"testing"
)

// TestMemory: every pass gives a positive rate, the median lies between
// the slowest pass and the best, the bytes read are the buffer's, and
// options out of range are errors.
func TestMemory(t *testing.T) {
	res, err := Memory(context.Background(), MemoryOptions{Bytes: MemoryMinBytes, Threads: 2, Passes: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.PassGBs) != 3 || res.Bytes != MemoryMinBytes || res.Threads != 2 || res.Method == "" {
		t.Fatalf("%+v", res)
	}
	lo := res.PassGBs[0]
	for _, r := range res.PassGBs {
		if r <= 0 {
			t.Fatalf("pass rate %v in %+v", r, res)
		}
		lo = min(lo, r)
	}
	if res.Median < lo || res.Median > res.Best {
		t.Errorf("median %v outside [%v, %v]", res.Median, lo, res.Best)
	}
	for _, o := range []MemoryOptions{{Bytes: MemoryMinBytes - 1}, {Bytes: MemoryMaxBytes + 1}, {Threads: MemoryMaxThread + 1}, {Passes: -1}, {Passes: MemoryMaxPasses + 1}} {
		if _, err := Memory(context.Background(), o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Memory(ctx, MemoryOptions{Bytes: MemoryMinBytes, Passes: 1}); err == nil {
		t.Error("cancelled context: no error")
	}
}

// TestReadWords: the sum depends on every word, so no load can be dropped.
func TestReadWords(t *testing.T) {
	w := make([]uint64, 64)
	for i := range w {
		w[i] = uint64(i+1) << (i % 60)
	}
	base := readWords(w)
	for i := range w {
		w[i] ^= 1 << 3
		if readWords(w) == base {
			t.Errorf("word %d does not change the sum", i)
		}
		w[i] ^= 1 << 3
	}
}
