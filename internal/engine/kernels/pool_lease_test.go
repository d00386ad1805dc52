package kernels

import (
	"sync/atomic"
	"testing"
)

var leaseSink atomic.Uint64 // keeps the chunks' busy work alive

// fakeLease is a CoreLease with fixed answers that counts its calls.
type fakeLease struct {
	grant             int
	try, revoked      bool
	acquires, granted atomic.Int64 // Acquire calls; TryAcquire calls that gave a core
	tries, releases   atomic.Int64
}

func (f *fakeLease) Acquire()   { f.acquires.Add(1) }
func (f *fakeLease) Grant() int { return f.grant }
func (f *fakeLease) TryAcquire() bool {
	f.tries.Add(1)
	if f.try {
		f.granted.Add(1)
	}
	return f.try
}
func (f *fakeLease) Revoked() bool { return f.revoked }
func (f *fakeLease) Release()      { f.releases.Add(1) }

// TestPoolCoreLease: a pool runs its rounds on the threads its lease
// grants, helpers join only with a core the lease gave them and stop when
// it is revoked, every core taken is given back, and every round still
// covers its whole range.
func TestPoolCoreLease(t *testing.T) {
	for _, c := range []struct {
		name           string
		grant          int
		try, revoked   bool
		maxConc        int64 // the most chunks that may run at once (0: any)
		helpersAllowed bool
	}{
		{"grant 1: the caller alone", 1, true, false, 1, false},
		{"no core free: the caller alone", 4, false, false, 1, true},
		{"cores free", 4, true, false, 4, true},
		{"revoked: helpers give their cores back, the round completes", 4, true, true, 4, true},
		{"grant 1 and revoked: the caller alone pauses between chunks", 1, true, true, 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := NewPool(4)
			defer p.Close()
			l := &fakeLease{grant: c.grant, try: c.try, revoked: c.revoked}
			p.SetCoreLease(l)
			var running, peak atomic.Int64
			const rounds, n = 200, 64
			counts := make([]atomic.Int32, n)
			for range rounds {
				p.Parallel(n, func(lo, hi int) {
					r := running.Add(1)
					for {
						m := peak.Load()
						if r <= m || peak.CompareAndSwap(m, r) {
							break
						}
					}
					x := uint64(lo)
					for k := range 5000 {
						x = x*6364136223846793005 + uint64(k)
					}
					leaseSink.Add(x)
					for i := lo; i < hi; i++ {
						counts[i].Add(1)
					}
					running.Add(-1)
				})
			}
			for i := range counts {
				if got := counts[i].Load(); got != rounds {
					t.Fatalf("element %d computed %d times, want %d", i, got, rounds)
				}
			}
			if c.maxConc > 0 && peak.Load() > c.maxConc {
				t.Errorf("%d chunks ran at once, want at most %d", peak.Load(), c.maxConc)
			}
			if !c.helpersAllowed && l.tries.Load() != 0 {
				t.Errorf("helpers asked for a core %d times with a grant of 1", l.tries.Load())
			}
			// The caller takes a core at every round start and, when revoked,
			// gives it back and takes one again between chunks.
			a, g, r := l.acquires.Load(), l.granted.Load(), l.releases.Load()
			if (!c.revoked && a != rounds) || (c.revoked && a <= rounds) || r != a+g {
				t.Errorf("%d Acquire, %d cores given to helpers, %d Release: want %d rounds (more Acquire when revoked) and every core released", a, g, r, rounds)
			}
		})
	}
}
