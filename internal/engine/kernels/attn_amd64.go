//go:build amd64

package kernels

// archAttnTiles returns level l's block assembly for attention (nil at
// Generic; AVX2 has the value kernels only, its score tile could not sum in
// dotF16AVX2's order).
func archAttnTiles(l Level) *attnTileAsm {
	switch l {
	case Generic:
		return nil
	case AVX2:
		return &attnTileAsm{accumF16: attnAccumF16AVX2, accumF32: attnAccumF32AVX2}
	}
	return &attnTileAsm{scoresF16: attnScoresF16AVX512, accumF16: attnAccumF16AVX512, accumF32: attnAccumF32AVX512,
		softmax: func(x []float32) { softmaxAVX512(&x[0], len(x), &expConsts) }}
}

//go:noescape
func attnScoresF16AVX512(q *float32, qs int, k *uint16, ks, nk, d int, scale float32, s *float32, ss int)

//go:noescape
func attnAccumF16AVX512(p *float32, ps int, v *uint16, vs, nk, d int, o *float32, os int)

//go:noescape
func attnAccumF32AVX512(p *float32, ps int, v *float32, vs, nk, d int, o *float32, os int)

//go:noescape
func attnAccumF16AVX2(p *float32, ps int, v *uint16, vs, nk, d int, o *float32, os int)

//go:noescape
func attnAccumF32AVX2(p *float32, ps int, v *float32, vs, nk, d int, o *float32, os int)

//go:noescape
func softmaxAVX512(x *float32, n int, c *[13]float32)
