package tensor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// This file is a deliberately tiny, test-only GGUF v3 reader: just enough of
// the header, key/value section and tensor infos to pull tensors out of the
// quantization test-vector file. The real reader lives in package gguf; this
// one exists so package tensor's tests do not depend on it.

// testGGUF holds the tensor table of a GGUF file read whole into memory.
type testGGUF struct {
	data    []byte
	tensors map[string]testTensor
	kv      map[string]any // string and u32 values only; others are skipped
}

// testTensor is one tensor info plus the bytes it covers.
type testTensor struct {
	name string
	ne   []uint64
	typ  Type
	data []byte
}

// elements returns the number of elements of the tensor.
func (t testTensor) elements() int {
	n := 1
	for _, d := range t.ne {
		n *= int(d)
	}
	return n
}

// ggufCursor reads little-endian values from a byte slice and remembers the
// first error so the caller can check once.
type ggufCursor struct {
	b   []byte
	off int
	err error
}

func (c *ggufCursor) take(n uint64) []byte {
	if c.err != nil {
		return nil
	}
	if n > uint64(len(c.b)-c.off) {
		c.err = fmt.Errorf("read %d bytes at offset %d: %w", n, c.off, io.ErrUnexpectedEOF)
		return nil
	}
	s := c.b[c.off : c.off+int(n)]
	c.off += int(n)
	return s
}

func (c *ggufCursor) u32() uint32 {
	if s := c.take(4); s != nil {
		return binary.LittleEndian.Uint32(s)
	}
	return 0
}

func (c *ggufCursor) u64() uint64 {
	if s := c.take(8); s != nil {
		return binary.LittleEndian.Uint64(s)
	}
	return 0
}

func (c *ggufCursor) str() string { return string(c.take(c.u64())) }

// ggufScalarSize gives the byte size of the fixed-size GGUF value types.
var ggufScalarSize = map[uint32]uint64{0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

// value reads a value of GGUF value type vt, returning strings and u32s and
// skipping everything else.
func (c *ggufCursor) value(vt uint32, depth int) any {
	if depth > 4 {
		c.err = errors.New("gguf arrays nested too deeply")
		return nil
	}
	switch vt {
	case 4:
		return c.u32()
	case 8:
		return c.str()
	case 9:
		et := c.u32()
		n := c.u64()
		if sz, ok := ggufScalarSize[et]; ok {
			if n > uint64(len(c.b)) {
				c.err = fmt.Errorf("gguf array of %d elements is longer than the file", n)
				return nil
			}
			c.take(n * sz)
			return nil
		}
		for i := uint64(0); i < n && c.err == nil; i++ {
			c.value(et, depth+1)
		}
		return nil
	default:
		sz, ok := ggufScalarSize[vt]
		if !ok {
			c.err = fmt.Errorf("unknown gguf value type %d", vt)
			return nil
		}
		c.take(sz)
		return nil
	}
}

// readTestGGUF parses the GGUF file at path.
func readTestGGUF(path string) (*testGGUF, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read gguf: %w", err)
	}
	c := &ggufCursor{b: b}
	if magic := c.u32(); magic != 0x46554747 {
		return nil, fmt.Errorf("parse gguf %s: bad magic %#x", path, magic)
	}
	if v := c.u32(); v != 3 && v != 2 {
		return nil, fmt.Errorf("parse gguf %s: unsupported version %d", path, v)
	}
	nTensors := c.u64()
	nKV := c.u64()
	if nTensors > 1<<20 || nKV > 1<<20 {
		return nil, fmt.Errorf("parse gguf %s: implausible counts %d tensors, %d keys", path, nTensors, nKV)
	}
	g := &testGGUF{data: b, tensors: map[string]testTensor{}, kv: map[string]any{}}
	for i := uint64(0); i < nKV && c.err == nil; i++ {
		key := c.str()
		vt := c.u32()
		if v := c.value(vt, 0); v != nil {
			g.kv[key] = v
		}
	}
	infos := make([]testTensor, 0, nTensors)
	offsets := make([]uint64, 0, nTensors)
	for i := uint64(0); i < nTensors && c.err == nil; i++ {
		var t testTensor
		t.name = c.str()
		nd := c.u32()
		if nd > 4 {
			return nil, fmt.Errorf("parse gguf %s: tensor %q has %d dims", path, t.name, nd)
		}
		for d := uint32(0); d < nd; d++ {
			t.ne = append(t.ne, c.u64())
		}
		t.typ = Type(c.u32())
		infos = append(infos, t)
		offsets = append(offsets, c.u64())
	}
	if c.err != nil {
		return nil, fmt.Errorf("parse gguf %s: %w", path, c.err)
	}
	align := uint64(32)
	if a, ok := g.kv["general.alignment"].(uint32); ok && a != 0 {
		align = uint64(a)
	}
	start := (uint64(c.off) + align - 1) / align * align
	for i, t := range infos {
		n := uint64(t.elements())
		if !t.typ.Known() || n%uint64(t.typ.BlockSize()) != 0 {
			return nil, fmt.Errorf("parse gguf %s: tensor %q has unusable type %s for %d elements", path, t.name, t.typ, n)
		}
		size := n / uint64(t.typ.BlockSize()) * uint64(t.typ.TypeSize())
		lo := start + offsets[i]
		if lo > uint64(len(b)) || size > uint64(len(b))-lo {
			return nil, fmt.Errorf("parse gguf %s: tensor %q runs past the end of the file", path, t.name)
		}
		t.data = b[lo : lo+size]
		g.tensors[t.name] = t
	}
	return g, nil
}

// f32s decodes a little-endian float32 tensor.
func (t testTensor) f32s() ([]float32, error) {
	if t.typ != F32 {
		return nil, fmt.Errorf("tensor %q is %s, not f32", t.name, t.typ)
	}
	out := make([]float32, len(t.data)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.data[4*i:]))
	}
	return out, nil
}
