package model

import (
	"fmt"
	"math"
)

// Pooling is how an embedding model turns a sequence's per-token hidden
// states into one vector: {arch}.pooling_type, with llama.cpp's values.
type Pooling int

// Pooling types, numbered as llama.cpp's enum llama_pooling_type.
const (
	PoolNone Pooling = 0 // per-token output; not an embedding model for Tandem
	PoolMean Pooling = 1 // the mean of every token's hidden state
	PoolCLS  Pooling = 2 // the first token's ([CLS])
	PoolLast Pooling = 3 // the last token's (decoder embedding models such as Qwen3-Embedding)
	PoolRank Pooling = 4 // a reranker's score head; not supported
)

// String names the pooling type.
func (p Pooling) String() string {
	switch p {
	case PoolNone:
		return "none"
	case PoolMean:
		return "mean"
	case PoolCLS:
		return "cls"
	case PoolLast:
		return "last"
	case PoolRank:
		return "rank"
	}
	return fmt.Sprintf("pooling(%d)", int(p))
}

// PoolingFromMetadata reads {arch}.pooling_type: PoolNone when the key is
// absent, an error for a value Tandem does not pool by (rank, unknown).
func PoolingFromMetadata(md Metadata, arch string) (Pooling, error) {
	v, ok := md.Int(arch + ".pooling_type")
	if !ok {
		return PoolNone, nil
	}
	switch p := Pooling(v); p {
	case PoolNone, PoolMean, PoolCLS, PoolLast:
		return p, nil
	case PoolRank:
		return p, fmt.Errorf("model metadata: %s.pooling_type = rank (a reranker) is not supported; Tandem serves embedding models with mean, cls or last pooling", arch)
	}
	return PoolNone, fmt.Errorf("model metadata: %s.pooling_type = %d is unknown (want 0 none, 1 mean, 2 cls or 3 last)", arch, v)
}

// PoolRows pools one sequence's hidden states (n rows of dim floats,
// row-major) into dst (dim floats) as p says. It summs the mean in float64
// and divides once, as ggml's pooling matrix product does within rounding.
func PoolRows(p Pooling, rows []float32, n, dim int, dst []float32) {
	switch p {
	case PoolCLS:
		copy(dst, rows[:dim])
	case PoolLast:
		copy(dst, rows[(n-1)*dim:n*dim])
	default: // mean
		for i := range dim {
			var s float64
			for t := range n {
				s += float64(rows[t*dim+i])
			}
			dst[i] = float32(s / float64(n))
		}
	}
}

// Normalize scales v to unit Euclidean length in place (a zero vector stays
// zero), summing squares in float64 as llama.cpp's common_embd_normalize.
func Normalize(v []float32) {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 {
		return
	}
	inv := 1 / math.Sqrt(s)
	for i, x := range v {
		v[i] = float32(float64(x) * inv)
	}
}
