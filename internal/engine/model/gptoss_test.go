package model_test

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"tandem/internal/engine/kernels"
	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
	"tandem/internal/synth"
)

// TestGptOssChunksEqualWhole: on a gpt-oss file whose window (8) is
// shorter than the prompt (82 tokens), every position's logits are the
// same, bit for bit, whether the prompt runs as one step, in chunks of 5
// tokens (the window crossing chunk and page boundaries) or one token at
// a time, with the windowed layers in the cache's window group (as the
// engine lays the cache out) or in one group, at 1 and 3 threads.
func TestGptOssChunksEqualWhole(t *testing.T) {
	cfg, _ := synth.Preset("tiny")
	gptoss(8)(&cfg)
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := synth.Write(p, synth.Options{Config: cfg, Type: tensor.Q8_0, Seed: 9}); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Config.Window(0) != 8 || m.Config.Window(1) != 0 {
		t.Fatalf("windows %d, %d: want layer 0 windowed (8), layer 1 global", m.Config.Window(0), m.Config.Window(1))
	}
	ids := m.Tokenizer.Encode(tilePrompt, true, true)
	vocab := m.Config.Vocab
	for _, threads := range []int{1, 3} {
		pool := kernels.NewPool(threads)
		r := model.NewRunner(m, pool)
		all := allLogits(t, r, newCache(t, m, 16, 16, tensor.F16), ids)
		for _, grouped := range []bool{false, true} {
			for _, chunk := range []int{5, 1} {
				cc := m.CacheConfig(4, 64, tensor.F16)
				if grouped {
					cc = m.GroupedCacheConfig(4, 64, 64, tensor.F16)
				}
				kv, err := kvcache.New(cc)
				if err != nil {
					t.Fatal(err)
				}
				pages, err := kv.Alloc(cc.PagesFor(len(ids)))
				if err != nil {
					t.Fatal(err)
				}
				var win []int32
				if grouped {
					if win, err = kv.Pool(kvcache.GroupWindow).Alloc(cc.PagesFor(len(ids))); err != nil {
						t.Fatal(err)
					}
				}
				for p0 := 0; p0 < len(ids); p0 += chunk {
					end := min(p0+chunk, len(ids))
					out, err := r.Forward(kv, []model.Seq{{Tokens: ids[p0:end], Pos: p0, Pages: pages, WinPages: win, AllLogits: true}})
					if err != nil {
						t.Fatal(err)
					}
					for i := p0; i < end; i++ {
						got, want := out[0][(i-p0)*vocab:(i-p0+1)*vocab], all[i*vocab:(i+1)*vocab]
						for j, v := range got {
							if math.Float32bits(v) != math.Float32bits(want[j]) {
								t.Fatalf("threads %d grouped %v chunk %d position %d logit %d: %v, in the whole prompt's step %v", threads, grouped, chunk, i, j, v, want[j])
							}
						}
					}
				}
			}
		}
		pool.Close()
	}
}

// TestGptOssConfig: gpt-oss's keys as llama.cpp's loader reads them.
func TestGptOssConfig(t *testing.T) {
	md := baseMD("gpt-oss")
	md.i["gpt-oss.expert_count"] = 32
	md.i["gpt-oss.expert_used_count"] = 4
	md.i["gpt-oss.expert_feed_forward_length"] = 2880
	md.i["gpt-oss.attention.sliding_window"] = 128
	md.i["gpt-oss.rope.scaling.original_context_length"] = 4096
	md.s["gpt-oss.rope.scaling.type"] = "yarn"
	md.f["gpt-oss.rope.scaling.factor"] = 32
	c, err := model.ConfigFromMetadata(md)
	if err != nil {
		t.Fatal(err)
	}
	if mc := c.MoE; mc.Experts != 32 || mc.Used != 4 || mc.FF != 2880 || mc.Gating != model.GatingSoftmaxTopK || mc.NormWeights {
		t.Errorf("experts: %+v", mc)
	}
	if !c.AttnSinks || c.Act != model.ActSwiGLUOAI || c.RopeStyle != model.RopeNeox || c.QKNorm || c.PostNorms || c.TiedOutput {
		t.Errorf("features: %+v", c)
	}
	for l, w := range c.SWALayers {
		if w != (l%2 == 0) {
			t.Errorf("layer %d windowed %v: want the even layers", l, w)
		}
	}
	if c.SlidingWindow != 128 || c.RopeBaseSWA != c.RopeBase || c.RopeScaleSWA != c.RopeScale {
		t.Errorf("window %d, swa rope %v/%v", c.SlidingWindow, c.RopeBaseSWA, c.RopeScaleSWA)
	}
	// YaRN: llama.cpp's yarn_attn_factor for factor 32 is its magnitude
	// correction cancelled (about 1); ext factor 1, betas 32 and 1.
	if c.RopeScale != 1.0/32 || c.RopeOrigContext != 4096 || c.Yarn != (model.YarnConfig{ExtFactor: 1, BetaFast: 32, BetaSlow: 1}) ||
		math.Abs(float64(c.RopeAttnFactor)-1) > 1e-6 {
		t.Errorf("yarn: scale %v orig %d %+v attn factor %v", c.RopeScale, c.RopeOrigContext, c.Yarn, c.RopeAttnFactor)
	}
	delete(md.i, "gpt-oss.attention.sliding_window")
	if _, err := model.ConfigFromMetadata(md); err == nil || !strings.Contains(err.Error(), "sliding_window is missing") {
		t.Errorf("no sliding window: %v", err)
	}
	md.i["gpt-oss.attention.sliding_window"] = 128
	delete(md.i, "gpt-oss.expert_feed_forward_length")
	if _, err := model.ConfigFromMetadata(md); err == nil || !strings.Contains(err.Error(), "expert_feed_forward_length is missing") {
		t.Errorf("no expert width: %v", err)
	}
}
