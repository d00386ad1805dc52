// Package tensor holds ggml's tensor element types: the type table (block
// sizes and byte sizes, as GGUF files and llama.cpp define them), half and
// bfloat16 conversion, and the quantize/dequantize routines for weights.
//
// It sits under the model loader in the data flow: a GGUF file names a Type
// per tensor, the loader asks this package how many bytes a row takes, and the
// compute kernels (package kernels) read the blocks laid out here directly.
package tensor
