package loadgen

import (
	"math"
	"slices"
	"testing"
)

func TestSummarize(t *testing.T) {
	tests := []struct {
		name string
		in   []float64
		want Stats
	}{
		{"empty", nil, Stats{}},
		{"one", []float64{7}, Stats{N: 1, Mean: 7, P50: 7, P90: 7, P99: 7}},
		{"two", []float64{10, 0}, Stats{N: 2, Mean: 5, P50: 5, P90: 9, P99: 9.9}},
		{"one to ten, shuffled", []float64{3, 9, 1, 10, 5, 2, 8, 4, 7, 6}, Stats{N: 10, Mean: 5.5, P50: 5.5, P90: 9.1, P99: 9.91}},
		{"constant", []float64{2, 2, 2, 2}, Stats{N: 4, Mean: 2, P50: 2, P90: 2, P99: 2}},
		{"odd count", []float64{5, 1, 3}, Stats{N: 3, Mean: 3, P50: 3, P90: 4.6, P99: 4.96}},
	}
	for _, tc := range tests {
		in := slices.Clone(tc.in)
		got := Summarize(in)
		if !statsClose(got, tc.want) {
			t.Errorf("Summarize(%s %v) = %+v, want %+v", tc.name, tc.in, got, tc.want)
		}
		if !slices.Equal(in, tc.in) {
			t.Errorf("Summarize(%s) reordered its input to %v", tc.name, in)
		}
	}
}

func TestPercentileBounds(t *testing.T) {
	s := []float64{1, 2, 3, 4}
	for _, tc := range []struct{ p, want float64 }{{0, 1}, {100, 4}, {50, 2.5}, {25, 1.75}} {
		if got := percentile(s, tc.p); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("percentile(%v, %v) = %v, want %v", s, tc.p, got, tc.want)
		}
	}
}

func statsClose(a, b Stats) bool {
	near := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	return a.N == b.N && near(a.Mean, b.Mean) && near(a.P50, b.P50) && near(a.P90, b.P90) && near(a.P99, b.P99)
}
