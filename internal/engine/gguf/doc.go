// Package gguf reads and writes GGUF files, the model format of llama.cpp:
// a header, typed metadata entries (key → value), a table of tensor infos,
// and an aligned section of tensor data.
//
// # Where it sits
//
// It is the first step of loading a model. Open maps a file read-only and
// parses it (OpenInMemory reads it into anonymous memory with transparent
// huge pages advised instead: decode streams such weights faster where TLB
// misses are dear; DropPages then does nothing); the model loader then reads hyperparameters with the typed
// getters (File.Uint32, File.Float32, ...), the tokenizer reads its
// vocabulary (File.Strings, File.Float32s, File.Int32s), and the engine uses
// each TensorInfo.Data, a zero-copy view of the mapped bytes, as weights.
// Writer goes the other way, for synthesized test models and tools; its
// AddTensorFunc streams tensor data so multi-gigabyte files never sit in
// memory.
//
// # Invariants
//
// A File from Open or Parse passed every check llama.cpp's gguf.cpp makes
// when it loads a file: magic "GGUF"; version 2 or 3 (1 and big-endian
// files are refused with a message saying so); no duplicate keys or tensor
// names; valid value types; general.alignment, when present, a u32 power of
// two; tensor names under 64 bytes; at most 4 dimensions, none negative as
// int64, with element and byte counts that fit in an int64; a tensor type
// Tandem knows (tensor.Type.Known) whose block size divides the row length
// ne[0]; and tensor data packed in info order from the data section start
// (the end of the infos rounded up to the alignment), each tensor padded to
// the alignment, and inside the file. Every failure is a *FormatError that
// names the key or tensor, the byte offset, and wraps one sentinel (ErrMagic,
// ErrVersion, ErrTruncated, ErrDuplicate, ErrValue, ErrTensor, ErrLayout).
//
// Metadata values and names are copies; only TensorInfo.Data aliases the
// mapping (or the slice given to Parse) and is invalid after Close. The
// Writer applies the same checks, so whatever it writes parses, and a parsed
// file rewritten through it reproduces llama.cpp's byte layout.
//
// # Limits
//
// The reader checks the bytes that remain before it allocates for any count
// or length, so a header claiming 2^60 tensors or a string of 2^62 bytes is
// an error, not an allocation; memory use is a small multiple of the file's
// metadata size. Arrays may nest (arrays of arrays) at most 8 deep and hold
// at most 65536 inner arrays per file; the parser walks them with an
// explicit stack, never by recursion. See limits.go.
package gguf
