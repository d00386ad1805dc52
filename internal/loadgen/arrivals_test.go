package loadgen

import (
	"math"
	"testing"
	"time"
)

// meanCV returns the mean and coefficient of variation of xs.
func meanCV(xs []float64) (float64, float64) {
	var s float64
	for _, x := range xs {
		s += x
	}
	m := s / float64(len(xs))
	var v float64
	for _, x := range xs {
		v += (x - m) * (x - m)
	}
	v /= float64(len(xs) - 1)
	return m, math.Sqrt(v) / m
}

func TestIntervalsMeanAndShape(t *testing.T) {
	const n = 200000
	for _, tc := range []struct{ rate, burst float64 }{{2, 1}, {10, 0.25}, {0.5, 4}, {5, 2}} {
		iv := Intervals(n, tc.rate, tc.burst, 7)
		m, cv := meanCV(iv)
		// The mean of a gamma(k, 1/(R k)) is 1/R and its coefficient of
		// variation 1/sqrt(k); with 200k samples both are within 2%.
		if want := 1 / tc.rate; math.Abs(m-want) > 0.02*want {
			t.Errorf("rate %v burstiness %v: mean interval %.5f, want %.5f +-2%%", tc.rate, tc.burst, m, want)
		}
		if want := 1 / math.Sqrt(tc.burst); math.Abs(cv-want) > 0.03*want {
			t.Errorf("rate %v burstiness %v: coefficient of variation %.4f, want %.4f +-3%%", tc.rate, tc.burst, cv, want)
		}
		for i, v := range iv {
			if v < 0 || math.IsNaN(v) {
				t.Fatalf("interval %d is %v", i, v)
			}
		}
	}
}

func TestArrivalsRescaledSeededAndSorted(t *testing.T) {
	a, err := Arrivals(1000, 4, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := a[len(a)-1], 250*time.Second; got < want-time.Millisecond || got > want+time.Millisecond {
		t.Errorf("last arrival %v, want %v (n/rate)", got, want)
	}
	for i := 1; i < len(a); i++ {
		if a[i] < a[i-1] {
			t.Fatalf("arrival %d (%v) before arrival %d (%v)", i, a[i], i-1, a[i-1])
		}
	}
	b, _ := Arrivals(1000, 4, 1, 3)
	c, _ := Arrivals(1000, 4, 1, 4)
	same, differ := true, false
	for i := range a {
		same = same && a[i] == b[i]
		differ = differ || a[i] != c[i]
	}
	if !same || !differ {
		t.Errorf("same seed gives the same schedule: %v; another seed differs: %v", same, differ)
	}
	inf, err := Arrivals(5, math.Inf(1), 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range inf {
		if v != 0 {
			t.Errorf("rate inf: arrival %d at %v, want 0", i, v)
		}
	}
	for _, bad := range []struct{ rate, burst float64 }{{0, 1}, {-1, 1}, {math.NaN(), 1}, {1, 0}, {1, math.Inf(1)}} {
		if _, err := Arrivals(3, bad.rate, bad.burst, 0); err == nil {
			t.Errorf("Arrivals(rate %v, burstiness %v) gave no error", bad.rate, bad.burst)
		}
	}
}
