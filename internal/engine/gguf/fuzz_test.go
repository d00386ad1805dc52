package gguf_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"tandem/internal/engine/gguf"
	"tandem/internal/engine/tensor"
)

var updateSeeds = flag.Bool("update-seeds", false, "rewrite the FuzzParse seed corpus in testdata/fuzz/FuzzParse")

// seedDir holds the FuzzParse seed corpus, which go test also runs as
// ordinary test cases.
const seedDir = "testdata/fuzz/FuzzParse"

// fuzzSeeds returns the seed corpus: small valid files made with the Writer
// and corrupted variants of them, by file name.
func fuzzSeeds(t testing.TB) map[string][]byte {
	t.Helper()
	w := gguf.NewWriter()
	w.SetString("general.architecture", "llama")
	w.SetUint32("llama.embedding_length", 8)
	w.SetFloat32("llama.attention.layer_norm_rms_epsilon", 1e-5)
	w.SetStrings("tokenizer.ggml.tokens", []string{"<unk>", "<s>", "", "a"})
	w.SetInt32s("tokenizer.ggml.token_type", []int32{2, 3, 1, 1})
	w.SetBool("tokenizer.ggml.add_bos_token", true)
	w.Set("nested", mustArray(t, gguf.TypeArray, gguf.Float32sValue([]float32{1}), gguf.StringsValue(nil)))
	if err := w.AddTensor("token_embd.weight", tensor.F32, []uint64{8, 4}, tensorData(0, 128)); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensor("blk.0.ffn_down.weight", tensor.Q8_0, []uint64{32, 2}, tensorData(1, 68)); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensor("output_norm.weight", tensor.F16, []uint64{8}, tensorData(2, 16)); err != nil {
		t.Fatal(err)
	}
	var model bytes.Buffer
	if _, err := w.WriteTo(&model); err != nil {
		t.Fatal(err)
	}
	m := model.Bytes()

	empty := gguf.NewWriter()
	var emptyBuf bytes.Buffer
	if _, err := empty.WriteTo(&emptyBuf); err != nil {
		t.Fatal(err)
	}

	aligned := gguf.NewWriter()
	aligned.SetUint32("general.alignment", 8)
	aligned.AddTensor("x", tensor.I8, []uint64{3}, []byte{1, 2, 3})
	aligned.AddTensor("y", tensor.I8, []uint64{5}, []byte{4, 5, 6, 7, 8})
	var alignedBuf bytes.Buffer
	if _, err := aligned.WriteTo(&alignedBuf); err != nil {
		t.Fatal(err)
	}

	corrupt := func(at int, b ...byte) []byte {
		c := slices.Clone(m)
		copy(c[at:], b)
		return c
	}
	f, err := gguf.Parse(m)
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{
		"valid-model":       m,
		"valid-empty":       emptyBuf.Bytes(),
		"valid-align8":      alignedBuf.Bytes(),
		"valid-v2":          corrupt(4, 2),
		"nested-arrays":     kvFile(nestedArrays(8)),
		"bad-magic":         corrupt(0, 'G', 'G', 'M', 'L'),
		"version-1":         corrupt(4, 1),
		"truncated-header":  m[:int(f.DataOffset)-5],
		"truncated-data":    m[:len(m)-40],
		"huge-tensor-count": corrupt(8, 0, 0, 0, 0, 0, 0, 0, 0x10),
		"duplicate-key":     kvFile(func(e *enc) { e.str("k").u32(0).raw(1) }, func(e *enc) { e.str("k").u32(0).raw(1) }),
		"misaligned-offset": tensorFile([]info{{"a", []uint64{1}, 0, 0}, {"b", []uint64{1}, 0, 4}}, 64),
		"row-not-blocks":    tensorFile([]info{{"b", []uint64{172, 2}, uint32(tensor.Q8_0), 0}}, 384),
	}
}

// seedFile encodes b in the go test fuzz corpus format.
func seedFile(b []byte) []byte {
	return []byte("go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n")
}

