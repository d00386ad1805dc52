package gguf_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tandem/internal/engine/gguf"
	"tandem/internal/engine/tensor"
	"tandem/internal/testenv"
)

// legacyV2 is the GGUF v2 file whose ffn_down rows are not whole Q8_0 blocks.
const legacyV2 = "tinyllamas-stories-260k-q8_0.legacy-v2.gguf"

// sharedGGUFs lists every .gguf file under the shared models and testdata
// folders, skipping the test when the shared folder is absent.
func sharedGGUFs(t *testing.T) []string {
	t.Helper()
	var paths []string
	for _, dir := range []string{"models", "testdata"} {
		root := testenv.Shared(t, dir)
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".gguf") {
				paths = append(paths, p)
			}
			return err
		})
		if err != nil {
			t.Fatalf("walk %s: %v", root, err)
		}
	}
	if len(paths) < 5 {
		t.Fatalf("found %d .gguf files in the shared folder, want at least 5: %v", len(paths), paths)
	}
	return paths
}

// rewrite copies every metadata entry and tensor of f into a new Writer and
// returns its output.
func rewrite(t testing.TB, f *gguf.File) []byte {
	t.Helper()
	w := gguf.NewWriter()
	for _, kv := range f.KV {
		w.Set(kv.Key, kv.Value)
	}
	for _, ti := range f.Tensors {
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, ti.Data); err != nil {
			t.Fatalf("AddTensor(%s) = %v", ti.Name, err)
		}
	}
	var buf bytes.Buffer
	n, err := w.WriteTo(&buf)
	if err != nil {
		t.Fatalf("WriteTo() = %v", err)
	}
	if n != int64(buf.Len()) {
		t.Errorf("WriteTo() = %d bytes, but wrote %d", n, buf.Len())
	}
	return buf.Bytes()
}

