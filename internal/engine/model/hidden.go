package model

import "tandem/internal/engine/kvcache"

// ForwardHidden is Forward for embedding models built on a decoder (a
// qwen3 file with last-token pooling, as Qwen3-Embedding): it runs the
// same step but returns, per sequence, the hidden states after the output
// norm (llama.cpp's t_embd) instead of logits: Dim floats per token for a
// sequence with AllLogits, else Dim floats of its last token. The slices
// alias the runner's scratch and are valid until the next call.
func (r *Runner) ForwardHidden(kv *kvcache.Cache, seqs []Seq) ([][]float32, error) {
	r.hidden = true
	defer func() { r.hidden = false }()
	return r.Forward(kv, seqs)
}

// hiddenRows splits the normalized output rows (output's gather) by
// sequence.
func (r *Runner) hiddenRows(seqs []Seq, rows []float32) [][]float32 {
	d := r.m.Config.Dim
	res := make([][]float32, len(seqs))
	o := 0
	for si, s := range seqs {
		k := 0
		switch {
		case len(s.Tokens) == 0:
		case s.AllLogits:
			k = len(s.Tokens)
		default:
			k = 1
		}
		res[si] = rows[o*d : (o+k)*d]
		o += k
	}
	return res
}
