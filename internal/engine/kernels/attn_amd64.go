//go:build amd64

package kernels

// archAttnTiles returns level l's block assembly for attention (nil at
// Generic). AVX2 has no softmax step of its own (the Go one calls the AVX2
// exp).
func archAttnTiles(l Level) *attnTileAsm {
	switch l {
	case Generic:
		return nil
	case AVX2:
		return &attnTileAsm{scoresF16: attnScoresF16AVX2, scoresF32: attnScoresF32AVX2,
			accumF16: attnAccumF16AVX2, accumF32: attnAccumF32AVX2}
	}
	return &attnTileAsm{scoresF16: attnScoresF16AVX512, scoresF32: attnScoresF32AVX512,
		accumF16: attnAccumF16AVX512, accumF32: attnAccumF32AVX512,
		softmaxStep: func(x []float32, m float32) (float32, float32) {
			return attnSoftmaxStepAVX512(&x[0], len(x), m, &expConsts)
		}}
}

//go:noescape
func attnScoresF16AVX512(q *float32, qs int, k *uint16, ks, nk, d int, scale float32, s *float32, ss int)

//go:noescape
func attnScoresF32AVX512(q *float32, qs int, k *float32, ks, nk, d int, scale float32, s *float32, ss int)

//go:noescape
func attnAccumF16AVX512(p *float32, ps int, v *uint16, vs, nk, d int, o *float32, os int)

//go:noescape
func attnAccumF32AVX512(p *float32, ps int, v *float32, vs, nk, d int, o *float32, os int)

//go:noescape
func attnSoftmaxStepAVX512(x *float32, n int, m float32, c *[13]float32) (mNew, sum float32)

//go:noescape
func attnScoresF16AVX2(q *float32, qs int, k *uint16, ks, nk, d int, scale float32, s *float32, ss int)

//go:noescape
func attnScoresF32AVX2(q *float32, qs int, k *float32, ks, nk, d int, scale float32, s *float32, ss int)

//go:noescape
func attnAccumF16AVX2(p *float32, ps int, v *uint16, vs, nk, d int, o *float32, os int)

//go:noescape
func attnAccumF32AVX2(p *float32, ps int, v *float32, vs, nk, d int, o *float32, os int)