// TestSharedFiles opens every shared GGUF file; all but the legacy v2 file
// must parse, keep their tensor data inside the file, agree with Parse of
// the same bytes, and rewrite through the Writer to identical bytes (all of
// them were written by llama.cpp or gguf-py, so this checks the Writer's
// layout against theirs).
func TestSharedFiles(t *testing.T) {
	for _, p := range sharedGGUFs(t) {
		t.Run(filepath.Base(p), func(t *testing.T) {
			f, err := gguf.Open(p)
			if filepath.Base(p) == legacyV2 {
				if err == nil {
					f.Close()
					t.Fatalf("Open(%s) succeeded, want a block size error", p)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open(%s) = %v", p, err)
			}
			defer f.Close()
			orig, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			parsed, err := gguf.Parse(orig)
			if err != nil {
				t.Fatalf("Parse(%s) = %v", p, err)
			}
			checkSameFile(t, parsed, f)
			for _, ti := range f.Tensors {
				if uint64(len(ti.Data)) != ti.Size || ti.Offset%f.Alignment != 0 {
					t.Errorf("tensor %s: len(Data) = %d, Offset = %d; want Size %d and a multiple of %d",
						ti.Name, len(ti.Data), ti.Offset, ti.Size, f.Alignment)
				}
			}
			if got := rewrite(t, f); !bytes.Equal(got, orig) {
				t.Errorf("rewrite(%s) = %d bytes differing from the original %d bytes", p, len(got), len(orig))
			}
		})
	}
}

func TestStories260K(t *testing.T) {
	p := testenv.Shared(t, "models/stories260K.gguf")
	f, err := gguf.Open(p)
	if err != nil {
		t.Fatalf("Open(%s) = %v", p, err)
	}
	defer f.Close()
	if f.Version != 3 || len(f.Tensors) != 48 || len(f.KV) != 19 || f.DataOffset != 14176 || f.Alignment != 32 {
		t.Errorf("Open(stories260K) = v%d, %d tensors, %d KV, data at %d, alignment %d; want v3, 48, 19, 14176, 32",
			f.Version, len(f.Tensors), len(f.KV), f.DataOffset, f.Alignment)
	}
	if got := f.Architecture(); got != "llama" {
		t.Errorf("Architecture() = %q, want llama", got)
	}
	if got, ok := f.Uint32("llama.embedding_length"); got != 64 || !ok {
		t.Errorf("Uint32(llama.embedding_length) = %d, %v; want 64, true", got, ok)
	}
	if got, ok := f.Float32("llama.attention.layer_norm_rms_epsilon"); got != 1e-5 || !ok {
		t.Errorf("Float32(llama.attention.layer_norm_rms_epsilon) = %g, %v; want 1e-05, true", got, ok)
	}
	if _, ok := f.Float32("llama.rope.freq_base"); ok {
		t.Errorf("Float32(llama.rope.freq_base) found a value; the file has no such key")
	}
	toks, ok := f.Strings("tokenizer.ggml.tokens")
	if len(toks) != 512 || !ok || toks[1] != "<s>" {
		t.Errorf("Strings(tokenizer.ggml.tokens) = %d tokens (ok %v), want 512 with token 1 <s>", len(toks), ok)
	}
	if types, ok := f.Int32s("tokenizer.ggml.token_type"); len(types) != 512 || !ok || types[0] != 2 {
		t.Errorf("Int32s(tokenizer.ggml.token_type) = %d values (ok %v), want 512 starting with 2", len(types), ok)
	}
	if scores, ok := f.Float32s("tokenizer.ggml.scores"); len(scores) != 512 || !ok {
		t.Errorf("Float32s(tokenizer.ggml.scores) = %d values, %v; want 512, true", len(scores), ok)
	}
	// tokenizer.ggml.seperator_token_id is stored as u32 0xffffffff.
	if got, ok := f.Int("tokenizer.ggml.seperator_token_id"); got != math.MaxUint32 || !ok {
		t.Errorf("Int(tokenizer.ggml.seperator_token_id) = %d, %v; want %d, true", got, ok, uint32(math.MaxUint32))
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok {
		t.Fatalf("Tensor(token_embd.weight) not found")
	}
	if !slices.Equal(emb.Dims, []uint64{64, 512}) || emb.Type != tensor.F32 || emb.NumElements() != 64*512 || emb.Size != 4*64*512 {
		t.Errorf("token_embd.weight = dims %v %s, %d elements, %d bytes; want [64 512] f32, 32768, 131072",
			emb.Dims, emb.Type, emb.NumElements(), emb.Size)
	}
	// The llama2.c checkpoint of the same model holds the embedding table
	// right after its 7-int32 header: the bytes must match.
	bin, err := os.ReadFile(testenv.Shared(t, "models/stories260K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(emb.Data, bin[28:28+len(emb.Data)]) {
		t.Errorf("token_embd.weight data differs from the embedding table in stories260K.bin")
	}
}

func TestQuantTestVectors(t *testing.T) {
	p := testenv.Shared(t, "testdata/quant/quant-testvectors.gguf")
	f, err := gguf.Open(p)
	if err != nil {
		t.Fatalf("Open(%s) = %v", p, err)
	}
	defer f.Close()
	if len(f.Tensors) != 33 {
		t.Errorf("Open(quant-testvectors) has %d tensors, want 33", len(f.Tensors))
	}
	for _, ti := range f.Tensors {
		if !slices.Equal(ti.Dims, []uint64{512, 4}) {
			t.Errorf("tensor %s dims = %v, want [512 4]", ti.Name, ti.Dims)
		}
		want := tensor.F32
		if name, ok := strings.CutSuffix(strings.TrimPrefix(ti.Name, "rnd."), ".q"); ok {
			if want, err = tensor.ParseType(name); err != nil {
				t.Fatalf("tensor %s: %v", ti.Name, err)
			}
		}
		if ti.Type != want {
			t.Errorf("tensor %s type = %s, want %s", ti.Name, ti.Type, want)
		}
		rowBytes, _ := ti.Type.RowBytes(512)
		if ti.Size != uint64(4*rowBytes) || len(ti.Data) != 4*rowBytes {
			t.Errorf("tensor %s: Size %d, len(Data) %d, want %d", ti.Name, ti.Size, len(ti.Data), 4*rowBytes)
		}
	}
}

func TestVocabOnlyFile(t *testing.T) {
	p := testenv.Shared(t, "testdata/tokenizer/ggml-vocab-llama-spm.gguf")
	f, err := gguf.Open(p)
	if err != nil {
		t.Fatalf("Open(%s) = %v", p, err)
	}
	defer f.Close()
	toks, _ := f.Strings("tokenizer.ggml.tokens")
	add, ok := f.Bool("tokenizer.ggml.add_bos_token")
	if len(f.Tensors) != 0 || len(f.KV) != 22 || len(toks) != 32000 || !add || !ok {
		t.Errorf("Open(llama-spm vocab) = %d tensors, %d KV, %d tokens, add_bos %v/%v; want 0, 22, 32000, true/true",
			len(f.Tensors), len(f.KV), len(toks), add, ok)
	}
}

// TestLegacyV2 checks that the legacy Q8_0 file is refused as llama.cpp
// refuses it, with an error that names the tensor and still carries the
// header that was read.
func TestLegacyV2(t *testing.T) {
	p := testenv.Shared(t, "models/"+legacyV2)
	f, err := gguf.Open(p)
	if err == nil {
		f.Close()
		t.Fatalf("Open(%s) succeeded, want an error", p)
	}
	const want = "tensor blk.0.ffn_down.weight: row of 172 elements is not a multiple of the q8_0 block size 32"
	if !strings.Contains(err.Error(), want) || !errors.Is(err, gguf.ErrTensor) {
		t.Errorf("Open(%s) = %v, want an ErrTensor containing %q", p, err, want)
	}
	var fe *gguf.FormatError
	if !errors.As(err, &fe) {
		t.Fatalf("Open(%s) error %T is not a *gguf.FormatError", p, err)
	}
	if fe.Version != 2 || fe.TensorCount != 48 || fe.KVCount != 20 || fe.Tensor != "blk.0.ffn_down.weight" {
		t.Errorf("FormatError = v%d, %d tensors, %d KV, tensor %q; want v2, 48, 20, blk.0.ffn_down.weight",
			fe.Version, fe.TensorCount, fe.KVCount, fe.Tensor)
	}
}

// mustArray is ArrayValue for arguments known to be valid.
func mustArray(t testing.TB, elem gguf.ValueType, elems ...gguf.Value) gguf.Value {
	t.Helper()
	v, err := gguf.ArrayValue(elem, elems...)
	if err != nil {
		t.Fatalf("ArrayValue(%s, %d elements) = %v", elem, len(elems), err)
	}
	return v
}

// allKinds returns metadata holding every value type, including empty
// strings and arrays and arrays of arrays of mixed element types.
func allKinds(t testing.TB) []gguf.KV {
	nested := mustArray(t, gguf.TypeArray,
		mustArray(t, gguf.TypeInt16, gguf.Int16Value(-1), gguf.Int16Value(7)),
		mustArray(t, gguf.TypeString),
		mustArray(t, gguf.TypeArray, mustArray(t, gguf.TypeBool, gguf.BoolValue(true))),
	)
	return []gguf.KV{
		{"general.architecture", gguf.StringValue("llama")},
		{"u8", gguf.Uint8Value(200)},
		{"i8", gguf.Int8Value(-100)},
		{"u16", gguf.Uint16Value(60000)},
		{"i16", gguf.Int16Value(-30000)},
		{"u32", gguf.Uint32Value(4000000000)},
		{"i32", gguf.Int32Value(-2000000000)},
		{"f32", gguf.Float32Value(-1.5)},
		{"f32.nan", gguf.Float32Value(float32(math.NaN()))},
		{"bool.true", gguf.BoolValue(true)},
		{"bool.false", gguf.BoolValue(false)},
		{"string", gguf.StringValue("héllo\x00world")},
		{"string.empty", gguf.StringValue("")},
		{"u64", gguf.Uint64Value(math.MaxUint64)},
		{"i64", gguf.Int64Value(math.MinInt64)},
		{"f64", gguf.Float64Value(math.Pi)},
		{"", gguf.StringValue("empty key")},
		{"array.empty", mustArray(t, gguf.TypeUint8)},
		{"array.strings", gguf.StringsValue([]string{"a", "", "ccc"})},
		{"array.f32", gguf.Float32sValue([]float32{1, -2, 0.25})},
		{"array.f64", mustArray(t, gguf.TypeFloat64, gguf.Float64Value(0.5), gguf.Float64Value(1e300))},
		{"array.i32", gguf.Int32sValue([]int32{-1, 0, 1 << 30})},
		{"array.u32", gguf.Uint32sValue([]uint32{1, math.MaxUint32})},
		{"array.u8", mustArray(t, gguf.TypeUint8, gguf.Uint8Value(1), gguf.Uint8Value(255))},
		{"array.i64", mustArray(t, gguf.TypeInt64, gguf.Int64Value(-5), gguf.Int64Value(1<<40))},
		{"array.bool", mustArray(t, gguf.TypeBool, gguf.BoolValue(false), gguf.BoolValue(true))},
		{"array.nested", nested},
	}
}

// testTensor is a tensor for round-trip tests.
type testTensor struct {
	name   string
	typ    tensor.Type
	dims   []uint64
	stream bool // add with AddTensorFunc
}

var testTensors = []testTensor{
	{"f32.matrix", tensor.F32, []uint64{4, 3}, false},
	{"f16.vector", tensor.F16, []uint64{7}, false},
	{"q8_0.matrix", tensor.Q8_0, []uint64{64, 2}, true},
	{"empty", tensor.F32, []uint64{0, 3}, false},
	{"q4_k.row", tensor.Q4_K, []uint64{256, 1}, false},
	{"scalar", tensor.F32, []uint64{}, false},
	{"bf16.4d", tensor.BF16, []uint64{2, 3, 2, 2}, true},
	{"q6_k.streamed", tensor.Q6_K, []uint64{512, 3}, true},
}

// tensorData returns deterministic bytes for tensor i.
func tensorData(i int, size uint64) []byte {
	b := make([]byte, size)
	for j := range b {
		b[j] = byte(i*31 + j*7 + 1)
	}
	return b
}

func tensorSize(t testing.TB, tt testTensor) uint64 {
	n := uint64(1)
	for _, d := range tt.dims {
		n *= d
	}
	ne0 := uint64(1)
	if len(tt.dims) > 0 {
		ne0 = tt.dims[0]
	}
	if n == 0 {
		return 0
	}
	row, err := tt.typ.RowBytes(int(ne0))
	if err != nil {
		t.Fatal(err)
	}
	return n / ne0 * uint64(row)
}

// buildTestFile writes allKinds and testTensors with the given alignment
// (0: leave general.alignment unset).
func buildTestFile(t testing.TB, alignment uint32) []byte {
	t.Helper()
	w := gguf.NewWriter()
	for _, kv := range allKinds(t) {
		w.Set(kv.Key, kv.Value)
	}
	if alignment != 0 {
		w.SetUint32("general.alignment", alignment)
	}
	for i, tt := range testTensors {
		data := tensorData(i, tensorSize(t, tt))
		var err error
		if tt.stream {
			err = w.AddTensorFunc(tt.name, tt.typ, tt.dims, func(out io.Writer) error {
				for chunk := range slices.Chunk(data, 5) {
					if _, err := out.Write(chunk); err != nil {
						return err
					}
				}
				return nil
			})
		} else {
			err = w.AddTensor(tt.name, tt.typ, tt.dims, data)
		}
		if err != nil {
			t.Fatalf("add tensor %s: %v", tt.name, err)
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatalf("WriteTo() = %v", err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	for _, alignment := range []uint32{0, 1, 64, 4096} {
		t.Run(fmt.Sprint("alignment=", alignment), func(t *testing.T) {
			data := buildTestFile(t, alignment)
			f, err := gguf.Parse(data)
			if err != nil {
				t.Fatalf("Parse(written file) = %v", err)
			}
			wantKV := allKinds(t)
			wantAlign := uint64(32)
			if alignment != 0 {
				wantKV = append(wantKV, gguf.KV{Key: "general.alignment", Value: gguf.Uint32Value(alignment)})
				wantAlign = uint64(alignment)
			}
			if f.Version != 3 || f.Alignment != wantAlign || f.DataOffset%wantAlign != 0 {
				t.Errorf("Parse() = v%d, alignment %d, data at %d; want v3, alignment %d, data aligned",
					f.Version, f.Alignment, f.DataOffset, wantAlign)
			}
			checkKVs(t, f.KV, wantKV)
			checkTensors(t, f, wantAlign)
			if again := rewrite(t, f); !bytes.Equal(again, data) {
				t.Errorf("write(parse(write(x))) differs from write(x): %d vs %d bytes", len(again), len(data))
			}
		})
	}
}

func checkKVs(t *testing.T, got, want []gguf.KV) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("Parse() has %d KV, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Key != want[i].Key || !got[i].Value.Equal(want[i].Value) {
			t.Errorf("KV[%d] = %q: %s, want %q: %s", i, got[i].Key, got[i].Value.Text(), want[i].Key, want[i].Value.Text())
		}
	}
}

func checkTensors(t *testing.T, f *gguf.File, align uint64) {
	t.Helper()
	if len(f.Tensors) != len(testTensors) {
		t.Fatalf("Parse() has %d tensors, want %d", len(f.Tensors), len(testTensors))
	}
	for i, tt := range testTensors {
		got, ok := f.Tensor(tt.name)
		if !ok || got != &f.Tensors[i] {
			t.Errorf("Tensor(%s) = %p, %v; want &Tensors[%d]", tt.name, got, ok, i)
			continue
		}
		size := tensorSize(t, tt)
		if got.Type != tt.typ || !slices.Equal(got.Dims, tt.dims) || got.Size != size || got.Offset%align != 0 {
			t.Errorf("tensor %s = %s %v, %d bytes at %d; want %s %v, %d bytes, offset a multiple of %d",
				tt.name, got.Type, got.Dims, got.Size, got.Offset, tt.typ, tt.dims, size, align)
		}
		if !bytes.Equal(got.Data, tensorData(i, size)) {
			t.Errorf("tensor %s data differs from what was written", tt.name)
		}
	}
}

// checkSameFile compares two parses of the same bytes.
func checkSameFile(t *testing.T, got, want *gguf.File) {
	t.Helper()
	if got.Version != want.Version || got.Alignment != want.Alignment || got.DataOffset != want.DataOffset {
		t.Errorf("file = v%d align %d data %d, want v%d align %d data %d",
			got.Version, got.Alignment, got.DataOffset, want.Version, want.Alignment, want.DataOffset)
	}
	checkKVs(t, got.KV, want.KV)
	if len(got.Tensors) != len(want.Tensors) {
		t.Fatalf("file has %d tensors, want %d", len(got.Tensors), len(want.Tensors))
	}
	for i, g := range got.Tensors {
		w := want.Tensors[i]
		if g.Name != w.Name || g.Type != w.Type || !slices.Equal(g.Dims, w.Dims) || g.Offset != w.Offset ||
			g.Size != w.Size || !bytes.Equal(g.Data, w.Data) {
			t.Errorf("tensor %d = %s %s %v @%d+%d, want %s %s %v @%d+%d",
				i, g.Name, g.Type, g.Dims, g.Offset, g.Size, w.Name, w.Type, w.Dims, w.Offset, w.Size)
		}
	}
}

// TestTruncated parses every prefix of a valid file: each must fail until
// the last tensor's data is complete (its trailing padding is optional),
// and ParseHeader must succeed once the tensor infos are complete.
func TestTruncated(t *testing.T) {
	data := buildTestFile(t, 0)
	f, err := gguf.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	last := f.Tensors[len(f.Tensors)-1]
	dataEnd := int(f.DataOffset + last.Offset + last.Size)
	headerEnd := -1
	for n := range len(data) {
		_, err := gguf.Parse(data[:n])
		if (err == nil) != (n >= dataEnd) {
			t.Errorf("Parse(first %d of %d bytes) error = %v, want error only below %d", n, len(data), err, dataEnd)
		}
		if err != nil {
			var fe *gguf.FormatError
			if !errors.As(err, &fe) || !errors.Is(err, gguf.ErrTruncated) {
				t.Errorf("Parse(first %d bytes) = %v, want a *FormatError wrapping ErrTruncated", n, err)
			}
		}
		if h, err := gguf.ParseHeader(data[:n]); err == nil && headerEnd < 0 {
			headerEnd = n
			if len(h.Tensors) != len(testTensors) || h.Tensors[0].Data != nil || h.DataOffset != f.DataOffset {
				t.Errorf("ParseHeader(first %d bytes) = %d tensors, Data %v, data at %d; want %d, nil, %d",
					n, len(h.Tensors), h.Tensors[0].Data != nil, h.DataOffset, len(testTensors), f.DataOffset)
			}
		}
	}
	if headerEnd < 0 || uint64(headerEnd) > f.DataOffset || f.DataOffset-uint64(headerEnd) >= f.Alignment {
		t.Errorf("ParseHeader first succeeded at %d bytes, want just before the data section at %d", headerEnd, f.DataOffset)
	}
}

// enc builds raw GGUF bytes for corruption tests.
type enc struct{ b []byte }

func (e *enc) u32(x uint32) *enc { e.b = binary.LittleEndian.AppendUint32(e.b, x); return e }
func (e *enc) u64(x uint64) *enc { e.b = binary.LittleEndian.AppendUint64(e.b, x); return e }
func (e *enc) str(s string) *enc { e.u64(uint64(len(s))); e.b = append(e.b, s...); return e }
func (e *enc) raw(b ...byte) *enc {
	e.b = append(e.b, b...)
	return e
}

// header starts a v3 file with the given counts.
func header(nTensors, nKV uint64) *enc {
	e := &enc{b: []byte("GGUF")}
	return e.u32(3).u64(nTensors).u64(nKV)
}

// info is a raw tensor info.
type info struct {
	name string
	dims []uint64
	typ  uint32
	off  uint64
}

// tensorFile builds a file with no metadata, the given tensor infos, and
// dataBytes zero bytes of data after the aligned data section start.
func tensorFile(infos []info, dataBytes int) []byte {
	e := header(uint64(len(infos)), 0)
	for _, in := range infos {
		e.str(in.name).u32(uint32(len(in.dims)))
		for _, d := range in.dims {
			e.u64(d)
		}
		e.u32(in.typ).u64(in.off)
	}
	for len(e.b)%32 != 0 {
		e.b = append(e.b, 0)
	}
	return append(e.b, make([]byte, dataBytes)...)
}

// kvFile builds a file with one metadata entry per body and no tensors.
func kvFile(bodies ...func(*enc)) []byte {
	e := header(0, uint64(len(bodies)))
	for _, body := range bodies {
		body(e)
	}
	return e.b
}

func nestedArrays(depth int) func(*enc) {
	return func(e *enc) {
		e.str("nested").u32(uint32(gguf.TypeArray))
		for range depth - 1 {
			e.u32(uint32(gguf.TypeArray)).u64(1)
		}
		e.u32(uint32(gguf.TypeUint8)).u64(1).raw(7)
	}
}

func TestCorrupt(t *testing.T) {
	f32 := uint32(tensor.F32)
	q80 := uint32(tensor.Q8_0)
	manyArrays := func(e *enc) {
		e.str("arrays").u32(uint32(gguf.TypeArray)).u32(uint32(gguf.TypeArray)).u64(1<<16 + 1)
		for range 1<<16 + 1 {
			e.u32(uint32(gguf.TypeUint8)).u64(0)
		}
	}
	tests := []struct {
		name   string
		data   []byte
		kind   error
		detail string // substring of the error text
		key    string // FormatError.Key
		tensor string // FormatError.Tensor
	}{
		{"empty", nil, gguf.ErrTruncated, "too short", "", ""},
		{"bad magic", append([]byte("GGML"), header(0, 0).b[4:]...), gguf.ErrMagic, `magic bytes "GGML"`, "", ""},
		{"version 1", (&enc{b: []byte("GGUF")}).u32(1).u64(0).u64(0).b, gguf.ErrVersion, "version 1 is not supported", "", ""},
		{"version 4", (&enc{b: []byte("GGUF")}).u32(4).u64(0).u64(0).b, gguf.ErrVersion, "version 4 is not supported", "", ""},
		{"big-endian", append([]byte("GGUF"), 0, 0, 0, 3), gguf.ErrVersion, "big-endian", "", ""},
		{"huge tensor count", header(1<<60, 0).b, gguf.ErrTruncated, "claims 1152921504606846976 tensors", "", ""},
		{"huge kv count", header(0, 1<<60).b, gguf.ErrTruncated, "1152921504606846976 metadata entries", "", ""},
		{"huge key length", header(0, 1).u64(1 << 62).u32(0).raw(0).b, gguf.ErrTruncated, "metadata key length 4611686018427387904", "", ""},
		{"huge string value", kvFile(func(e *enc) { e.str("s").u32(uint32(gguf.TypeString)).u64(math.MaxUint64) }),
			gguf.ErrTruncated, "string value length", "s", ""},
		{"huge array", kvFile(func(e *enc) { e.str("a").u32(uint32(gguf.TypeArray)).u32(uint32(gguf.TypeUint64)).u64(1 << 61) }),
			gguf.ErrTruncated, "array of 2305843009213693952 u64 elements", "a", ""},
		{"huge string array", kvFile(func(e *enc) { e.str("a").u32(uint32(gguf.TypeArray)).u32(uint32(gguf.TypeString)).u64(1 << 40).u64(0) }),
			gguf.ErrTruncated, "array of 1099511627776 string elements", "a", ""},
		{"duplicate key", kvFile(
			func(e *enc) { e.str("k").u32(uint32(gguf.TypeUint8)).raw(1) },
			func(e *enc) { e.str("k").u32(uint32(gguf.TypeUint8)).raw(2) }),
			gguf.ErrDuplicate, "duplicate key (entries 0 and 1)", "k", ""},
		{"bad value type", kvFile(func(e *enc) { e.str("k").u32(13).raw(0, 0, 0, 0) }), gguf.ErrValue, "invalid value type 13", "k", ""},
		{"bad array element type", kvFile(func(e *enc) { e.str("k").u32(uint32(gguf.TypeArray)).u32(99).u64(0) }),
			gguf.ErrValue, "invalid array element type 99", "k", ""},
		{"arrays nested 9 deep", kvFile(nestedArrays(9)), gguf.ErrValue, "arrays nest deeper than the limit of 8", "nested", ""},
		{"too many nested arrays", kvFile(manyArrays), gguf.ErrValue, "more than 65536 arrays inside arrays", "arrays", ""},
		{"alignment not a power of two", kvFile(func(e *enc) { e.str("general.alignment").u32(uint32(gguf.TypeUint32)).u32(48) }),
			gguf.ErrValue, "general.alignment is 48, not a power of two", "general.alignment", ""},
		{"alignment zero", kvFile(func(e *enc) { e.str("general.alignment").u32(uint32(gguf.TypeUint32)).u32(0) }),
			gguf.ErrValue, "general.alignment is 0, not a power of two", "general.alignment", ""},
		{"alignment u64", kvFile(func(e *enc) { e.str("general.alignment").u32(uint32(gguf.TypeUint64)).u64(32) }),
			gguf.ErrValue, "general.alignment has type u64, want u32", "general.alignment", ""},
		{"duplicate tensor", tensorFile([]info{{"t", []uint64{8}, f32, 0}, {"t", []uint64{8}, f32, 32}}, 64),
			gguf.ErrDuplicate, "duplicate tensor name (tensors 0 and 1)", "", "t"},
		{"name too long", tensorFile([]info{{strings.Repeat("n", 64), []uint64{8}, f32, 0}}, 32),
			gguf.ErrTensor, "name is 64 bytes long, more than the limit of 63", "", strings.Repeat("n", 64)},
		{"invalid type", tensorFile([]info{{"t", []uint64{8}, 99, 0}}, 32), gguf.ErrTensor, "unknown or unsupported ggml type 99", "", "t"},
		{"unsupported type", tensorFile([]info{{"t", []uint64{256}, uint32(tensor.IQ2_XXS), 0}}, 128),
			gguf.ErrTensor, "unknown or unsupported ggml type 16", "", "t"},
		{"5 dims", tensorFile([]info{{"t", []uint64{1, 1, 1, 1, 1}, f32, 0}}, 32), gguf.ErrTensor, "5 dimensions, more than the limit of 4", "", "t"},
		{"negative dim", tensorFile([]info{{"t", []uint64{4, 1 << 63}, f32, 0}}, 32), gguf.ErrTensor, "dimension 1 has -9223372036854775808 elements", "", "t"},
		{"element count overflow", tensorFile([]info{{"t", []uint64{1 << 32, 1 << 32}, f32, 0}}, 32), gguf.ErrTensor, "more than 2^63-1 elements", "", "t"},
		{"byte count overflow", tensorFile([]info{{"t", []uint64{1 << 31, 1 << 31}, f32, 0}}, 32), gguf.ErrTensor, "more than 2^63-1 bytes", "", "t"},
		{"row not whole blocks", tensorFile([]info{{"blk.0.ffn_down.weight", []uint64{172, 64}, q80, 0}}, 64),
			gguf.ErrTensor, "row of 172 elements is not a multiple of the q8_0 block size 32", "", "blk.0.ffn_down.weight"},
		{"misaligned offset", tensorFile([]info{{"a", []uint64{1}, f32, 0}, {"b", []uint64{1}, f32, 4}}, 64),
			gguf.ErrLayout, "data offset 4 is not a multiple of the alignment 32", "", "b"},
		{"offset gap", tensorFile([]info{{"a", []uint64{1}, f32, 0}, {"b", []uint64{1}, f32, 64}}, 96),
			gguf.ErrLayout, "data offset 64, want 32", "", "b"},
		{"offsets out of order", tensorFile([]info{{"a", []uint64{1}, f32, 32}, {"b", []uint64{1}, f32, 0}}, 64),
			gguf.ErrLayout, "data offset 32, want 0", "", "a"},
		{"data past end", tensorFile([]info{{"a", []uint64{8}, f32, 0}, {"b", []uint64{9}, f32, 32}}, 64),
			gguf.ErrTruncated, "data ends at byte", "", "b"},
		{"huge data offset", tensorFile([]info{{"a", []uint64{8}, f32, 1 << 63}}, 64),
			gguf.ErrLayout, "data offset 9223372036854775808, want 0", "", "a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := gguf.Parse(tc.data)
			if err == nil {
				t.Fatalf("Parse(%s) = %d tensors, %d KV; want an error", tc.name, len(f.Tensors), len(f.KV))
			}
			if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.detail) {
				t.Errorf("Parse(%s) = %v, want %v containing %q", tc.name, err, tc.kind, tc.detail)
			}
			var fe *gguf.FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("Parse(%s) error %T is not a *gguf.FormatError", tc.name, err)
			}
			wantTensor := tc.tensor
			if len(wantTensor) > 80 {
				wantTensor = wantTensor[:80] + "..."
			}
			if fe.Key != tc.key || fe.Tensor != wantTensor {
				t.Errorf("Parse(%s) error key %q tensor %q, want %q and %q", tc.name, fe.Key, fe.Tensor, tc.key, wantTensor)
			}
		})
	}
}

// TestNestedArrayLimit checks that arrays nested exactly 8 deep are read.
func TestNestedArrayLimit(t *testing.T) {
	f, err := gguf.Parse(kvFile(nestedArrays(8)))
	if err != nil {
		t.Fatalf("Parse(arrays nested 8 deep) = %v", err)
	}
	v, _ := f.Lookup("nested")
	for depth := 1; depth < 8; depth++ {
		if v.Type != gguf.TypeArray || v.ElemType != gguf.TypeArray || v.Len() != 1 {
			t.Fatalf("depth %d = %s of %s with %d elements, want one array", depth, v.Type, v.ElemType, v.Len())
		}
		v, _ = v.Index(0)
	}
	if got, ok := v.Int32s(); !slices.Equal(got, []int32{7}) || !ok {
		t.Errorf("innermost array = %v, %v; want [7], true", got, ok)
	}
	// The parsed value knows its depth: nesting it once more is refused.
	if _, err := gguf.ArrayValue(gguf.TypeArray, f.KV[0].Value); err == nil || !strings.Contains(err.Error(), "nest 9 deep") {
		t.Errorf("ArrayValue(array, parsed 8-deep array) = %v, want a nest 9 deep error", err)
	}
	rebuilt := rewrite(t, f)
	if again, err := gguf.Parse(rebuilt); err != nil || !again.KV[0].Value.Equal(f.KV[0].Value) {
		t.Errorf("Parse(rewrite(nested 8 deep)) = %v, or the value changed", err)
	}
}

// TestAccessors checks the typed getters against every stored type.
func TestAccessors(t *testing.T) {
	f, err := gguf.Parse(buildTestFile(t, 0))
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		v  any
		ok bool
	}
	r := func(v any, ok bool) result { return result{v, ok} }
	tests := []struct {
		call string
		got  result
		want result
	}{
		{"Uint32(u8)", r(f.Uint32("u8")), r(uint32(200), true)},
		{"Uint32(u32)", r(f.Uint32("u32")), r(uint32(4000000000), true)},
		{"Uint32(i32)", r(f.Uint32("i32")), r(uint32(0), false)},
		{"Uint32(u64 max)", r(f.Uint32("u64")), r(uint32(0), false)},
		{"Uint32(f32)", r(f.Uint32("f32")), r(uint32(0), false)},
		{"Uint32(missing)", r(f.Uint32("missing")), r(uint32(0), false)},
		{"Uint64(u64)", r(f.Uint64("u64")), r(uint64(math.MaxUint64), true)},
		{"Uint64(i8)", r(f.Uint64("i8")), r(uint64(0), false)},
		{"Int(i8)", r(f.Int("i8")), r(-100, true)},
		{"Int(i16)", r(f.Int("i16")), r(-30000, true)},
		{"Int(u16)", r(f.Int("u16")), r(60000, true)},
		{"Int(i64)", r(f.Int("i64")), r(math.MinInt64, true)},
		{"Int(u64 max)", r(f.Int("u64")), r(0, false)},
		{"Int(bool)", r(f.Int("bool.true")), r(0, false)},
		{"Float32(f32)", r(f.Float32("f32")), r(float32(-1.5), true)},
		{"Float32(f64)", r(f.Float32("f64")), r(float32(math.Pi), true)},
		{"Float32(i32)", r(f.Float32("i32")), r(float32(0), false)},
		{"Bool(true)", r(f.Bool("bool.true")), r(true, true)},
		{"Bool(false)", r(f.Bool("bool.false")), r(false, true)},
		{"Bool(u8)", r(f.Bool("u8")), r(false, false)},
		{"String(string)", r(f.String("string")), r("héllo\x00world", true)},
		{"String(empty)", r(f.String("string.empty")), r("", true)},
		{"String(empty key)", r(f.String("")), r("empty key", true)},
		{"String(u8)", r(f.String("u8")), r("", false)},
		{"Architecture()", r(f.Architecture(), true), r("llama", true)},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s = %v, %v; want %v, %v", tc.call, tc.got.v, tc.got.ok, tc.want.v, tc.want.ok)
		}
	}
	sliceTests := []struct {
		call string
		got  pair
		ok   bool
		want any
	}{
		{"Strings(array.strings)", must(f.Strings("array.strings")), true, []string{"a", "", "ccc"}},
		{"Float32s(array.f32)", must(f.Float32s("array.f32")), true, []float32{1, -2, 0.25}},
		{"Float32s(array.f64)", must(f.Float32s("array.f64")), true, []float32{0.5, float32(math.Inf(1))}},
		{"Int32s(array.i32)", must(f.Int32s("array.i32")), true, []int32{-1, 0, 1 << 30}},
		{"Int32s(array.u8)", must(f.Int32s("array.u8")), true, []int32{1, 255}},
		{"Int32s(array.i64)", must(f.Int32s("array.i64")), false, []int32(nil)},
		{"Int32s(array.u32)", must(f.Int32s("array.u32")), false, []int32(nil)},
		{"Int32s(array.empty)", must(f.Int32s("array.empty")), true, []int32{}},
		{"Strings(array.f32)", must(f.Strings("array.f32")), false, []string(nil)},
		{"Float32s(array.i32)", must(f.Float32s("array.i32")), false, []float32(nil)},
		{"Int32s(i32)", must(f.Int32s("i32")), false, []int32(nil)},
		{"Strings(missing)", must(f.Strings("missing")), false, []string(nil)},
	}
	for _, tc := range sliceTests {
		got := tc.got
		if fmt.Sprintf("%#v", got.v) != fmt.Sprintf("%#v", tc.want) || got.ok != tc.ok {
			t.Errorf("%s = %#v, %v; want %#v, %v", tc.call, got.v, got.ok, tc.want, tc.ok)
		}
	}
}

