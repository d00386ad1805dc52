package kernels

import "math"

// expConsts are ExpF32's constants as float32, in the order the assembly
// reads them: cutoff, log2e, 0.5, ln2Hi, ln2Lo, 1/720, 1/120, 1/24, 1/6,
// 0.5, 1, 1, then SwiGLU's clamp.
var expConsts = [13]float32{-87.3, 1.44269504088896341, 0.5, 0.693145751953125, 1.428606765330187045e-06,
	1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1, 1, siluClamp}

// ExpF32 returns e^x in float32 precision for x <= 0 (softmax arguments
// after subtracting the maximum), 0 below -87.3. It reduces x = k·ln2 + r
// with |r| <= ln2/2 and evaluates a degree-6 polynomial for e^r (error
// below 2 ulp of float32); every operation is one float32 operation, so the
// vector forms (ExpShiftF32) give the same bits.
func ExpF32(x float32) float32 {
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
	p := float32(1.0 / 720)
	p = p*r + 1.0/120
	p = p*r + 1.0/24
	p = p*r + 1.0/6
	p = p*r + 0.5
	p = p*r + 1
	p = p*r + 1
	return p * math.Float32frombits(uint32(int32(k)+127)<<23)
}

// expShiftGo sets x[i] = ExpF32(x[i] - m).
func expShiftGo(x []float32, m float32) {
	for i, v := range x {
		x[i] = ExpF32(v - m)
	}
}

// ExpShiftF32 sets x[i] = ExpF32(x[i] - m) for every i, bit for bit (m is
// a row's maximum, so every argument is <= 0).
func ExpShiftF32(x []float32, m float32) {
	active.Load().expShift(x, m)
}

// siluClamp bounds SwiGLU's exp argument so that ExpF32 stays finite
// (e^88 < MaxFloat32); for gates below -siluClamp silu is taken as 0.
const siluClamp = 88

// swigluGo sets g[i] = silu(g[i])·u[i], silu(v) = v/(1+e^-v).
func swigluGo(g, u []float32) {
	u = u[:len(g)]
	for i, v := range g {
		x := -v
		if x > siluClamp { // silu(v) is 0 to float32 precision (|v|·e^v < 1e-36)
			x, v = siluClamp, 0
		}
		g[i] = v / (1 + ExpF32(x)) * u[i]
	}
}

// SwiGLU sets g[i] = silu(g[i])·u[i] for every i (the gated feed-forward
// activation), silu(v) = v/(1+e^-v) with ExpF32; the vector forms give the
// same bits. len(u) must be at least len(g).
func SwiGLU(g, u []float32) {
	active.Load().swiglu(g, u[:len(g)])
}
