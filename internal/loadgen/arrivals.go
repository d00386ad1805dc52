package loadgen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Arrivals returns the send times of n requests, as offsets from the start of
// the run, for open-loop load at rate requests per second. rate +Inf sends
// every request at offset 0. Otherwise the intervals between sends are drawn
// from a gamma distribution with shape burstiness and scale
// 1/(rate*burstiness), so their mean is 1/rate; burstiness 1 gives Poisson
// arrivals (exponential intervals), smaller values burstier ones, larger
// values more regular ones. As vLLM does, the intervals are then rescaled so
// the last request is sent at n/rate, which keeps the offered load the same
// across seeds. The same seed gives the same schedule.
func Arrivals(n int, rate, burstiness float64, seed uint64) ([]time.Duration, error) {
	switch {
	case n < 0:
		return nil, fmt.Errorf("arrivals: %d requests is negative", n)
	case math.IsNaN(rate) || rate <= 0:
		return nil, fmt.Errorf("arrivals: request rate %v must be positive (or inf)", rate)
	case math.IsNaN(burstiness) || math.IsInf(burstiness, 0) || burstiness <= 0:
		return nil, fmt.Errorf("arrivals: burstiness %v must be a positive number", burstiness)
	}
	out := make([]time.Duration, n)
	if math.IsInf(rate, 1) || n == 0 {
		return out, nil
	}
	iv := Intervals(n, rate, burstiness, seed)
	var sum float64
	for _, v := range iv {
		sum += v
	}
	scale := 1.0
	if sum > 0 {
		scale = float64(n) / rate / sum
	}
	var t float64
	for i, v := range iv {
		t += v * scale
		out[i] = time.Duration(t * float64(time.Second))
	}
	return out, nil
}

// Intervals returns n gaps in seconds drawn from a gamma distribution with
// shape burstiness and scale 1/(rate*burstiness), without any rescaling: the
// raw draws behind Arrivals. rate and burstiness must be positive and finite.
func Intervals(n int, rate, burstiness float64, seed uint64) []float64 {
	r := rand.New(rand.NewPCG(seed, 0x61727269)) // "arri"
	scale := 1 / (rate * burstiness)
	out := make([]float64, n)
	for i := range out {
		if burstiness == 1 {
			out[i] = r.ExpFloat64() * scale
		} else {
			out[i] = gamma(r, burstiness) * scale
		}
	}
	return out
}

// gamma draws from Gamma(shape, 1) by Marsaglia and Tsang's method; a shape
// below 1 is boosted by one and corrected with U^(1/shape).
func gamma(r *rand.Rand, shape float64) float64 {
	if shape < 1 {
		u := r.Float64()
		for u == 0 {
			u = r.Float64()
		}
		return gamma(r, shape+1) * math.Pow(u, 1/shape)
	}
	d := shape - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := r.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := r.Float64()
		if u < 1-0.0331*x*x*x*x {
			return d * v
		}
		if u > 0 && math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}