type pair struct {
	v  any
	ok bool
}

func must[T any](v T, ok bool) pair { return pair{v, ok} }

func TestValueHelpers(t *testing.T) {
	nested := mustArray(t, gguf.TypeArray, gguf.StringsValue([]string{"x"}), mustArray(t, gguf.TypeUint16, gguf.Uint16Value(3)))
	tests := []struct {
		v    gguf.Value
		text string
		len  int
	}{
		{gguf.Int8Value(-3), "-3", 0},
		{gguf.Uint64Value(1 << 63), "9223372036854775808", 0},
		{gguf.Float32Value(0.1), "0.1", 0},
		{gguf.BoolValue(true), "true", 0},
		{gguf.StringValue("a\"b"), `"a\"b"`, 0},
		{gguf.Value{Type: gguf.TypeString}, `""`, 0},
		{gguf.Value{Type: gguf.TypeArray, ElemType: gguf.TypeFloat32}, "f32[] (0 elements)", 0},
		{gguf.Int32sValue([]int32{1, 2, 3, 4, 5, 6, 7, 8, 9}), "i32[1, 2, 3, 4, 5, 6, 7, 8, ...] (9 elements)", 9},
		{nested, `array[string["x"] (1 elements), u16[3] (1 elements)] (2 elements)`, 2},
	}
	for _, tc := range tests {
		if got := tc.v.Text(); got != tc.text {
			t.Errorf("Text() = %s, want %s", got, tc.text)
		}
		if got := tc.v.Len(); got != tc.len {
			t.Errorf("%s.Len() = %d, want %d", tc.text, got, tc.len)
		}
	}
	if gguf.Uint32Value(1).Equal(gguf.Int32Value(1)) || !nested.Equal(nested) ||
		nested.Equal(mustArray(t, gguf.TypeArray, gguf.StringsValue([]string{"x"}))) {
		t.Errorf("Equal: a u32 equals an i32, or nested array equality is wrong")
	}
	if _, ok := gguf.Int32Value(1).Index(0); ok {
		t.Errorf("Int32Value(1).Index(0) ok, want false for a scalar")
	}
	if s := gguf.TypeFloat64.String() + gguf.ValueType(13).String(); s != "f64type(13)" {
		t.Errorf("ValueType names = %q, want f64type(13)", s)
	}
	// A strings array keeps its own copy of the caller's slice.
	src := []string{"a"}
	v := gguf.StringsValue(src)
	src[0] = "changed"
	if got, _ := v.Strings(); got[0] != "a" {
		t.Errorf("StringsValue kept a reference to the caller's slice: element 0 = %q", got[0])
	}
}

