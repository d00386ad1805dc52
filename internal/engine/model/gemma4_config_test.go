package model_test

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tandem/internal/engine/gguf"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
	"tandem/internal/synth"
)

// gemma4Meta returns the metadata of the g4e preset's file with edit
// applied (keys set, or removed when edit sets them to the zero Value).
func gemma4Meta(t *testing.T, edit func(w *gguf.Writer)) *gguf.File {
	t.Helper()
	cfg, err := synth.Preset("g4e")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "g4e.gguf")
	if err := synth.Write(p, synth.Options{Config: cfg, Type: tensor.F16, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter()
	for _, kv := range f.KV {
		w.Set(kv.Key, kv.Value)
	}
	edit(w)
	var b bytes.Buffer
	if _, err := w.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	out, err := gguf.Parse(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGemma4Config: gemma4's keys read as llama.cpp reads them (per-layer
// arrays, the layer pattern, shared KV and its sources, the cache row), and
// files whose keys are missing or inconsistent refused with errors that say
// which key.
func TestGemma4Config(t *testing.T) {
	c, err := model.ConfigFromMetadata(gemma4Meta(t, func(*gguf.Writer) {}))
	if err != nil {
		t.Fatal(err)
	}
	g := c.Gemma4
	if g == nil || c.HeadDim != 64 || g.HeadDimSWA != 32 || g.RopeDimSWA != 32 || c.RopeDim != 64 || g.PerLayer != 64 ||
		g.KVLayers != 3 || !slices.Equal(g.KVSource, []int{0, 1, 2, 1, 1, 2}) || !slices.Equal(g.KVHeads, []int{2, 2, 1, 2, 2, 1}) ||
		!slices.Equal(c.SWALayers, []bool{true, true, false, true, true, false}) || c.KVHeads != 2 ||
		g.CacheKVHeads != 1 || g.CacheHeadDim != 64 || c.FinalSoftcap != 30 || c.QueryScale != 1 || c.SlidingWindow != 16 {
		t.Errorf("g4e config %+v, gemma4 %+v", c, g)
	}
	bools := func(b ...bool) gguf.Value {
		vs := make([]gguf.Value, len(b))
		for i, x := range b {
			vs[i] = gguf.BoolValue(x)
		}
		v, err := gguf.ArrayValue(gguf.TypeBool, vs...)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name string
		edit func(w *gguf.Writer)
		want string
	}{
		{"pattern length", func(w *gguf.Writer) { w.Set("gemma4.attention.sliding_window_pattern", bools(true, false)) },
			"sliding_window_pattern has 2 elements, want one per layer (6)"},
		{"shared source of another kind", func(w *gguf.Writer) {
			w.Set("gemma4.attention.sliding_window_pattern", bools(true, false, true, true, true, false))
		}, "shares the K/V of layer"},
		{"kv heads not dividing", func(w *gguf.Writer) {
			w.Set("gemma4.attention.head_count_kv", gguf.Uint32sValue([]uint32{2, 2, 3, 2, 2, 3}))
		}, "head_count 4 is not a multiple of head_count_kv 3"},
		{"kv heads array length", func(w *gguf.Writer) { w.Set("gemma4.attention.head_count_kv", gguf.Uint32sValue([]uint32{2, 2})) },
			"head_count_kv has 2 elements"},
		{"swa head wider", func(w *gguf.Writer) {
			w.SetUint32("gemma4.attention.key_length_swa", 128)
			w.SetUint32("gemma4.attention.value_length_swa", 128)
		}, "wider than the full layers'"},
		{"swa value length", func(w *gguf.Writer) { w.SetUint32("gemma4.attention.value_length_swa", 16) }, "value_length_swa"},
		{"per-layer width missing", func(w *gguf.Writer) { w.SetString("gemma4.embedding_length_per_layer_input", "x") },
			"embedding_length_per_layer_input is missing"},
		{"query heads per layer", func(w *gguf.Writer) {
			w.Set("gemma4.attention.head_count", gguf.Uint32sValue([]uint32{4, 4, 2, 4, 4, 2}))
		}, "per-layer query head counts are not supported"},
		{"too many shared", func(w *gguf.Writer) { w.SetUint32("gemma4.attention.shared_kv_layers", 7) }, "shared_kv_layers = 7 is out of range"},
		{"expert widths differ", func(w *gguf.Writer) {
			w.SetUint32("gemma4.expert_count", 4)
			w.SetUint32("gemma4.expert_used_count", 2)
			w.Set("gemma4.expert_feed_forward_length", gguf.Uint32sValue([]uint32{64, 64, 32, 64, 64, 64}))
		}, "per-layer expert widths are not supported"},
	} {
		_, err := model.ConfigFromMetadata(gemma4Meta(t, tc.edit))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}
