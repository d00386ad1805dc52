package gguf

// Limits of the reader and the writer. Each has an explicit rejection path
// that names the limit in its error.
const (
	// versionMin and versionMax bound the GGUF versions read. Version 1 used
	// 32-bit counts and lengths and is rejected, as llama.cpp does.
	versionMin = 2
	versionMax = 3

	// writeVersion is the version the Writer produces.
	writeVersion = 3

	// alignmentDefault is the data alignment when general.alignment is absent.
	alignmentDefault = 32

	// dimsMax is the most dimensions a tensor may have (GGML_MAX_DIMS).
	dimsMax = 4

	// tensorNameBytesMax is the longest tensor name in bytes; ggml keeps
	// names in a 64-byte buffer with a terminating NUL (GGML_MAX_NAME).
	tensorNameBytesMax = 63

	// arrayDepthMax is the deepest nesting of arrays: 1 is an array of
	// scalars or strings, 2 an array of such arrays, and so on. The parser
	// walks nested arrays with an explicit stack, never by recursion.
	arrayDepthMax = 8

	// nestedArraysMax bounds the total number of arrays stored inside other
	// arrays in one file. Each costs far more memory than its 12 encoded
	// bytes, so without a bound a crafted file could make the reader
	// allocate many times its own size. Real models use none.
	nestedArraysMax = 1 << 16

	// Smallest encodings, used to bound counts by the bytes that remain
	// before anything is allocated.
	stringBytesMin     = 8                          // u64 length, empty string
	arrayHeadBytesMin  = 4 + 8                      // u32 element type + u64 count
	kvBytesMin         = stringBytesMin + 4 + 1     // key + u32 type + 1-byte value
	tensorInfoBytesMin = stringBytesMin + 4 + 4 + 8 // name + n_dims (0) + type + offset

	// preallocCountMax caps the room reserved up front for metadata entries
	// and tensor infos. Counts are already bounded by the file size, but an
	// entry in memory is several times larger than its smallest encoding,
	// so a corrupt count in a multi-gigabyte file would otherwise reserve
	// gigabytes before the first entry fails to parse.
	preallocCountMax = 1 << 12

	// writeBufferBytes is the buffer the Writer puts in front of its output.
	writeBufferBytes = 1 << 20
)
