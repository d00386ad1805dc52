package gguf

import (
	"fmt"
	"os"

	"tandem/internal/engine/tensor"
)

// KV is one metadata entry.
type KV struct {
	Key   string
	Value Value
}

// TensorInfo describes one tensor of a GGUF file.
type TensorInfo struct {
	Name   string
	Dims   []uint64    // ne[0] first: the contiguous dimension (the row length)
	Type   tensor.Type // element type
	Offset uint64      // offset of the data relative to File.DataOffset
	Size   uint64      // data size in bytes
	// Data is the tensor's bytes, a zero-copy view into the mapped file (or
	// into the slice given to Parse). It is nil after ParseHeader and after
	// Close, and must not be written to.
	Data []byte
}

// NumElements returns the number of elements, the product of Dims (1 for a
// tensor with no dimensions).
func (t *TensorInfo) NumElements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// File is a parsed GGUF file: its metadata, its tensor infos and, unless it
// came from ParseHeader, views of the tensor data.
//
// A File is read-only after parsing and safe for concurrent use by many
// goroutines, except that Close must not run concurrently with any other use
// and ends the validity of every TensorInfo.Data slice. Metadata values and
// names are copies and stay valid after Close.
type File struct {
	Version    uint32       // 2 or 3
	KV         []KV         // metadata in file order
	Tensors    []TensorInfo // tensor infos in file order
	Alignment  uint64       // data alignment: general.alignment, or 32
	DataOffset uint64       // absolute offset of the tensor data section

	kvIndex     map[string]int
	tensorIndex map[string]int
	unmap       func() error // releases the mapping; nil for Parse
	inMemory    bool         // read by OpenInMemory: DropPages must not drop
}

// Open maps the GGUF file at path read-only and parses it. The tensors'
// Data slices point into the mapping and are valid until Close.
func Open(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open gguf file: %w", err)
	}
	defer fd.Close()
	data, unmap, err := mapFile(fd)
	if err != nil {
		return nil, fmt.Errorf("open gguf file %s: %w", path, err)
	}
	f, err := Parse(data)
	if err != nil {
		unmap()
		return nil, fmt.Errorf("open gguf file %s: %w", path, err)
	}
	f.unmap = unmap
	return f, nil
}

// OpenInMemory is Open, except that it reads the file into memory of the
// process (an anonymous mapping, with transparent huge pages advised where
// the system has them) instead of mapping the file: the weights then stay
// resident whatever the page cache does, and are read through fewer TLB
// entries, as llama.cpp's --no-mmap loads them. It costs the read at start
// and the file's size in process memory. Close releases the memory.
func OpenInMemory(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open gguf file: %w", err)
	}
	defer fd.Close()
	data, release, err := readFile(fd)
	if err != nil {
		return nil, fmt.Errorf("read gguf file %s into memory: %w", path, err)
	}
	f, err := Parse(data)
	if err != nil {
		release()
		return nil, fmt.Errorf("open gguf file %s: %w", path, err)
	}
	f.unmap, f.inMemory = release, true
	return f, nil
}

// Close releases the file mapping of a File from Open and sets every
// TensorInfo.Data to nil. Slices of tensor data kept elsewhere must not be
// used after Close. Close is idempotent; on a File from Parse it only
// clears Data.
func (f *File) Close() error {
	for i := range f.Tensors {
		f.Tensors[i].Data = nil
	}
	unmap := f.unmap
	f.unmap = nil
	if unmap == nil {
		return nil
	}
	if err := unmap(); err != nil {
		return fmt.Errorf("close gguf file: %w", err)
	}
	return nil
}

// DropPages tells the system that tensor data b (a slice of some
// TensorInfo.Data of f) will not be read for a while, so the pages wholly
// inside it can leave the process's memory; they are read from the file
// again if touched, so b stays valid. It does nothing for a File from Parse
// or OpenInMemory, or where files are read into memory.
func (f *File) DropPages(b []byte) {
	if f.unmap != nil && !f.inMemory {
		dropPages(b)
	}
}

// Lookup returns the value of a metadata key.
func (f *File) Lookup(key string) (Value, bool) {
	i, ok := f.kvIndex[key]
	if !ok {
		return Value{}, false
	}
	return f.KV[i].Value, true
}

// String returns a string value; false when key is absent or not a string.
func (f *File) String(key string) (string, bool) {
	v, _ := f.Lookup(key)
	return v.String()
}

// Uint32 returns an integer value of any type that fits in a uint32.
func (f *File) Uint32(key string) (uint32, bool) {
	v, ok := f.Lookup(key)
	if !ok {
		return 0, false
	}
	return v.Uint32()
}

// Uint64 returns a non-negative integer value of any type.
func (f *File) Uint64(key string) (uint64, bool) {
	v, ok := f.Lookup(key)
	if !ok {
		return 0, false
	}
	return v.Uint64()
}

// Int returns an integer value of any type that fits in an int.
func (f *File) Int(key string) (int, bool) {
	v, ok := f.Lookup(key)
	if !ok {
		return 0, false
	}
	return v.Int()
}

// Float32 returns an f32 value, or an f64 value rounded to float32.
func (f *File) Float32(key string) (float32, bool) {
	v, ok := f.Lookup(key)
	if !ok {
		return 0, false
	}
	return v.Float32()
}

// Bool returns a bool value.
func (f *File) Bool(key string) (bool, bool) {
	v, ok := f.Lookup(key)
	if !ok {
		return false, false
	}
	return v.Bool()
}

// Strings returns a copy of an array of strings.
func (f *File) Strings(key string) ([]string, bool) {
	v, ok := f.Lookup(key)
	if !ok {
		return nil, false
	}
	return v.Strings()
}

// Float32s returns an array of f32 or f64 as float32s.
func (f *File) Float32s(key string) ([]float32, bool) {
	v, ok := f.Lookup(key)
	if !ok {
		return nil, false
	}
	return v.Float32s()
}

// Int32s returns an array of any integer type converted to int32; false
// when an element does not fit.
func (f *File) Int32s(key string) ([]int32, bool) {
	v, ok := f.Lookup(key)
	if !ok {
		return nil, false
	}
	return v.Int32s()
}

// Tensor returns the info of the tensor with the given name. The pointer
// refers into f.Tensors.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.tensorIndex[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// Architecture returns general.architecture, or "" when absent.
func (f *File) Architecture() string {
	s, _ := f.String("general.architecture")
	return s
}