// TestFuzzSeeds checks that the committed seed corpus is the one fuzzSeeds
// generates (rewrite it with -update-seeds) and that the valid seeds parse.
func TestFuzzSeeds(t *testing.T) {
	seeds := fuzzSeeds(t)
	if *updateSeeds {
		if err := os.MkdirAll(seedDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range seeds {
			if err := os.WriteFile(filepath.Join(seedDir, name), seedFile(b), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, b := range seeds {
		got, err := os.ReadFile(filepath.Join(seedDir, name))
		if err != nil || !bytes.Equal(got, seedFile(b)) {
			t.Errorf("seed %s is missing or stale (%v); run go test -run TestFuzzSeeds -update-seeds ./internal/gguf/", name, err)
		}
		_, err = gguf.Parse(b)
		if valid := strings.HasPrefix(name, "valid-") || name == "nested-arrays"; valid != (err == nil) {
			t.Errorf("Parse(seed %s) = %v, want success %v", name, err, valid)
		}
	}
}

// FuzzParse checks that Parse never panics or over-allocates, that every
// failure is a *FormatError with a sentinel kind, that ParseHeader accepts
// what Parse accepts, and that an accepted file survives a rewrite through
// the Writer unchanged in meaning, with the rewrite a fixed point.
func FuzzParse(f *testing.F) {
	for _, b := range fuzzSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := gguf.Parse(data)
		_, headerErr := gguf.ParseHeader(data)
		if err != nil {
			checkFormatError(t, err)
			return
		}
		if headerErr != nil {
			t.Fatalf("Parse succeeded but ParseHeader = %v", headerErr)
		}
		checkInvariants(t, file, len(data))
		once := rewrite(t, file)
		again, err := gguf.Parse(once)
		if err != nil {
			t.Fatalf("Parse(rewrite(x)) = %v", err)
		}
		checkMeaning(t, again, file)
		if twice := rewrite(t, again); !bytes.Equal(twice, once) {
			t.Fatalf("rewrite is not a fixed point: %d then %d bytes", len(once), len(twice))
		}
	})
}

func checkFormatError(t *testing.T, err error) {
	t.Helper()
	var fe *gguf.FormatError
	if !errors.As(err, &fe) {
		t.Fatalf("Parse error %T (%v) is not a *FormatError", err, err)
	}
	kinds := []error{gguf.ErrMagic, gguf.ErrVersion, gguf.ErrTruncated, gguf.ErrDuplicate, gguf.ErrValue, gguf.ErrTensor, gguf.ErrLayout}
	if !slices.Contains(kinds, fe.Kind) {
		t.Fatalf("Parse error kind %v is not a sentinel", fe.Kind)
	}
}

func checkInvariants(t *testing.T, f *gguf.File, size int) {
	t.Helper()
	if f.Alignment == 0 || f.Alignment&(f.Alignment-1) != 0 || f.DataOffset%f.Alignment != 0 {
		t.Fatalf("alignment %d, data offset %d", f.Alignment, f.DataOffset)
	}
	for _, ti := range f.Tensors {
		if uint64(len(ti.Data)) != ti.Size || ti.Offset%f.Alignment != 0 || f.DataOffset+ti.Offset+ti.Size > uint64(size) {
			t.Fatalf("tensor %s: %d data bytes, size %d, offset %d, file %d bytes", ti.Name, len(ti.Data), ti.Size, ti.Offset, size)
		}
		if len(ti.Dims) > 4 || len(ti.Name) > 63 || !ti.Type.Known() {
			t.Fatalf("tensor %s: %d dims, type %s", ti.Name, len(ti.Dims), ti.Type)
		}
	}
}

// checkMeaning compares everything but the layout.
func checkMeaning(t *testing.T, got, want *gguf.File) {
	t.Helper()
	if len(got.KV) != len(want.KV) || len(got.Tensors) != len(want.Tensors) {
		t.Fatalf("rewrite has %d KV, %d tensors; want %d, %d", len(got.KV), len(got.Tensors), len(want.KV), len(want.Tensors))
	}
	for i := range want.KV {
		if got.KV[i].Key != want.KV[i].Key || !got.KV[i].Value.Equal(want.KV[i].Value) {
			t.Fatalf("rewrite KV[%d] = %q %s, want %q %s", i, got.KV[i].Key, got.KV[i].Value.Text(), want.KV[i].Key, want.KV[i].Value.Text())
		}
	}
	for i := range want.Tensors {
		g, w := got.Tensors[i], want.Tensors[i]
		if g.Name != w.Name || g.Type != w.Type || !slices.Equal(g.Dims, w.Dims) || !bytes.Equal(g.Data, w.Data) {
			t.Fatalf("rewrite tensor %d = %s", i, fmt.Sprint(g.Name, g.Type, g.Dims))
		}
	}
}
