package model

import "math"

// expf returns e^x in float32 precision for x <= 0 (softmax arguments after
// subtracting the maximum), about 3x faster than math.Exp in float64. It
// reduces x = k·ln2 + r with |r| <= ln2/2 and evaluates a degree-6
// polynomial for e^r (error below 2 ulp of float32, measured in
// TestExpf); ggml's vectorized softmax uses an approximation of the same
// accuracy class.
func expf(x float32) float32 {
	if x < -87.3 {
		return 0
	}
	const (
		ln2Hi = 0.693145751953125
		ln2Lo = 1.428606765330187045e-06
		log2e = 1.44269504088896341
	)
	k := float32(math.Floor(float64(x*log2e + 0.5)))
	r := x - k*ln2Hi - k*ln2Lo
	// e^r ≈ 1 + r + r²/2! + ... + r⁶/6! (Horner)
	p := float32(1.0 / 720)
	p = p*r + 1.0/120
	p = p*r + 1.0/24
	p = p*r + 1.0/6
	p = p*r + 0.5
	p = p*r + 1
	p = p*r + 1
	return p * math.Float32frombits(uint32(int32(k)+127)<<23)
}