func TestArrayValueErrors(t *testing.T) {
	deep := gguf.Int32sValue(nil)
	var err error
	for range 7 {
		if deep, err = gguf.ArrayValue(gguf.TypeArray, deep); err != nil {
			t.Fatalf("ArrayValue at depth below 8 = %v", err)
		}
	}
	tests := []struct {
		name  string
		elem  gguf.ValueType
		elems []gguf.Value
		want  string
	}{
		{"mixed", gguf.TypeUint8, []gguf.Value{gguf.Uint8Value(1), gguf.Int8Value(1)}, "element 1 has type i8, want u8"},
		{"bad elem type", 20, nil, "element type type(20) is not a GGUF value type"},
		{"too deep", gguf.TypeArray, []gguf.Value{deep}, "arrays nest 9 deep, more than the limit of 8"},
		{"bad nested", gguf.TypeArray, []gguf.Value{{Type: gguf.TypeArray, ElemType: 40}}, "element 0: array element type type(40)"},
	}
	for _, tc := range tests {
		if _, err := gguf.ArrayValue(tc.elem, tc.elems...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ArrayValue(%s) = %v, want error containing %q", tc.name, err, tc.want)
		}
	}
}

func TestWriterErrors(t *testing.T) {
	w := gguf.NewWriter()
	if err := w.AddTensor("a", tensor.F32, []uint64{2}, make([]byte, 8)); err != nil {
		t.Fatalf("AddTensor(a) = %v", err)
	}
	addTests := []struct {
		name string
		typ  tensor.Type
		dims []uint64
		data []byte
		want string
	}{
		{"b", tensor.F32, []uint64{2}, make([]byte, 7), "data is 7 bytes, want 8"},
		{"a", tensor.F32, []uint64{2}, make([]byte, 8), "duplicate tensor name"},
		{strings.Repeat("x", 64), tensor.F32, []uint64{1}, make([]byte, 4), "more than the limit of 63"},
		{"c", tensor.Q8_0, []uint64{33}, nil, "row of 33 elements is not a multiple of the q8_0 block size 32"},
		{"d", tensor.Type(99), []uint64{1}, nil, "unknown or unsupported ggml type 99"},
		{"e", tensor.F32, []uint64{1, 1, 1, 1, 1}, nil, "5 dimensions"},
	}
	for _, tc := range addTests {
		if err := w.AddTensor(tc.name, tc.typ, tc.dims, tc.data); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("AddTensor(%.10s, %s, %v, %d bytes) = %v, want error containing %q", tc.name, tc.typ, tc.dims, len(tc.data), err, tc.want)
		}
	}
	if err := w.AddTensorFunc("f", tensor.F32, []uint64{1}, nil); err == nil {
		t.Errorf("AddTensorFunc(nil function) succeeded, want an error")
	}
	errBoom := errors.New("boom")
	writeTests := []struct {
		name  string
		setup func(*gguf.Writer)
		want  string
		is    error
	}{
		{"short stream", func(w *gguf.Writer) {
			w.AddTensorFunc("s", tensor.F32, []uint64{4}, func(out io.Writer) error { _, err := out.Write(make([]byte, 15)); return err })
		}, "write function produced 15 bytes, want 16", nil},
		{"long stream", func(w *gguf.Writer) {
			w.AddTensorFunc("s", tensor.F32, []uint64{4}, func(out io.Writer) error { _, err := out.Write(make([]byte, 17)); return err })
		}, "more bytes than the tensor size", nil},
		{"failing stream", func(w *gguf.Writer) {
			w.AddTensorFunc("s", tensor.F32, []uint64{4}, func(io.Writer) error { return errBoom })
		}, "tensor s: boom", errBoom},
		{"alignment 3", func(w *gguf.Writer) { w.SetUint32("general.alignment", 3) }, "general.alignment is 3, not a power of two", nil},
		{"alignment u64", func(w *gguf.Writer) { w.SetUint64("general.alignment", 64) }, "general.alignment has type u64, want u32", nil},
		{"bad value type", func(w *gguf.Writer) { w.Set("k", gguf.Value{Type: 77}) }, "key k: value type type(77)", nil},
	}
	for _, tc := range writeTests {
		w := gguf.NewWriter()
		tc.setup(w)
		_, err := w.WriteTo(io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.is != nil && !errors.Is(err, tc.is)) {
			t.Errorf("WriteTo(%s) = %v, want error containing %q", tc.name, err, tc.want)
		}
	}
}

