package gguf

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Sentinel errors: every *FormatError wraps exactly one of them, so callers
// can tell kinds of bad files apart with errors.Is.
var (
	// ErrMagic: the data does not start with the bytes "GGUF".
	ErrMagic = errors.New("gguf: not a GGUF file")
	// ErrVersion: a GGUF version other than 2 or 3, or a big-endian file.
	ErrVersion = errors.New("gguf: unsupported version")
	// ErrTruncated: the data ends before a field, or a count or length
	// claims more bytes than remain.
	ErrTruncated = errors.New("gguf: truncated")
	// ErrDuplicate: a metadata key or a tensor name appears twice.
	ErrDuplicate = errors.New("gguf: duplicate name")
	// ErrValue: a metadata value has an invalid type, nests too deep, or a
	// well-known key (general.alignment) has a bad type or value.
	ErrValue = errors.New("gguf: invalid metadata value")
	// ErrTensor: a tensor info is invalid: name too long, too many
	// dimensions, a negative or overflowing shape, an unknown or unsupported
	// type, or a row that is not a whole number of blocks.
	ErrTensor = errors.New("gguf: invalid tensor")
	// ErrLayout: tensor data is misaligned, out of order, or past the end
	// of the file.
	ErrLayout = errors.New("gguf: invalid tensor data layout")
)

// FormatError describes why data is not a valid GGUF file and where the
// reader was when it found out. Its header fields hold what had been read
// before the problem (zero when not reached), so a caller can still report,
// for example, the version and counts of a file whose tensor table is bad.
type FormatError struct {
	Kind        error  // one of the sentinel errors above
	Detail      string // what is wrong, in words
	Offset      uint64 // byte offset of the field that is wrong
	Key         string // metadata key being read, if any
	Tensor      string // tensor being read or checked, if any
	Version     uint32 // header version, once read
	TensorCount uint64 // header tensor count, once read
	KVCount     uint64 // header metadata count, once read
}

// Error formats the problem as "gguf tensor NAME: DETAIL (at byte N)" or
// with "key K" in place of the tensor.
func (e *FormatError) Error() string {
	var b strings.Builder
	b.WriteString("gguf")
	switch {
	case e.Tensor != "":
		fmt.Fprintf(&b, " tensor %s", display(e.Tensor))
	case e.Key != "":
		fmt.Fprintf(&b, " key %s", display(e.Key))
	}
	fmt.Fprintf(&b, ": %s (at byte %d)", e.Detail, e.Offset)
	return b.String()
}

// Unwrap returns the sentinel kind.
func (e *FormatError) Unwrap() error { return e.Kind }

// nameBytesMax is the longest key or tensor name an error repeats in full.
const nameBytesMax = 80

// clip shortens a name from a file for use in an error message.
func clip(s string) string {
	if len(s) <= nameBytesMax {
		return s
	}
	return s[:nameBytesMax] + "..."
}

// display returns s as is when it is plain printable text, else quoted.
func display(s string) string {
	for _, r := range s {
		if r <= ' ' || r == '"' || r == utf8.RuneError || !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	if s == "" {
		return `""`
	}
	return s
}
