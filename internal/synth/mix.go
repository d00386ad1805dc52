package synth

import (
	"fmt"
	"strings"

	"tandem/internal/engine/tensor"
)

// The weight type of each matrix. A file's type (Options.Type) names one
// of llama.cpp's file types (llama_ftype): the legacy and float types give
// every matrix that type; the K-quant, IQ4 and MXFP4 ones are mixes, each
// matrix's type chosen as llama.cpp's llama_model_quantize chooses it
// (llama_tensor_get_type_impl in src/llama-quant.cpp, without an
// importance matrix, for a dense model of a non-Falcon architecture).
// Options.Pure gives every matrix the file's type instead, as
// llama-quantize --pure does.

// category is a matrix's role, as llama.cpp's tensor_category.
type category int

const (
	catTokenEmbd category = iota
	catOutput
	catAttnQ
	catAttnK
	catAttnV // attn_v, and phi3's fused attn_qkv (llama.cpp treats both alike)
	catAttnOut
	catFFNGate
	catFFNUp
	catFFNDown
	catRouter // a MoE router, ffn_gate_inp: always F32, as llama-quantize leaves it
)

// fileTypes maps the accepted file types to general.file_type
// (llama_ftype) and to the names `tandem model synth --type` takes.
var fileTypes = map[tensor.Type]struct {
	ftype uint32
	names []string
}{
	tensor.F32:    {0, []string{"f32"}},
	tensor.F16:    {1, []string{"f16"}},
	tensor.Q4_0:   {2, []string{"q4_0"}},
	tensor.Q4_1:   {3, []string{"q4_1"}},
	tensor.Q8_0:   {7, []string{"q8_0"}},
	tensor.Q5_0:   {8, []string{"q5_0"}},
	tensor.Q5_1:   {9, []string{"q5_1"}},
	tensor.Q2_K:   {10, []string{"q2_k"}},               // LLAMA_FTYPE_MOSTLY_Q2_K
	tensor.Q3_K:   {12, []string{"q3_k", "q3_k_m"}},     // LLAMA_FTYPE_MOSTLY_Q3_K_M
	tensor.Q4_K:   {15, []string{"q4_k", "q4_k_m"}},     // LLAMA_FTYPE_MOSTLY_Q4_K_M
	tensor.IQ4_NL: {25, []string{"iq4_nl"}},             // LLAMA_FTYPE_MOSTLY_IQ4_NL
	tensor.IQ4_XS: {30, []string{"iq4_xs"}},             // LLAMA_FTYPE_MOSTLY_IQ4_XS
	tensor.MXFP4:  {38, []string{"mxfp4", "mxfp4_moe"}}, // LLAMA_FTYPE_MOSTLY_MXFP4_MOE
}

// FileTypeNames lists the names ParseFileType accepts, in a fixed order.
var FileTypeNames = []string{"f32", "f16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1",
	"q4_k", "q4_k_m", "q3_k", "q3_k_m", "q2_k", "iq4_xs", "iq4_nl", "mxfp4", "mxfp4_moe"}

// ParseFileType returns the file type (Options.Type) named name: a float
// or legacy type (every matrix that type), or one of llama.cpp's mixes
// q4_k (= q4_k_m), q3_k (= q3_k_m), q2_k, iq4_xs, iq4_nl and mxfp4 (=
// mxfp4_moe; see Options.Type).
func ParseFileType(name string) (tensor.Type, error) {
	for t, ft := range fileTypes {
		for _, n := range ft.names {
			if n == strings.ToLower(name) {
				return t, nil
			}
		}
	}
	return 0, fmt.Errorf("unknown synth type %q (want one of %s)", name, strings.Join(FileTypeNames, ", "))
}

// isMix reports whether a file of type typ mixes matrix types.
func isMix(typ tensor.Type) bool {
	switch typ {
	case tensor.Q2_K, tensor.Q3_K, tensor.Q4_K, tensor.IQ4_NL, tensor.IQ4_XS, tensor.MXFP4:
		return true
	}
	return false
}

