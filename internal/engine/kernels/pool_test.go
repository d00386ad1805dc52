package kernels

import (
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestParallelCoversRangeOnce(t *testing.T) {
	for _, threads := range []int{1, 2, 3, 8} {
		p := NewPool(threads)
		for _, n := range []int{0, 1, 2, 5, 31, 32, 33, 1000} {
			counts := make([]atomic.Int32, n)
			var calls atomic.Int32
			p.Parallel(n, func(lo, hi int) {
				calls.Add(1)
				if lo < 0 || hi > n || lo >= hi {
					t.Errorf("threads %d, n %d: fn(%d, %d) is not a non-empty range inside [0, n)", threads, n, lo, hi)
					return
				}
				for i := lo; i < hi; i++ {
					counts[i].Add(1)
				}
			})
			for i := range counts {
				if c := counts[i].Load(); c != 1 {
					t.Errorf("threads %d, n %d: index %d covered %d times, want 1", threads, n, i, c)
					break
				}
			}
			if n == 0 && calls.Load() != 0 {
				t.Errorf("threads %d: Parallel(0) called fn %d times, want 0", threads, calls.Load())
			}
		}
		p.Close()
	}
}

func TestParallelUsesSeveralGoroutines(t *testing.T) {
	// The very first round of a new pool too: a helper that read the round
	// state after the caller had published round 1 used to skip it.
	for _, rounds := range []int{1, 3} {
		p := NewPool(2)
		for r := range rounds {
			// Each chunk waits until another chunk is in flight at the same
			// time, or gives up after a while; with two workers the first two
			// chunks meet.
			var inFlight atomic.Int32
			met := atomic.Bool{}
			p.Parallel(8, func(lo, hi int) {
				inFlight.Add(1)
				defer inFlight.Add(-1)
				deadline := time.Now().Add(2 * time.Second)
				for time.Now().Before(deadline) {
					if met.Load() {
						return // an earlier pair met
					}
					if inFlight.Load() >= 2 {
						met.Store(true)
						return
					}
					runtime.Gosched()
				}
			})
			if !met.Load() {
				t.Errorf("round %d of a 2-thread pool never ran two chunks at once", r+1)
			}
		}
		p.Close()
	}
}

func TestParallelPanicReachesCaller(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	for rep := 0; rep < 3; rep++ {
		func() {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(r.(error).Error(), "boom") {
					t.Errorf("Parallel with a panicking fn: recovered %v, want the panic", r)
				}
			}()
			p.Parallel(100, func(lo, hi int) {
				if lo <= 50 && 50 < hi {
					panic("boom")
				}
			})
		}()
	}
	// The pool still works afterwards.
	var sum atomic.Int64
	p.Parallel(10, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			sum.Add(int64(i))
		}
	})
	if sum.Load() != 45 {
		t.Errorf("Parallel after a panic summed %d, want 45", sum.Load())
	}
}

func TestNewPoolThreads(t *testing.T) {
	for _, c := range []struct{ in, want int }{
		{0, runtime.NumCPU()}, {-3, runtime.NumCPU()}, {1, 1}, {5, 5}, {100000, MaxThreads},
	} {
		p := NewPool(c.in)
		if got := p.Threads(); got != c.want {
			t.Errorf("NewPool(%d).Threads() = %d, want %d", c.in, got, c.want)
		}
		p.Close()
	}
}

// settledGoroutines waits (up to 2s) for goroutines of earlier tests'
// closed pools to exit and returns the count.
func settledGoroutines() int {
	n := runtime.NumGoroutine()
	for i := 0; i < 200; i++ {
		time.Sleep(10 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m == n {
			return m
		}
		n = m
	}
	return n
}

func TestCloseStopsWorkers(t *testing.T) {
	before := settledGoroutines()
	p := NewPool(9)
	if got := runtime.NumGoroutine(); got < before+8 {
		t.Errorf("NewPool(9): %d goroutines, want at least %d", got, before+8)
	}
	p.Close()
	p.Close() // idempotent
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := runtime.NumGoroutine(); got > before {
		t.Errorf("after Close: %d goroutines, want %d as before NewPool", got, before)
	}
	defer func() {
		if recover() == nil {
			t.Errorf("Parallel after Close did not panic")
		}
	}()
	p.Parallel(10, func(lo, hi int) {})
}

func TestAbandonedPoolStopsWorkers(t *testing.T) {
	before := settledGoroutines()
	func() {
		p := NewPool(5)
		p.Parallel(10, func(lo, hi int) {})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if got := runtime.NumGoroutine(); got > before {
		t.Errorf("after dropping an unclosed pool: %d goroutines, want %d", got, before)
	}
}

// TestPoolHelperParksAndWakes: an idle helper parks after polling for a
// while; the next round wakes it (one counted wake-up) and still covers
// its range once; rounds on the caller alone are counted as serial.
func TestPoolHelperParksAndWakes(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	h := &p.sh.helpers[0]
	deadline := time.Now().Add(10 * time.Second)
	for !h.parked.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the idle helper never parked")
		}
		time.Sleep(time.Millisecond)
	}
	before := p.Stats()
	var sum atomic.Int64
	p.Parallel(100, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			sum.Add(int64(i))
		}
	})
	p.Parallel(1, func(lo, hi int) {})
	after := p.Stats()
	if sum.Load() != 4950 {
		t.Errorf("Parallel after the helper parked summed %d, want 4950", sum.Load())
	}
	if got := after.Wakes - before.Wakes; got != 1 {
		t.Errorf("the round after the helper parked counted %d wake-ups, want 1", got)
	}
	if r, s := after.Rounds-before.Rounds, after.Serial-before.Serial; r != 2 || s != 1 {
		t.Errorf("two rounds, one of one chunk: counted %d rounds, %d serial; want 2, 1", r, s)
	}
}
