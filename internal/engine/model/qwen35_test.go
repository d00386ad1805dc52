package model_test

import (
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tandem/internal/engine/kernels"
	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
	"tandem/internal/synth"
)

// synthHybrid writes a tiny hybrid model (preset tiny with 4 layers, so
// three DeltaNet layers and one full-attention layer) and loads it.
func synthHybrid(t testing.TB, arch string, typ tensor.Type, seed uint64) *model.Model {
	t.Helper()
	cfg, _ := synth.Preset("tiny")
	cfg.Arch, cfg.Layers, cfg.AttnGain = arch, 4, 3
	p := filepath.Join(t.TempDir(), arch+".gguf")
	if err := synth.Write(p, synth.Options{Config: cfg, Type: typ, Seed: seed}); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// chunkedLogits runs ids through one sequence in steps of the given sizes
// (cycled) and returns every position's logits.
func chunkedLogits(t *testing.T, r *model.Runner, m *model.Model, kv *kvcache.Cache, ids []int32, sizes []int) []float32 {
	t.Helper()
	pages, err := kv.Alloc(kv.Config().PagesFor(len(ids)))
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Release(pages)
	state := make([]float32, m.StateSize())
	var all []float32
	for pos, i := 0, 0; pos < len(ids); i++ {
		n := min(sizes[i%len(sizes)], len(ids)-pos)
		out, err := r.Forward(kv, []model.Seq{{Tokens: ids[pos : pos+n], Pos: pos, Pages: pages, AllLogits: true, State: state}})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, out[0]...)
		pos += n
	}
	return all
}

// TestHybridChunksEqualWhole: a qwen35 or qwen35moe prompt prefilled in
// one step, in chunks of several sizes, and token by token gives the same
// logits at every position, bit for bit, at 1 and 3 threads: the
// DeltaNet state carried between steps is exactly the state the whole
// prefill reaches.
func TestHybridChunksEqualWhole(t *testing.T) {
	for _, arch := range []string{"qwen35", "qwen35moe"} {
		t.Run(arch, func(t *testing.T) {
			m := synthHybrid(t, arch, tensor.Q8_0, 7)
			ids := m.Tokenizer.Encode(tilePrompt, true, true)
			for _, threads := range []int{1, 3} {
				pool := kernels.NewPool(threads)
				r := model.NewRunner(m, pool)
				kv := newCache(t, m, 16, 16, tensor.F16)
				whole := chunkedLogits(t, r, m, kv, ids, []int{len(ids)})
				for _, sizes := range [][]int{{1}, {5}, {16}, {3, 17, 1, 8}} {
					got := chunkedLogits(t, r, m, kv, ids, sizes)
					for i := range whole {
						if math.Float32bits(got[i]) != math.Float32bits(whole[i]) {
							t.Fatalf("threads %d chunks %v: position %d logit %d = %v, whole prefill %v", threads, sizes, i/m.Config.Vocab, i%m.Config.Vocab, got[i], whole[i])
						}
					}
				}
				pool.Close()
			}
		})
	}
}

// TestHybridShape: the layer mix, the KV layers and the state slot of a
// synthesized qwen35.
func TestHybridShape(t *testing.T) {
	m := synthHybrid(t, "qwen35", tensor.Q8_0, 1)
	c := m.Config
	if !slices.Equal(c.Recurrent, []bool{true, true, true, false}) || c.KVLayers() != 1 {
		t.Fatalf("recurrent %v, KV layers %d", c.Recurrent, c.KVLayers())
	}
	g := c.GDN
	want := 3 * ((g.Conv-1)*(2*g.KHeads+g.VHeads)*g.HeadDim + g.VHeads*g.HeadDim*g.HeadDim)
	if m.StateSize() != want || m.StateLayout() == "" {
		t.Fatalf("state %d floats (want %d), layout %q", m.StateSize(), want, m.StateLayout())
	}
	if kc := m.CacheConfig(16, 4, tensor.F16); kc.Layers != 1 {
		t.Fatalf("cache config has %d layers, want the 1 KV layer", kc.Layers)
	}
	t.Log(m.StateLayout())
}