// weightTypes returns every type a matrix may get in a file of type typ.
func weightTypes(typ tensor.Type, pure bool) []tensor.Type {
	if pure || !isMix(typ) {
		return []tensor.Type{typ}
	}
	switch typ {
	case tensor.Q2_K:
		return []tensor.Type{tensor.Q2_K, tensor.Q3_K, tensor.Q4_K, tensor.Q6_K}
	case tensor.Q3_K:
		return []tensor.Type{tensor.Q3_K, tensor.Q4_K, tensor.Q5_K, tensor.Q6_K}
	case tensor.Q4_K:
		return []tensor.Type{tensor.Q4_K, tensor.Q6_K}
	case tensor.MXFP4:
		return []tensor.Type{tensor.MXFP4, tensor.Q8_0}
	}
	return []tensor.Type{typ, tensor.Q5_K, tensor.Q6_K} // IQ4_NL, IQ4_XS
}

// useMoreBits is llama.cpp's rule for the layers whose attn_v and ffn_down
// get Q6_K in a Q4_K_M file: the first and last eighth, and every third
// layer in between.
func useMoreBits(layer, layers int) bool {
	return layer < layers/8 || layer >= 7*layers/8 || (layer-layers/8)%3 == 2
}

// matrixType returns the type of a matrix of category cat in layer layer
// (ignored for token_embd and output) of a file of type typ.
//
// The mixes, for a dense model without an importance matrix (n_gqa =
// Heads/KVHeads; "the first sixteenth" etc. count layers):
//   - Q4_K_M: Q6_K for output, and for attn_v and ffn_down of the
//     useMoreBits layers.
//   - Q3_K_M: Q6_K output; attn_v Q5_K in layers 0 and 1, else Q4_K;
//     ffn_down Q5_K in the first sixteenth, else Q4_K; attn_output Q4_K.
//   - Q2_K: Q6_K output; attn_v Q4_K when n_gqa >= 4, else Q3_K; ffn_down
//     and attn_output Q3_K.
//   - IQ4_XS, IQ4_NL: Q6_K output; attn_v Q5_K when n_gqa >= 4; ffn_down
//     Q5_K in the first eighth.
//   - MXFP4_MOE puts MXFP4 on expert tensors only and Q8_0 on the rest, so
//     a dense model would hold no MXFP4 at all: here the feed-forward
//     matrices, which the experts replace in gpt-oss, are MXFP4, and the
//     rest Q8_0, as MXFP4_MOE makes them.
//
// Every other matrix has the file's type. A tied token_embd (no
// output.weight) is typed as the output, as llama.cpp does.
func matrixType(typ tensor.Type, pure bool, cat category, layer int, c Config) tensor.Type {
	if cat == catRouter {
		return tensor.F32
	}
	if pure || !isMix(typ) {
		return typ
	}
	if typ == tensor.MXFP4 {
		if cat == catFFNGate || cat == catFFNUp || cat == catFFNDown {
			return tensor.MXFP4
		}
		return tensor.Q8_0
	}
	if cat == catOutput || cat == catTokenEmbd && c.Tied {
		return tensor.Q6_K
	}
	gqa4 := c.KVHeads > 0 && c.Heads/c.KVHeads >= 4
	iq4 := typ == tensor.IQ4_NL || typ == tensor.IQ4_XS
	switch cat {
	case catAttnV:
		switch {
		case typ == tensor.Q2_K && gqa4:
			return tensor.Q4_K
		case typ == tensor.Q2_K:
			return tensor.Q3_K
		case typ == tensor.Q3_K && layer < 2:
			return tensor.Q5_K
		case typ == tensor.Q3_K:
			return tensor.Q4_K
		case iq4 && gqa4:
			return tensor.Q5_K
		case typ == tensor.Q4_K && useMoreBits(layer, c.Layers):
			return tensor.Q6_K
		}
	case catFFNDown:
		switch {
		case typ == tensor.Q2_K:
			return tensor.Q3_K
		case typ == tensor.Q3_K && layer < c.Layers/16:
			return tensor.Q5_K
		case typ == tensor.Q3_K:
			return tensor.Q4_K
		case typ == tensor.Q4_K && useMoreBits(layer, c.Layers):
			return tensor.Q6_K
		case iq4 && layer < c.Layers/8:
			return tensor.Q5_K
		}
	case catAttnOut:
		switch typ {
		case tensor.Q2_K:
			return tensor.Q3_K
		case tensor.Q3_K:
			return tensor.Q4_K
		}
	}
	return typ
}
