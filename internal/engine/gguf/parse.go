package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"

	"tandem/internal/engine/tensor"
)

// magic is the first four bytes of every GGUF file.
const magic = "GGUF"

// keyAlignment is the metadata key that sets the data alignment.
const keyAlignment = "general.alignment"

// parser reads one GGUF image front to back. Every read checks the bytes
// that remain first, so a count or length from the file never drives an
// allocation larger than the file itself.
type parser struct {
	data     []byte
	off      uint64 // next byte to read
	withData bool   // require and slice tensor data
	nested   int    // arrays read inside other arrays so far
	ctx      FormatError
	infoAt   []uint64 // offset of each tensor info, for layout errors
}

// Parse parses a GGUF image held in memory and validates it as llama.cpp
// does. The tensors' Data slices alias data, which must stay unchanged while
// they are in use; metadata values are copies.
func Parse(data []byte) (*File, error) {
	return parse(data, true)
}

// ParseHeader parses the metadata and tensor infos at the start of a GGUF
// image without requiring the tensor data to be present, so a prefix of a
// large file is enough. Every check of Parse is made except that tensor data
// lies within data; each TensorInfo's Data is nil.
func ParseHeader(data []byte) (*File, error) {
	return parse(data, false)
}

func parse(data []byte, withData bool) (*File, error) {
	p := &parser{data: data, withData: withData}
	f := &File{Alignment: alignmentDefault}
	nTensors, nKV, err := p.header(f)
	if err != nil {
		return nil, err
	}
	if err := p.kvs(f, nKV); err != nil {
		return nil, err
	}
	if err := p.tensorInfos(f, nTensors); err != nil {
		return nil, err
	}
	if err := p.layout(f); err != nil {
		return nil, err
	}
	return f, nil
}

// fail builds a *FormatError of the given kind at byte offset at.
func (p *parser) fail(at uint64, kind error, format string, args ...any) error {
	e := p.ctx
	e.Kind = kind
	e.Detail = fmt.Sprintf(format, args...)
	e.Offset = at
	return &e
}

func (p *parser) remaining() uint64 { return uint64(len(p.data)) - p.off }

// take returns the next n bytes, or an error naming what was being read.
func (p *parser) take(n uint64, what string) ([]byte, error) {
	if n > p.remaining() {
		return nil, p.fail(p.off, ErrTruncated, "file ends at byte %d, inside the %s (%d bytes needed, %d remain)",
			len(p.data), what, n, p.remaining())
	}
	b := p.data[p.off : p.off+n]
	p.off += n
	return b, nil
}

