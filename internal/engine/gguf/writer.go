package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"tandem/internal/engine/tensor"
)

// Writer builds a GGUF version 3 file: metadata entries and tensors are
// written in the order they were first set or added, each tensor's data
// padded to the alignment (general.alignment when set with SetUint32, else
// 32), so the output reads back with Parse and with llama.cpp.
//
// A Writer is not safe for concurrent use. It keeps the data slices given to
// AddTensor, without copying, until WriteTo has run.
type Writer struct {
	kv          []KV
	kvIndex     map[string]int
	tensors     []writerTensor
	tensorIndex map[string]int
}

// writerTensor is a tensor waiting to be written: either its bytes or a
// function that produces them.
type writerTensor struct {
	name  string
	typ   tensor.Type
	dims  []uint64
	size  uint64
	data  []byte
	write func(io.Writer) error
}

// NewWriter returns an empty Writer.
func NewWriter() *Writer {
	return &Writer{kvIndex: map[string]int{}, tensorIndex: map[string]int{}}
}

// Set sets metadata key to v. A key set again keeps its first position and
// takes the new value. Invalid values are reported by WriteTo.
func (w *Writer) Set(key string, v Value) {
	if i, ok := w.kvIndex[key]; ok {
		w.kv[i].Value = v
		return
	}
	w.kvIndex[key] = len(w.kv)
	w.kv = append(w.kv, KV{Key: key, Value: v})
}

// SetString sets a string value.
func (w *Writer) SetString(key, s string) { w.Set(key, StringValue(s)) }

// SetUint32 sets a u32 value.
func (w *Writer) SetUint32(key string, x uint32) { w.Set(key, Uint32Value(x)) }

// SetInt32 sets an i32 value.
func (w *Writer) SetInt32(key string, x int32) { w.Set(key, Int32Value(x)) }

// SetUint64 sets a u64 value.
func (w *Writer) SetUint64(key string, x uint64) { w.Set(key, Uint64Value(x)) }

// SetFloat32 sets an f32 value.
func (w *Writer) SetFloat32(key string, x float32) { w.Set(key, Float32Value(x)) }

// SetBool sets a bool value.
func (w *Writer) SetBool(key string, x bool) { w.Set(key, BoolValue(x)) }

// SetStrings sets an array of strings.
func (w *Writer) SetStrings(key string, ss []string) { w.Set(key, StringsValue(ss)) }

// SetFloat32s sets an array of f32.
func (w *Writer) SetFloat32s(key string, xs []float32) { w.Set(key, Float32sValue(xs)) }

// SetInt32s sets an array of i32.
func (w *Writer) SetInt32s(key string, xs []int32) { w.Set(key, Int32sValue(xs)) }

// AddTensor adds a tensor whose data is already in memory; data must be
// exactly the tensor's size. The Writer keeps data until WriteTo.
func (w *Writer) AddTensor(name string, typ tensor.Type, dims []uint64, data []byte) error {
	t, err := w.newTensor(name, typ, dims)
	if err != nil {
		return err
	}
	if uint64(len(data)) != t.size {
		return fmt.Errorf("add gguf tensor %s: data is %d bytes, want %d for shape %v of type %s",
			name, len(data), t.size, dims, typ)
	}
	t.data = data
	w.addTensor(t)
	return nil
}

// AddTensorFunc adds a tensor whose data write produces at WriteTo time,
// for data too large to hold in memory. write must write exactly the
// tensor's size in bytes; WriteTo fails otherwise.
func (w *Writer) AddTensorFunc(name string, typ tensor.Type, dims []uint64, write func(io.Writer) error) error {
	t, err := w.newTensor(name, typ, dims)
	if err != nil {
		return err
	}
	if write == nil {
		return fmt.Errorf("add gguf tensor %s: nil write function", name)
	}
	t.write = write
	w.addTensor(t)
	return nil
}

// newTensor checks a tensor's name and shape as the reader will.
func (w *Writer) newTensor(name string, typ tensor.Type, dims []uint64) (writerTensor, error) {
	if len(name) > tensorNameBytesMax {
		return writerTensor{}, fmt.Errorf("add gguf tensor %s: name is %d bytes long, more than the limit of %d",
			clip(name), len(name), tensorNameBytesMax)
	}
	if _, dup := w.tensorIndex[name]; dup {
		return writerTensor{}, fmt.Errorf("add gguf tensor %s: duplicate tensor name", name)
	}
	if err := checkShape(TensorInfo{Name: name, Type: typ, Dims: dims}); err != nil {
		return writerTensor{}, fmt.Errorf("add gguf tensor %s: %w", name, err)
	}
	size, _ := tensorBytes(typ, dims)
	return writerTensor{name: name, typ: typ, dims: slices.Clone(dims), size: size}, nil
}

func (w *Writer) addTensor(t writerTensor) {
	w.tensorIndex[t.name] = len(w.tensors)
	w.tensors = append(w.tensors, t)
}

// alignment returns the data alignment the output will use.
func (w *Writer) alignment() (uint64, error) {
	i, ok := w.kvIndex[keyAlignment]
	if !ok {
		return alignmentDefault, nil
	}
	return alignmentOf(w.kv[i].Value)
}

