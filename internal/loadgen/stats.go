package loadgen

import (
	"math"
	"slices"
)

// Stats summarizes one latency distribution in milliseconds.
type Stats struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
}

// Summarize returns the count, mean and 50th, 90th and 99th percentiles of
// samples (which it does not modify). Percentiles interpolate linearly
// between the closest ranks; an empty input gives all zeros.
func Summarize(samples []float64) Stats {
	if len(samples) == 0 {
		return Stats{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	var sum float64
	for _, v := range s {
		sum += v
	}
	return Stats{
		N:    len(s),
		Mean: sum / float64(len(s)),
		P50:  percentile(s, 50),
		P90:  percentile(s, 90),
		P99:  percentile(s, 99),
	}
}

// percentile returns the p-th percentile (0..100) of the sorted, non-empty
// slice s, interpolating linearly between the two closest ranks.
func percentile(s []float64, p float64) float64 {
	if len(s) == 1 {
		return s[0]
	}
	pos := p / 100 * float64(len(s)-1)
	lo := int(math.Floor(pos))
	if lo >= len(s)-1 {
		return s[len(s)-1]
	}
	if lo < 0 {
		return s[0]
	}
	frac := pos - float64(lo)
	return s[lo] + frac*(s[lo+1]-s[lo])
}
