package tokenizer

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
)

// testGGUF is a minimal GGUF key/value reader for these tests only: it
// reads the header and the KV section (arrays included) and stops before
// the tensor infos. It implements Metadata until internal/engine/gguf replaces it.
type testGGUF struct {
	kv map[string]any
}

// readTestGGUF reads the metadata of the GGUF file at path.
func readTestGGUF(path string) (*testGGUF, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read gguf: %w", err)
	}
	defer f.Close()
	r := &ggufReader{r: bufio.NewReaderSize(f, 1<<16)}
	magic := r.u32()
	version := r.u32()
	_ = r.u64() // tensor count
	nkv := r.u64()
	if r.err != nil {
		return nil, fmt.Errorf("read gguf %s header: %w", path, r.err)
	}
	if magic != 0x46554747 {
		return nil, fmt.Errorf("read gguf %s: bad magic %#x", path, magic)
	}
	if version != 2 && version != 3 {
		return nil, fmt.Errorf("read gguf %s: unsupported version %d", path, version)
	}
	if nkv > 1<<20 {
		return nil, fmt.Errorf("read gguf %s: implausible key count %d", path, nkv)
	}
	g := &testGGUF{kv: make(map[string]any, nkv)}
	for i := uint64(0); i < nkv; i++ {
		key := r.str()
		typ := r.u32()
		val := r.value(typ, 0)
		if r.err != nil {
			return nil, fmt.Errorf("read gguf %s key %d (%q): %w", path, i, key, r.err)
		}
		g.kv[key] = val
	}
	return g, nil
}

type ggufReader struct {
	r   *bufio.Reader
	err error
}

func (r *ggufReader) read(n int) []byte {
	if r.err != nil {
		return make([]byte, n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r.r, b); err != nil {
		r.err = err
	}
	return b
}

func (r *ggufReader) u32() uint32 { return binary.LittleEndian.Uint32(r.read(4)) }
func (r *ggufReader) u64() uint64 { return binary.LittleEndian.Uint64(r.read(8)) }

func (r *ggufReader) str() string {
	n := r.u64()
	if n > 1<<24 {
		if r.err == nil {
			r.err = fmt.Errorf("string length %d too large", n)
		}
		return ""
	}
	return string(r.read(int(n)))
}

func (r *ggufReader) value(typ uint32, depth int) any {
	switch typ {
	case 0:
		return r.read(1)[0]
	case 1:
		return int8(r.read(1)[0])
	case 2:
		return binary.LittleEndian.Uint16(r.read(2))
	case 3:
		return int16(binary.LittleEndian.Uint16(r.read(2)))
	case 4:
		return r.u32()
	case 5:
		return int32(r.u32())
	case 6:
		return math.Float32frombits(r.u32())
	case 7:
		return r.read(1)[0] != 0
	case 8:
		return r.str()
	case 9:
		et := r.u32()
		n := r.u64()
		if depth > 2 || n > 1<<24 {
			if r.err == nil {
				r.err = fmt.Errorf("array of %d elements (depth %d) too large", n, depth)
			}
			return nil
		}
		switch et {
		case 8:
			a := make([]string, n)
			for i := range a {
				a[i] = r.str()
			}
			return a
		case 6:
			a := make([]float32, n)
			for i := range a {
				a[i] = math.Float32frombits(r.u32())
			}
			return a
		case 5:
			a := make([]int32, n)
			for i := range a {
				a[i] = int32(r.u32())
			}
			return a
		default:
			a := make([]any, n)
			for i := range a {
				a[i] = r.value(et, depth+1)
			}
			return a
		}
	case 10:
		return r.u64()
	case 11:
		return int64(r.u64())
	case 12:
		return math.Float64frombits(r.u64())
	}
	if r.err == nil {
		r.err = fmt.Errorf("unknown value type %d", typ)
	}
	return nil
}

func (g *testGGUF) String(key string) (string, bool) {
	v, ok := g.kv[key].(string)
	return v, ok
}

func (g *testGGUF) Strings(key string) ([]string, bool) {
	v, ok := g.kv[key].([]string)
	return v, ok
}

func (g *testGGUF) Float32s(key string) ([]float32, bool) {
	v, ok := g.kv[key].([]float32)
	return v, ok
}

func (g *testGGUF) Int32s(key string) ([]int32, bool) {
	v, ok := g.kv[key].([]int32)
	return v, ok
}

func (g *testGGUF) Uint32(key string) (uint32, bool) {
	v, ok := g.kv[key].(uint32)
	return v, ok
}

func (g *testGGUF) Bool(key string) (bool, bool) {
	v, ok := g.kv[key].(bool)
	return v, ok
}