// WriteTo writes the file to out and returns the number of bytes written.
// It checks all metadata before writing anything; a failing or misbehaving
// tensor write function stops it part way.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	align, err := w.alignment()
	if err != nil {
		return 0, fmt.Errorf("write gguf: %w", err)
	}
	for _, kv := range w.kv {
		if err := kv.Value.check(); err != nil {
			return 0, fmt.Errorf("write gguf key %s: %w", kv.Key, err)
		}
	}
	e := &encoder{}
	e.w = bufio.NewWriterSize(writerFunc(func(p []byte) (int, error) {
		n, err := out.Write(p)
		e.written += int64(n)
		return n, err
	}), writeBufferBytes)
	w.writeHead(e, align)
	for _, t := range w.tensors {
		if e.err != nil {
			break
		}
		w.writeData(e, t, align)
	}
	if e.err == nil {
		e.err = e.w.Flush()
	}
	if e.err != nil {
		return e.written, fmt.Errorf("write gguf: %w", e.err)
	}
	return e.written, nil
}

// writeHead writes the header, the metadata and the tensor infos, then pads
// to the alignment when tensor data follows.
func (w *Writer) writeHead(e *encoder, align uint64) {
	e.bytes([]byte(magic))
	e.u32(writeVersion)
	e.u64(uint64(len(w.tensors)))
	e.u64(uint64(len(w.kv)))
	for _, kv := range w.kv {
		e.str(kv.Key)
		e.u32(uint32(kv.Value.Type))
		e.value(kv.Value)
	}
	offset := uint64(0)
	for _, t := range w.tensors {
		e.str(t.name)
		e.u32(uint32(len(t.dims)))
		for _, d := range t.dims {
			e.u64(d)
		}
		e.u32(uint32(t.typ))
		e.u64(offset)
		offset += roundUp(t.size, align)
	}
	if len(w.tensors) > 0 {
		e.pad(align)
	}
}

// writeData writes one tensor's data and its padding.
func (w *Writer) writeData(e *encoder, t writerTensor, align uint64) {
	if t.write == nil {
		e.bytes(t.data)
	} else {
		lw := &limitWriter{w: e.w, left: t.size}
		err := t.write(lw)
		e.pos += t.size - lw.left
		switch {
		case err != nil:
			e.err = fmt.Errorf("tensor %s: %w", t.name, err)
		case lw.err != nil:
			e.err = fmt.Errorf("tensor %s: %w", t.name, lw.err)
		case lw.left != 0:
			e.err = fmt.Errorf("tensor %s: write function produced %d bytes, want %d", t.name, t.size-lw.left, t.size)
		}
	}
	e.pad(align)
}

// WriteFile writes the file to path through a temporary file in the same
// folder that is synced and then renamed over path, so path never holds a
// partial file.
func (w *Writer) WriteFile(path string) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write gguf file: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := w.WriteTo(tmp); err != nil {
		return fmt.Errorf("write gguf file %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("write gguf file %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("write gguf file %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write gguf file %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write gguf file %s: %w", path, err)
	}
	return nil
}

// encoder writes GGUF fields, tracking the position for padding and keeping
// the first error.
type encoder struct {
	w       *bufio.Writer
	pos     uint64 // bytes encoded so far
	written int64  // bytes accepted by the destination
	err     error
	scratch [8]byte
}

func (e *encoder) bytes(b []byte) {
	if e.err != nil {
		return
	}
	_, e.err = e.w.Write(b)
	e.pos += uint64(len(b))
}

func (e *encoder) fixed(bits uint64, size int) {
	binary.LittleEndian.PutUint64(e.scratch[:], bits)
	e.bytes(e.scratch[:size])
}

func (e *encoder) u32(x uint32) { e.fixed(uint64(x), 4) }
func (e *encoder) u64(x uint64) { e.fixed(x, 8) }

func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	if e.err != nil {
		return
	}
	_, e.err = e.w.WriteString(s)
	e.pos += uint64(len(s))
}

func (e *encoder) pad(align uint64) {
	var zeros [64]byte
	for n := roundUp(e.pos, align) - e.pos; n > 0 && e.err == nil; {
		k := min(n, uint64(len(zeros)))
		e.bytes(zeros[:k])
		n -= k
	}
}

// value writes the payload of v (everything after its type tag). Nested
// arrays recurse at most arrayDepthMax deep, which Value.check ensured.
func (e *encoder) value(v Value) {
	switch v.Type {
	case TypeString:
		e.str(v.str)
	case TypeArray:
		n := v.Len()
		e.u32(uint32(v.ElemType))
		e.u64(uint64(n))
		switch {
		case n == 0:
		case v.ElemType == TypeString:
			for _, s := range v.arr.strs {
				e.str(s)
			}
		case v.ElemType == TypeArray:
			for _, x := range v.arr.vals {
				e.value(x)
			}
		default:
			e.bytes(v.arr.raw[:n*v.ElemType.fixedSize()])
		}
	default:
		e.fixed(v.bits, v.Type.fixedSize())
	}
}

// writerFunc adapts a function to io.Writer.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// errTooMuchData reports a tensor write function that wrote past the size.
var errTooMuchData = errors.New("write function produced more bytes than the tensor size")

// limitWriter passes at most left bytes to w and remembers an overrun.
type limitWriter struct {
	w    io.Writer
	left uint64
	err  error
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	if uint64(len(p)) > l.left {
		l.err = errTooMuchData
		return 0, l.err
	}
	n, err := l.w.Write(p)
	l.left -= uint64(n)
	if err != nil {
		l.err = err
	}
	return n, err
}