func TestWriterSetReplaces(t *testing.T) {
	w := gguf.NewWriter()
	w.SetString("a", "first")
	w.SetInt32("b", -1)
	w.SetFloat32("c", 2)
	w.SetBool("d", true)
	w.SetStrings("e", []string{"x"})
	w.SetFloat32s("f", []float32{1})
	w.SetInt32s("g", []int32{3})
	w.SetString("a", "second")
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatalf("Parse() = %v", err)
	}
	keys := make([]string, len(f.KV))
	for i, kv := range f.KV {
		keys[i] = kv.Key
	}
	if s, _ := f.String("a"); s != "second" || !slices.Equal(keys, []string{"a", "b", "c", "d", "e", "f", "g"}) {
		t.Errorf("after setting a twice: a = %q, keys %v; want second, [a b c d e f g]", s, keys)
	}
	// Without tensors there is no data section and so no padding: the file
	// ends with the last value and losing its last byte breaks it.
	if _, err := gguf.Parse(buf.Bytes()[:buf.Len()-1]); err == nil {
		t.Errorf("Parse(file without tensors less its last byte) succeeded, want an error (no trailing padding)")
	}
}

func TestWriteFileAndOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.gguf")
	w := gguf.NewWriter()
	w.SetString("general.architecture", "llama")
	data := tensorData(1, 4*32)
	if err := w.AddTensor("w", tensor.F32, []uint64{8, 4}, data); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile(path); err != nil {
		t.Fatalf("WriteFile() = %v", err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatalf("Open(written file) = %v", err)
	}
	ti, ok := f.Tensor("w")
	if !ok || !bytes.Equal(ti.Data, data) || f.Architecture() != "llama" {
		t.Errorf("Open(written file): tensor w found %v, data equal %v, arch %q", ok, ok && bytes.Equal(ti.Data, data), f.Architecture())
	}
	if err := f.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	if f.Tensors[0].Data != nil {
		t.Errorf("after Close, Tensors[0].Data is not nil")
	}
	if err := f.Close(); err != nil {
		t.Errorf("second Close() = %v", err)
	}
	if s, _ := f.String("general.architecture"); s != "llama" {
		t.Errorf("String(general.architecture) after Close = %q, want llama", s)
	}

	// A failing write leaves neither the target nor a temporary file.
	bad := gguf.NewWriter()
	bad.AddTensorFunc("s", tensor.F32, []uint64{1}, func(io.Writer) error { return errors.New("no data") })
	failPath := filepath.Join(dir, "failed.gguf")
	if err := bad.WriteFile(failPath); err == nil {
		t.Errorf("WriteFile(failing tensor) succeeded, want an error")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "model.gguf" {
		names := []string{}
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("folder after a failed WriteFile holds %v, want only model.gguf", names)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := gguf.Open(filepath.Join(dir, "missing.gguf")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open(missing file) = %v, want fs.ErrNotExist", err)
	}
	empty := filepath.Join(dir, "empty.gguf")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := gguf.Open(empty); !errors.Is(err, gguf.ErrTruncated) || !strings.Contains(err.Error(), empty) {
		t.Errorf("Open(empty file) = %v, want ErrTruncated naming the path", err)
	}
	if _, err := gguf.Open(dir); err == nil {
		t.Errorf("Open(a folder) succeeded, want an error")
	}
}

// TestOpenInMemory: a file read into memory parses to what its mapping
// does, with equal tensor bytes; Close releases it (Data nil, a second
// Close no error); the errors are Open's.
func TestOpenInMemory(t *testing.T) {
	written := filepath.Join(t.TempDir(), "written.gguf")
	w := gguf.NewWriter()
	w.SetString("general.architecture", "llama")
	if err := w.AddTensor("w", tensor.F32, []uint64{1024, 64}, tensorData(5, 256<<10)); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile(written); err != nil {
		t.Fatal(err)
	}
	files := []string{written}
	if d := testenv.SharedDir(); d != "" {
		files = append(files, filepath.Join(d, "models/stories260K.gguf"))
	}
	for _, p := range files {
		rel := filepath.Base(p)
		mapped, err := gguf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		read, err := gguf.OpenInMemory(p)
		if err != nil {
			t.Fatalf("OpenInMemory(%s) = %v", p, err)
		}
		checkSameFile(t, mapped, read)
		for i, ti := range mapped.Tensors {
			if !bytes.Equal(ti.Data, read.Tensors[i].Data) {
				t.Errorf("%s: tensor %s differs read into memory", rel, ti.Name)
			}
		}
		mapped.Close()
		if err := read.Close(); err != nil || read.Tensors[0].Data != nil {
			t.Errorf("Close() = %v, Data nil %v", err, read.Tensors[0].Data == nil)
		}
		if err := read.Close(); err != nil {
			t.Errorf("second Close() = %v", err)
		}
	}
	dir := t.TempDir()
	if _, err := gguf.OpenInMemory(filepath.Join(dir, "missing.gguf")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("OpenInMemory(missing file) = %v, want fs.ErrNotExist", err)
	}
	empty := filepath.Join(dir, "empty.gguf")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := gguf.OpenInMemory(empty); !errors.Is(err, gguf.ErrTruncated) || !strings.Contains(err.Error(), empty) {
		t.Errorf("OpenInMemory(empty file) = %v, want ErrTruncated naming the path", err)
	}
	if _, err := gguf.OpenInMemory(dir); err == nil {
		t.Errorf("OpenInMemory(a folder) succeeded, want an error")
	}
}

// BenchmarkParseVocab parses the largest shared vocabulary (102400 tokens,
// 99757 merges) from memory.
func BenchmarkParseVocab(b *testing.B) {
	data, err := os.ReadFile(testenv.Shared(b, "testdata/tokenizer/ggml-vocab-deepseek-llm.gguf"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := gguf.Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDropPages: dropping a tensor's pages (all of them, part of a page,
// none) leaves its bytes readable and unchanged, whether the file is mapped
// (Open) or read into anonymous memory (OpenInMemory, where dropping pages
// would zero them).
func TestDropPages(t *testing.T) {
	for _, open := range []struct {
		name string
		fn   func(string) (*gguf.File, error)
	}{{"Open", gguf.Open}, {"OpenInMemory", gguf.OpenInMemory}} {
		t.Run(open.name, func(t *testing.T) { testDropPages(t, open.fn) })
	}
}

func testDropPages(t *testing.T, open func(string) (*gguf.File, error)) {
	path := filepath.Join(t.TempDir(), "big.gguf")
	w := gguf.NewWriter()
	w.SetString("general.architecture", "llama")
	data := tensorData(3, 256<<10) // 256 KiB of f32: many pages
	if err := w.AddTensor("w", tensor.F32, []uint64{1024, 64}, data); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ti, _ := f.Tensor("w")
	f.DropPages(ti.Data)
	f.DropPages(ti.Data[1:100])
	f.DropPages(ti.Data[:0])
	if !bytes.Equal(ti.Data, data) {
		t.Error("the tensor's bytes changed after DropPages")
	}
}
