package kernels

import (
	"encoding/binary"
	"math"
)

// The float tiles read every row's whole tile data (32 bytes per element),
// so past L1 (F16) or L2 bandwidth (BF16, whose old path is one token at a
// time) they lose to the old paths: one-thread MatMul of 512 tokens,
// cpu-ns/op, old against tile: F16 1024 wide 24.0 against 18.6 ms, 1536
// 55.5 against 56.9, 5632 267 against 438; BF16 2048 134 against 107, 5632
// 385 against 640. maxF8F16 and maxF8BF16 are the widest rows that take
// them.
const (
	maxF8F16  = 1024
	maxF8BF16 = 2048
)

// prepF8Bytes returns the bytes of an eight-token F16 or BF16 tile's data
// for rows of n elements: the eight tokens' activations as float32, each
// 16-element group g of the eight tokens side by side (token t's at
// 512·g + 64·t), then, for the n%16 elements after the last group, token
// t's at 512·(n/16) + 4·(n%16)·t.
func prepF8Bytes(n int) int { return 8 * 4 * n }

// prepareTileF8 writes the eight-token tile data of the eight activation
// rows a (row stride arb, n elements each, converted by widen: f16 or
// bfloat16 to float32, exact) into dst (prepF8Bytes(n) bytes).
func prepareTileF8(a []byte, arb, n int, dst []byte, widen func([]byte) float32) {
	g, rest := n/16, n%16
	for t := 0; t < 8; t++ {
		row := a[t*arb : t*arb+2*n]
		for i := 0; i < 16*g; i++ {
			binary.LittleEndian.PutUint32(dst[512*(i/16)+64*t+4*(i%16):], math.Float32bits(widen(row[2*i:])))
		}
		for j := 0; j < rest; j++ {
			binary.LittleEndian.PutUint32(dst[512*g+4*(rest*t+j):], math.Float32bits(widen(row[2*(16*g+j):])))
		}
	}
}
