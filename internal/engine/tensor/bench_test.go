package tensor

import (
	"math/rand/v2"
	"testing"
)

// benchRow is the row length of the benchmarks: a typical hidden size.
const benchRow = 4096

func benchInput() []float32 {
	r := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, benchRow)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

func benchQuantize(b *testing.B, typ Type) {
	x := benchInput()
	rb, err := typ.RowBytes(len(x))
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]byte, rb)
	b.SetBytes(int64(4 * len(x)))
	for b.Loop() {
		if err := Quantize(typ, x, dst); err != nil {
			b.Fatal(err)
		}
	}
}

func benchDequantize(b *testing.B, typ Type) {
	x := benchInput()
	rb, err := typ.RowBytes(len(x))
	if err != nil {
		b.Fatal(err)
	}
	q := make([]byte, rb)
	if err := Quantize(typ, x, q); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(4 * len(x)))
	for b.Loop() {
		if err := Dequantize(typ, q, x); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkQuantizeF16(b *testing.B)    { benchQuantize(b, F16) }
func BenchmarkQuantizeBF16(b *testing.B)   { benchQuantize(b, BF16) }
func BenchmarkQuantizeQ8_0(b *testing.B)   { benchQuantize(b, Q8_0) }
func BenchmarkQuantizeQ4_0(b *testing.B)   { benchQuantize(b, Q4_0) }
func BenchmarkQuantizeQ4_1(b *testing.B)   { benchQuantize(b, Q4_1) }
func BenchmarkQuantizeQ5_0(b *testing.B)   { benchQuantize(b, Q5_0) }
func BenchmarkQuantizeQ5_1(b *testing.B)   { benchQuantize(b, Q5_1) }
func BenchmarkQuantizeQ8_K(b *testing.B)   { benchQuantize(b, Q8_K) }
func BenchmarkQuantizeQ4_K(b *testing.B)   { benchQuantize(b, Q4_K) }
func BenchmarkQuantizeQ5_K(b *testing.B)   { benchQuantize(b, Q5_K) }
func BenchmarkQuantizeQ6_K(b *testing.B)   { benchQuantize(b, Q6_K) }
func BenchmarkQuantizeQ2_K(b *testing.B)   { benchQuantize(b, Q2_K) }
func BenchmarkQuantizeQ3_K(b *testing.B)   { benchQuantize(b, Q3_K) }
func BenchmarkQuantizeIQ4_NL(b *testing.B) { benchQuantize(b, IQ4_NL) }
func BenchmarkQuantizeIQ4_XS(b *testing.B) { benchQuantize(b, IQ4_XS) }
func BenchmarkQuantizeMXFP4(b *testing.B)  { benchQuantize(b, MXFP4) }

func BenchmarkDequantizeF32(b *testing.B)    { benchDequantize(b, F32) }
func BenchmarkDequantizeF16(b *testing.B)    { benchDequantize(b, F16) }
func BenchmarkDequantizeBF16(b *testing.B)   { benchDequantize(b, BF16) }
func BenchmarkDequantizeQ8_0(b *testing.B)   { benchDequantize(b, Q8_0) }
func BenchmarkDequantizeQ4_0(b *testing.B)   { benchDequantize(b, Q4_0) }
func BenchmarkDequantizeQ4_1(b *testing.B)   { benchDequantize(b, Q4_1) }
func BenchmarkDequantizeQ5_0(b *testing.B)   { benchDequantize(b, Q5_0) }
func BenchmarkDequantizeQ5_1(b *testing.B)   { benchDequantize(b, Q5_1) }
func BenchmarkDequantizeQ4_K(b *testing.B)   { benchDequantize(b, Q4_K) }
func BenchmarkDequantizeQ5_K(b *testing.B)   { benchDequantize(b, Q5_K) }
func BenchmarkDequantizeQ6_K(b *testing.B)   { benchDequantize(b, Q6_K) }
func BenchmarkDequantizeQ8_K(b *testing.B)   { benchDequantize(b, Q8_K) }
func BenchmarkDequantizeQ2_K(b *testing.B)   { benchDequantize(b, Q2_K) }
func BenchmarkDequantizeQ3_K(b *testing.B)   { benchDequantize(b, Q3_K) }
func BenchmarkDequantizeIQ4_NL(b *testing.B) { benchDequantize(b, IQ4_NL) }
func BenchmarkDequantizeIQ4_XS(b *testing.B) { benchDequantize(b, IQ4_XS) }
func BenchmarkDequantizeMXFP4(b *testing.B)  { benchDequantize(b, MXFP4) }
