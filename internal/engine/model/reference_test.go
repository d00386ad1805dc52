package model_test

import (
	"encoding/binary"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"tandem/internal/engine/kernels"
	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
	"tandem/internal/testenv"
)

const prompt1 = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park."

func readIDs(t *testing.T, rel string) []int32 {
	t.Helper()
	b, err := os.ReadFile(testenv.Shared(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	var ids []int32
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.Atoi(f[0])
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		ids = append(ids, int32(v))
	}
	return ids
}

func readF32(t *testing.T, rel string) []float32 {
	t.Helper()
	b, err := os.ReadFile(testenv.Shared(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func load(t *testing.T, rel string) *model.Model {
	t.Helper()
	m, err := model.Load(testenv.Shared(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func newCache(t *testing.T, m *model.Model, pageTokens, pages int, dt tensor.Type) *kvcache.Cache {
	t.Helper()
	kv, err := kvcache.New(m.CacheConfig(pageTokens, pages, dt))
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// allLogits runs ids as one prefill step and returns every position's logits.
func allLogits(t *testing.T, r *model.Runner, kv *kvcache.Cache, ids []int32) []float32 {
	t.Helper()
	pages, err := kv.Alloc(kv.Config().PagesFor(len(ids)))
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Release(pages)
	out, err := r.Forward(kv, []model.Seq{{Tokens: ids, Pages: pages, AllLogits: true}})
	if err != nil {
		t.Fatal(err)
	}
	return slices.Clone(out[0])
}

// greedy prefills ids and then decodes n tokens by argmax, one step each.
func greedy(t *testing.T, r *model.Runner, kv *kvcache.Cache, ids []int32, n int) []int32 {
	t.Helper()
	gen, _ := greedyGaps(t, r, kv, ids, n)
	return gen
}

// greedyGaps is greedy that also returns, per step, the gap between the
// top two logits.
func greedyGaps(t *testing.T, r *model.Runner, kv *kvcache.Cache, ids []int32, n int) ([]int32, []float64) {
	t.Helper()
	pages, err := kv.Alloc(kv.Config().PagesFor(len(ids) + n))
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Release(pages)
	// a hybrid model's recurrent state, carried from step to step
	state := make([]float32, r.Model().StateSize())
	if len(state) == 0 {
		state = nil
	}
	out, err := r.Forward(kv, []model.Seq{{Tokens: ids, Pages: pages, State: state}})
	if err != nil {
		t.Fatal(err)
	}
	var gen []int32
	var gaps []float64
	for i := range n {
		id := argmax(out[0])
		gen = append(gen, id)
		second := float32(math.Inf(-1))
		for j, v := range out[0] {
			if int32(j) != id && v > second {
				second = v
			}
		}
		gaps = append(gaps, float64(out[0][id]-second))
		if i == n-1 {
			break
		}
		out, err = r.Forward(kv, []model.Seq{{Tokens: []int32{id}, Pos: len(ids) + i, Pages: pages, State: state}})
		if err != nil {
			t.Fatal(err)
		}
	}
	return gen, gaps
}

func argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

func maxAbsDiff(a, b []float32) (float64, int) {
	var m float64
	at := 0
	for i := range a {
		if d := math.Abs(float64(a[i] - b[i])); d > m || math.IsNaN(d) {
			m, at = d, i
		}
	}
	return m, at
}

func TestStoriesPrompt1Logits(t *testing.T) {
	m := load(t, "models/stories260K.gguf")
	want := readIDs(t, "testdata/reference/stories260K.prompt1.tokens.txt")
	ids := m.Tokenizer.Encode(prompt1, true, true)
	if !slices.Equal(ids, want) {
		t.Fatalf("Encode(prompt1) = %v, want %v", ids, want)
	}
	for _, tc := range []struct {
		kv   tensor.Type
		ref  string
		tol  float64
		name string
	}{
		{tensor.F32, "testdata/reference/stories260K.prompt1.kvf32.logits.f32", 1e-4, "kv-f32"},
		{tensor.F16, "testdata/reference/stories260K.prompt1.logits.f32", 1e-2, "kv-f16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, threads := range []int{1, 2} {
				pool := kernels.NewPool(threads)
				defer pool.Close()
				r := model.NewRunner(m, pool)
				got := allLogits(t, r, newCache(t, m, 16, 8, tc.kv), ids)
				ref := readF32(t, tc.ref)
				if len(got) != len(ref) {
					t.Fatalf("got %d logits, reference has %d", len(got), len(ref))
				}
				d, at := maxAbsDiff(got, ref)
				t.Logf("threads %d: max |logit - llama.cpp| = %.3g at position %d token %d", threads, d, at/m.Config.Vocab, at%m.Config.Vocab)
				if d > tc.tol {
					t.Errorf("threads %d: max |logit - llama.cpp| = %g at position %d token %d, want <= %g", threads, d, at/m.Config.Vocab, at%m.Config.Vocab, tc.tol)
				}
			}
		})
	}
}

func TestStoriesGreedy(t *testing.T) {
	m := load(t, "models/stories260K.gguf")
	pool := kernels.NewPool(2)
	defer pool.Close()
	r := model.NewRunner(m, pool)
	for _, tc := range []struct{ name, ref string }{
		{"prompt1", "testdata/reference/stories260K.prompt1.greedy.ids.txt"},
		{"bos", "testdata/reference/stories260K.bos.greedy.ids.txt"},
	} {
		all := readIDs(t, tc.ref)
		nPrompt := 1
		if tc.name == "prompt1" {
			nPrompt = len(m.Tokenizer.Encode(prompt1, true, true))
		}
		prompt, want := all[:nPrompt], all[nPrompt:]
		for _, kvt := range []tensor.Type{tensor.F16, tensor.F32} {
			t.Run(tc.name+"/kv-"+kvt.String(), func(t *testing.T) {
				got := greedy(t, r, newCache(t, m, 16, 32, kvt), prompt, len(want))
				if !slices.Equal(got, want) {
					t.Errorf("greedy ids\n got %v\nwant %v", got, want)
				}
			})
		}
	}
}

func TestTinyRandomF16Greedy(t *testing.T) {
	m := load(t, "models/llama-2-tiny-random.gguf")
	pool := kernels.NewPool(1)
	defer pool.Close()
	r := model.NewRunner(m, pool)
	all := readIDs(t, "testdata/reference/tinyrandom.prompt2.greedy.ids.txt")
	prompt := readIDs(t, "testdata/reference/tinyrandom.prompt2.tokens.txt")
	if got := m.Tokenizer.Encode("Once upon a time", true, true); !slices.Equal(got, prompt) {
		t.Errorf("Encode = %v, want %v", got, prompt)
	}
	want := all[len(prompt):]
	got := greedy(t, r, newCache(t, m, 16, 4, tensor.F16), prompt, len(want))
	if !slices.Equal(got, want) {
		t.Errorf("greedy ids (kv f16)\n got %v\nwant %v", got, want)
	}
	ref := readF32(t, "testdata/reference/tinyrandom.prompt2.kvf32.logits.f32")
	d, at := maxAbsDiff(allLogits(t, r, newCache(t, m, 16, 4, tensor.F32), prompt), ref)
	t.Logf("max |logit - llama.cpp (kv f32)| = %.3g at %d", d, at)
	if d > 1e-3 {
		t.Errorf("max |logit - llama.cpp (kv f32)| = %g at %d, want <= 1e-3", d, at)
	}
}