// TestHybridBatchEqualsAlone: sequences of a hybrid model sharing a step
// (a prefill next to two decodes, each with its own state slot) get the
// logits and states they get alone, bit for bit, so a state slot is only
// ever touched by its own sequence.
func TestHybridBatchEqualsAlone(t *testing.T) {
	m := synthHybrid(t, "qwen35", tensor.Q8_0, 3)
	pool := kernels.NewPool(3)
	defer pool.Close()
	r := model.NewRunner(m, pool)
	kv := newCache(t, m, 16, 32, tensor.F16)
	prompts := [][]int32{
		m.Tokenizer.Encode(tilePrompt, true, true),
		m.Tokenizer.Encode(prompt1, true, true),
		m.Tokenizer.Encode("Once upon a time", true, true),
	}
	type run struct {
		pages  []int32
		state  []float32
		logits []float32
	}
	// alone: sequences 1 and 2 prefill their prompt but its last token,
	// then decode it; sequence 0 prefills all of its prompt
	start := func() []run {
		runs := make([]run, len(prompts))
		for i, p := range prompts {
			pages, err := kv.Alloc(kv.Config().PagesFor(len(p)))
			if err != nil {
				t.Fatal(err)
			}
			runs[i] = run{pages: pages, state: make([]float32, m.StateSize())}
			if i > 0 {
				if _, err := r.Forward(kv, []model.Seq{{Tokens: p[:len(p)-1], Pages: pages, State: runs[i].state}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		return runs
	}
	step := func(i int, p []int32, rn *run) model.Seq {
		if i == 0 {
			return model.Seq{Tokens: p, Pages: rn.pages, State: rn.state}
		}
		return model.Seq{Tokens: p[len(p)-1:], Pos: len(p) - 1, Pages: rn.pages, State: rn.state}
	}
	alone := start()
	for i, p := range prompts {
		out, err := r.Forward(kv, []model.Seq{step(i, p, &alone[i])})
		if err != nil {
			t.Fatal(err)
		}
		alone[i].logits = slices.Clone(out[0])
	}
	batch := start()
	seqs := make([]model.Seq, len(prompts))
	for i, p := range prompts {
		seqs[i] = step(i, p, &batch[i])
	}
	out, err := r.Forward(kv, seqs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range prompts {
		if !slices.Equal(out[i], alone[i].logits) {
			t.Errorf("sequence %d: logits in the batch differ from alone", i)
		}
		if !slices.Equal(batch[i].state, alone[i].state) {
			t.Errorf("sequence %d: state in the batch differs from alone", i)
		}
		kv.Release(alone[i].pages)
		kv.Release(batch[i].pages)
	}
}

// TestHybridLayerHookKVLayers: the layer hook runs once per full-attention
// layer, with KV-layer indices 0..KVLayers-1 in order, and Forward refuses
// a state slot of the wrong size.
func TestHybridLayerHookKVLayers(t *testing.T) {
	cfg, _ := synth.Preset("tiny")
	cfg.Arch, cfg.Layers = "qwen35", 8
	p := filepath.Join(t.TempDir(), "h.gguf")
	if err := synth.Write(p, synth.Options{Config: cfg, Type: tensor.Q8_0, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	pool := kernels.NewPool(1)
	defer pool.Close()
	r := model.NewRunner(m, pool)
	kv := newCache(t, m, 16, 4, tensor.F16)
	if kv.Config().Layers != 2 {
		t.Fatalf("cache has %d layers, want the 2 full-attention layers of 8", kv.Config().Layers)
	}
	var got []int
	r.SetLayerHook(func(l int) { got = append(got, l) })
	pages, _ := kv.Alloc(1)
	ids := []int32{1, 5, 9}
	if _, err := r.Forward(kv, []model.Seq{{Tokens: ids, Pages: pages, State: make([]float32, m.StateSize())}}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []int{0, 1}) {
		t.Errorf("hook calls %v, want [0 1]", got)
	}
	for _, st := range [][]float32{nil, make([]float32, m.StateSize()-1)} {
		if _, err := r.Forward(kv, []model.Seq{{Tokens: ids, Pages: pages, State: st}}); err == nil {
			t.Errorf("a state slot of %d floats was accepted (the model's has %d)", len(st), m.StateSize())
		}
	}
}

// hybridMD is mapMD with integer arrays (rope.dimension_sections).
type hybridMD struct {
	mapMD
	arrays map[string][]int32
}

func (m hybridMD) Int32s(k string) ([]int32, bool) { v, ok := m.arrays[k]; return v, ok }

// TestHybridConfig: the hybrid keys as llama.cpp reads them (the default
// interval of 4, the sections, the state size) and the files Tandem
// refuses.
func TestHybridConfig(t *testing.T) {
	md := func(arch string, set map[string]int) hybridMD {
		m := hybridMD{baseMD(arch), map[string][]int32{arch + ".rope.dimension_sections": {11, 11, 10, 0}}}
		m.i[arch+".attention.key_length"] = 128
		m.i[arch+".attention.value_length"] = 128
		m.i[arch+".attention.head_count_kv"] = 2
		m.i[arch+".rope.dimension_count"] = 64
		m.i[arch+".block_count"] = 8
		for k, v := range map[string]int{"ssm.conv_kernel": 4, "ssm.state_size": 32, "ssm.group_count": 2, "ssm.time_step_rank": 4, "ssm.inner_size": 128} {
			m.i[arch+"."+k] = v
		}
		for k, v := range set {
			if v < 0 {
				delete(m.i, arch+"."+k)
			} else {
				m.i[arch+"."+k] = v
			}
		}
		return m
	}
	c, err := model.ConfigFromMetadata(md("qwen35", nil))
	if err != nil {
		t.Fatal(err)
	}
	wantRec := []bool{true, true, true, false, true, true, true, false}
	if !slices.Equal(c.Recurrent, wantRec) || c.RopeSections != [4]int{11, 11, 10, 0} || !c.AttnGate || !c.QKNorm || c.RopeDim != 64 {
		t.Errorf("qwen35: recurrent %v sections %v gate %v qk norm %v rope dims %d", c.Recurrent, c.RopeSections, c.AttnGate, c.QKNorm, c.RopeDim)
	}
	if want := 6 * (3*(2*2+4)*32 + 4*32*32); c.State.Floats != want || c.KVLayers() != 2 {
		t.Errorf("qwen35: state %d floats, want %d; KV layers %d", c.State.Floats, want, c.KVLayers())
	}
	c, err = model.ConfigFromMetadata(md("qwen35moe", map[string]int{"expert_count": 8, "expert_used_count": 2, "full_attention_interval": 2}))
	if err != nil {
		t.Fatal(err)
	}
	if mc := c.MoE; mc.SharedFF != 512 || !mc.NormWeights || c.KVLayers() != 4 {
		t.Errorf("qwen35moe: %+v, KV layers %d", mc, c.KVLayers())
	}
	for _, bad := range []struct {
		set  map[string]int
		want string
	}{
		{map[string]int{"ssm.conv_kernel": -1}, "ssm.conv_kernel is missing"},
		{map[string]int{"ssm.inner_size": 100}, "inner_size 100 != time_step_rank 4"},
		{map[string]int{"ssm.time_step_rank": 3, "ssm.inner_size": 96}, "not a multiple of ssm.group_count"},
		{map[string]int{"nextn_predict_layers": 8}, "nextn_predict_layers = 8 is out of range 0..7"},
		{map[string]int{"attention.recurrent_layers": 1}, "recurrent_layers is not supported"},
		{map[string]int{"full_attention_interval": 0}, "full_attention_interval = 0 is out of range"},
		{map[string]int{"ssm.state_size": 5000}, "ssm.state_size = 5000 is out of range"},
	} {
		if _, err := model.ConfigFromMetadata(md("qwen35", bad.set)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: %v, want %q", bad.set, err, bad.want)
		}
	}
	noSec := md("qwen35", nil)
	delete(noSec.arrays, "qwen35.rope.dimension_sections")
	if _, err := model.ConfigFromMetadata(noSec); err == nil || !strings.Contains(err.Error(), "dimension_sections is missing") {
		t.Errorf("no sections: %v", err)
	}
	noSec.arrays["qwen35.rope.dimension_sections"] = []int32{40, 40, 0, 0}
	if _, err := model.ConfigFromMetadata(noSec); err == nil || !strings.Contains(err.Error(), "must sum to") {
		t.Errorf("sections beyond the head: %v", err)
	}
}

// TestHybridSkipsMTPBlocks: a qwen35 file with a multi-token-prediction
// block (nextn_predict_layers 1, as Qwen3.5's converter writes by default)
// loads, runs the other blocks only, and gives the logits of the same file
// without it, bit for bit.
func TestHybridSkipsMTPBlocks(t *testing.T) {
	logits := func(nextN int) ([]float32, model.Config) {
		cfg, _ := synth.Preset("tiny")
		cfg.Arch, cfg.Layers, cfg.NextN = "qwen35", 4, nextN
		p := filepath.Join(t.TempDir(), "m.gguf")
		if err := synth.Write(p, synth.Options{Config: cfg, Type: tensor.Q8_0, Seed: 5}); err != nil {
			t.Fatal(err)
		}
		m, err := model.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		pool := kernels.NewPool(1)
		defer pool.Close()
		ids := m.Tokenizer.Encode(prompt1, true, true)
		return chunkedLogits(t, model.NewRunner(m, pool), m, newCache(t, m, 16, 8, tensor.F16), ids, []int{len(ids)}), m.Config
	}
	plain, _ := logits(0)
	mtp, c := logits(1)
	if c.Layers != 4 || c.NextN != 1 || len(c.Recurrent) != 4 {
		t.Fatalf("layers %d, nextn %d, recurrent %v", c.Layers, c.NextN, c.Recurrent)
	}
	if !slices.Equal(plain, mtp) {
		t.Error("the file with an MTP block gives other logits than the file without")
	}
}