func (p *parser) u32(what string) (uint32, error) {
	b, err := p.take(4, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (p *parser) u64(what string) (uint64, error) {
	b, err := p.take(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// stringBytes reads a gguf_string and returns its bytes, aliasing data.
func (p *parser) stringBytes(what string) ([]byte, error) {
	at := p.off
	b, err := p.take(8, what) // the length; no string building on this hot path
	if err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint64(b)
	if n > p.remaining() {
		return nil, p.fail(at, ErrTruncated, "%s length %d exceeds the %d bytes that remain", what, n, p.remaining())
	}
	return p.take(n, what)
}

func (p *parser) string(what string) (string, error) {
	b, err := p.stringBytes(what)
	return string(b), err
}

// header reads the magic, version and the two counts, and checks that the
// counts could fit in the bytes that remain.
func (p *parser) header(f *File) (nTensors, nKV uint64, err error) {
	if len(p.data) < len(magic) {
		return 0, 0, p.fail(0, ErrTruncated, "file is %d bytes long, too short for a GGUF header", len(p.data))
	}
	if string(p.data[:4]) != magic {
		return 0, 0, p.fail(0, ErrMagic, "magic bytes %q, want %q", p.data[:4], magic)
	}
	p.off = 4
	v, err := p.u32("version")
	if err != nil {
		return 0, 0, err
	}
	if err := checkVersion(v); err != nil {
		return 0, 0, p.fail(4, ErrVersion, "%s", err)
	}
	f.Version, p.ctx.Version = v, v
	if nTensors, err = p.u64("tensor count"); err != nil {
		return 0, 0, err
	}
	p.ctx.TensorCount = nTensors
	if nKV, err = p.u64("metadata count"); err != nil {
		return 0, 0, err
	}
	p.ctx.KVCount = nKV
	rem := p.remaining()
	if nTensors > rem/tensorInfoBytesMin {
		return 0, 0, p.fail(8, ErrTruncated, "header claims %d tensors, but the %d bytes that remain hold at most %d tensor infos",
			nTensors, rem, rem/tensorInfoBytesMin)
	}
	if nKV > rem/kvBytesMin || nKV*kvBytesMin+nTensors*tensorInfoBytesMin > rem {
		return 0, 0, p.fail(16, ErrTruncated, "header claims %d metadata entries and %d tensors, more than the %d bytes that remain can hold",
			nKV, nTensors, rem)
	}
	return nTensors, nKV, nil
}

// checkVersion accepts versions 2 and 3 and explains every other value.
func checkVersion(v uint32) error {
	switch {
	case v >= versionMin && v <= versionMax:
		return nil
	case v == 1:
		return fmt.Errorf("GGUF version 1 is not supported (it used 32-bit counts); reconvert the model with a current llama.cpp")
	case v != 0 && v&0xffff == 0:
		return fmt.Errorf("version field %#08x looks byte-swapped: big-endian GGUF files are not supported", v)
	}
	return fmt.Errorf("GGUF version %d is not supported (want %d or %d)", v, versionMin, versionMax)
}

// kvs reads the metadata entries and applies general.alignment.
func (p *parser) kvs(f *File, n uint64) error {
	f.KV = make([]KV, 0, min(n, preallocCountMax))
	f.kvIndex = make(map[string]int, min(n, preallocCountMax))
	for i := range n {
		at := p.off
		key, err := p.string("metadata key")
		if err != nil {
			return err
		}
		p.ctx.Key = clip(key)
		if j, dup := f.kvIndex[key]; dup {
			return p.fail(at, ErrDuplicate, "duplicate key (entries %d and %d)", j, i)
		}
		t, err := p.u32("value type")
		if err != nil {
			return err
		}
		v, err := p.value(ValueType(t))
		if err != nil {
			return err
		}
		if key == keyAlignment {
			a, err := alignmentOf(v)
			if err != nil {
				return p.fail(at, ErrValue, "%s", err)
			}
			f.Alignment = a
		}
		f.kvIndex[key] = len(f.KV)
		f.KV = append(f.KV, KV{Key: key, Value: v})
	}
	p.ctx.Key = ""
	return nil
}

// alignmentOf checks a general.alignment value as llama.cpp does: a u32
// that is a power of two.
func alignmentOf(v Value) (uint64, error) {
	if v.Type != TypeUint32 {
		return 0, fmt.Errorf("%s has type %s, want u32", keyAlignment, v.Type)
	}
	if v.bits == 0 || v.bits&(v.bits-1) != 0 {
		return 0, fmt.Errorf("%s is %d, not a power of two", keyAlignment, v.bits)
	}
	return v.bits, nil
}

// value reads one value of type t.
func (p *parser) value(t ValueType) (Value, error) {
	switch {
	case t == TypeString:
		s, err := p.string("string value")
		return Value{Type: TypeString, str: s}, err
	case t == TypeArray:
		return p.array()
	case t.Valid():
		b, err := p.take(uint64(t.fixedSize()), t.String()+" value")
		if err != nil {
			return Value{}, err
		}
		return Value{Type: t, bits: readFixed(b, t)}, nil
	}
	return Value{}, p.fail(p.off-4, ErrValue, "invalid value type %d (want 0 to %d)", uint32(t), valueTypeCount-1)
}

// arrayFrame is an array of arrays whose elements are still being read.
type arrayFrame struct {
	a    *arrayData
	left uint64
}

// array reads an array value. Arrays of arrays are read with an explicit
// stack of unfinished arrays, so nesting costs no Go stack and is bounded by
// arrayDepthMax.
func (p *parser) array() (Value, error) {
	elem, root, n, err := p.arrayHead(1)
	if err != nil || elem != TypeArray {
		return Value{Type: TypeArray, ElemType: elem, arr: root}, err
	}
	stack := []arrayFrame{{root, n}}
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		if top.left == 0 {
			stack = stack[:len(stack)-1]
			if len(stack) > 0 {
				parent := stack[len(stack)-1].a
				parent.depth = max(parent.depth, top.a.depth+1)
			}
			continue
		}
		top.left--
		childElem, child, childN, err := p.arrayHead(len(stack) + 1)
		if err != nil {
			return Value{}, err
		}
		top.a.vals = append(top.a.vals, Value{Type: TypeArray, ElemType: childElem, arr: child})
		top.a.depth = max(top.a.depth, 2)
		if childElem == TypeArray {
			stack = append(stack, arrayFrame{child, childN})
		}
	}
	return Value{Type: TypeArray, ElemType: TypeArray, arr: root}, nil
}

// arrayHead reads an array's element type and count at nesting depth
// depth. For scalar and string elements it also reads the elements; for
// array elements it returns an empty arrayData with room for n of them.
func (p *parser) arrayHead(depth int) (ValueType, *arrayData, uint64, error) {
	at := p.off
	if depth > arrayDepthMax {
		return 0, nil, 0, p.fail(at, ErrValue, "arrays nest deeper than the limit of %d", arrayDepthMax)
	}
	t, err := p.u32("array element type")
	if err != nil {
		return 0, nil, 0, err
	}
	elem := ValueType(t)
	if !elem.Valid() {
		return 0, nil, 0, p.fail(at, ErrValue, "invalid array element type %d (want 0 to %d)", t, valueTypeCount-1)
	}
	n, err := p.u64("array length")
	if err != nil {
		return 0, nil, 0, err
	}
	if minBytes := elemBytesMin(elem); n > p.remaining()/minBytes {
		return 0, nil, 0, p.fail(at, ErrTruncated, "array of %d %s elements does not fit in the %d bytes that remain",
			n, elem, p.remaining())
	}
	a := &arrayData{depth: 1}
	switch elem {
	case TypeString:
		a.strs, err = p.strings(n)
	case TypeArray:
		if uint64(nestedArraysMax-p.nested) < n {
			return 0, nil, 0, p.fail(at, ErrValue, "more than %d arrays inside arrays", nestedArraysMax)
		}
		p.nested += int(n)
		a.vals = make([]Value, 0, n)
	default:
		var b []byte
		b, err = p.take(n*uint64(elem.fixedSize()), "array")
		a.raw = append([]byte(nil), b...)
	}
	return elem, a, n, err
}

// elemBytesMin is the smallest encoding of one array element of type t.
func elemBytesMin(t ValueType) uint64 {
	switch t {
	case TypeString:
		return stringBytesMin
	case TypeArray:
		return arrayHeadBytesMin
	}
	return uint64(t.fixedSize())
}

// strings reads n strings. It scans their lengths first and then copies the
// whole run in one allocation that the strings share.
func (p *parser) strings(n uint64) ([]string, error) {
	start := p.off
	for range n {
		if _, err := p.stringBytes("array string"); err != nil {
			return nil, err
		}
	}
	block := string(p.data[start:p.off])
	out := make([]string, n)
	pos := uint64(0)
	for i := range out {
		l := binary.LittleEndian.Uint64(p.data[start+pos:])
		pos += 8
		out[i] = block[pos : pos+l]
		pos += l
	}
	return out, nil
}

// tensorInfos reads and checks the tensor infos.
func (p *parser) tensorInfos(f *File, n uint64) error {
	f.Tensors = make([]TensorInfo, 0, min(n, preallocCountMax))
	f.tensorIndex = make(map[string]int, min(n, preallocCountMax))
	p.infoAt = make([]uint64, 0, min(n, preallocCountMax))
	for i := range n {
		at := p.off
		p.ctx.Tensor = ""
		t, err := p.tensorInfo()
		if err != nil {
			return err
		}
		if j, dup := f.tensorIndex[t.Name]; dup {
			return p.fail(at, ErrDuplicate, "duplicate tensor name (tensors %d and %d)", j, i)
		}
		if err := checkShape(t); err != nil {
			return p.fail(at, ErrTensor, "%s", err)
		}
		t.Size, _ = tensorBytes(t.Type, t.Dims)
		f.tensorIndex[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
		p.infoAt = append(p.infoAt, at)
	}
	return nil
}

// tensorInfo reads the fields of tensor info i.
func (p *parser) tensorInfo() (TensorInfo, error) {
	at := p.off
	name, err := p.string("tensor name")
	if err != nil {
		return TensorInfo{}, err
	}
	p.ctx.Tensor = clip(name)
	if len(name) > tensorNameBytesMax {
		return TensorInfo{}, p.fail(at, ErrTensor, "name is %d bytes long, more than the limit of %d", len(name), tensorNameBytesMax)
	}
	nd, err := p.u32("number of dimensions")
	if err != nil {
		return TensorInfo{}, err
	}
	if nd > dimsMax {
		return TensorInfo{}, p.fail(p.off-4, ErrTensor, "%d dimensions, more than the limit of %d", nd, dimsMax)
	}
	t := TensorInfo{Name: name, Dims: make([]uint64, nd)}
	for j := range t.Dims {
		if t.Dims[j], err = p.u64("dimension"); err != nil {
			return TensorInfo{}, err
		}
	}
	typ, err := p.u32("type")
	if err != nil {
		return TensorInfo{}, err
	}
	t.Type = tensor.Type(typ)
	if t.Offset, err = p.u64("data offset"); err != nil {
		return TensorInfo{}, err
	}
	return t, nil
}

// checkShape applies llama.cpp's checks to a tensor's dimensions and type.
func checkShape(t TensorInfo) error {
	if len(t.Dims) > dimsMax {
		return fmt.Errorf("%d dimensions, more than the limit of %d", len(t.Dims), dimsMax)
	}
	n := uint64(1)
	for j, d := range t.Dims {
		if d > math.MaxInt64 {
			return fmt.Errorf("dimension %d has %d elements, negative as a signed 64-bit count", j, int64(d))
		}
		hi, lo := bits.Mul64(n, d)
		if hi != 0 || lo > math.MaxInt64 {
			return fmt.Errorf("shape %v has more than 2^63-1 elements", t.Dims)
		}
		n = lo
	}
	if !t.Type.Known() {
		if t.Type.String() == fmt.Sprintf("type(%d)", uint32(t.Type)) {
			return fmt.Errorf("unknown or unsupported ggml type %d", uint32(t.Type))
		}
		return fmt.Errorf("unsupported tensor type %s (ggml type %d)", t.Type, uint32(t.Type))
	}
	ne0 := uint64(1)
	if len(t.Dims) > 0 {
		ne0 = t.Dims[0]
	}
	if bs := uint64(t.Type.BlockSize()); ne0%bs != 0 {
		return fmt.Errorf("row of %d elements is not a multiple of the %s block size %d", ne0, t.Type, bs)
	}
	if _, ok := tensorBytes(t.Type, t.Dims); !ok {
		return fmt.Errorf("shape %v of type %s has more than 2^63-1 bytes", t.Dims, t.Type)
	}
	return nil
}

// tensorBytes returns the data size of a tensor whose shape checkShape has
// accepted up to the byte count; ok is false when that overflows.
func tensorBytes(typ tensor.Type, dims []uint64) (uint64, bool) {
	n := uint64(1)
	for _, d := range dims {
		n *= d
	}
	hi, lo := bits.Mul64(n/uint64(typ.BlockSize()), uint64(typ.TypeSize()))
	return lo, hi == 0 && lo <= math.MaxInt64
}

// layout places the data section and checks each tensor's offset: aligned,
// packed in info order as llama.cpp requires, and within the file.
func (p *parser) layout(f *File) error {
	f.DataOffset = roundUp(p.off, f.Alignment)
	next := uint64(0)
	for i := range f.Tensors {
		t := &f.Tensors[i]
		p.ctx.Tensor = clip(t.Name)
		at := p.infoAt[i]
		if t.Offset%f.Alignment != 0 {
			return p.fail(at, ErrLayout, "data offset %d is not a multiple of the alignment %d", t.Offset, f.Alignment)
		}
		if t.Offset != next {
			return p.fail(at, ErrLayout, "data offset %d, want %d: tensor data must be packed in tensor info order, each padded to the alignment %d",
				t.Offset, next, f.Alignment)
		}
		padded := roundUp(t.Size, f.Alignment)
		sum, c1 := bits.Add64(f.DataOffset, next, 0)
		_, c2 := bits.Add64(sum, padded, 0)
		if c1|c2 != 0 {
			return p.fail(at, ErrLayout, "data section size overflows")
		}
		next += padded
		if !p.withData {
			continue
		}
		start := f.DataOffset + t.Offset
		end := start + t.Size
		if end > uint64(len(p.data)) {
			return p.fail(at, ErrTruncated, "data ends at byte %d, past the end of the file (%d bytes)", end, len(p.data))
		}
		t.Data = p.data[start:end:end]
	}
	p.ctx.Tensor = ""
	return nil
}

// roundUp rounds x up to a multiple of align, a power of two; the result
// wraps to a smaller number only when x is within align of 2^64.
func roundUp(x, align uint64) uint64 { return (x + align - 1) &^ (align - 1) }
