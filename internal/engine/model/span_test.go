package model

import (
	"math"
	"slices"
	"testing"

	"tandem/internal/engine/kernels"
	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/tensor"
	"tandem/internal/synth"
)

// TestSpansBitIdentical: the synthesized files store Q, K, V and gate, up
// back to back, so Load finds their spans; a prefill through the spans (one
// product each) gives the same logits, bit for bit, as through the separate
// products, at one and two threads.
func TestSpansBitIdentical(t *testing.T) {
	for _, typ := range []tensor.Type{tensor.Q8_0, tensor.F16, tensor.Q4_K} {
		t.Run(typ.String(), func(t *testing.T) {
			cfg, _ := synth.Preset("tiny")
			p := t.TempDir() + "/m.gguf"
			if err := synth.Write(p, synth.Options{Config: cfg, Type: typ, Seed: 3}); err != nil {
				t.Fatal(err)
			}
			m, err := Load(p)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			for i, ly := range m.Layers {
				// the Q4_K mix gives some layers' V and up other types
				sameQKV := ly.Q.Type == ly.K.Type && ly.K.Type == ly.V.Type
				if (ly.qkvSpan.Data == nil) == sameQKV || (ly.gateUpSpan.Data == nil) == (ly.Gate.Type == ly.Up.Type) {
					t.Fatalf("layer %d: Q|K|V span %v (types %s %s %s), gate|up span %v (types %s %s); the file stores them back to back",
						i, ly.qkvSpan.Data != nil, ly.Q.Type, ly.K.Type, ly.V.Type, ly.gateUpSpan.Data != nil, ly.Gate.Type, ly.Up.Type)
				}
			}
			spanned := 0
			for _, ly := range m.Layers {
				if ly.qkvSpan.Data != nil {
					spanned++
				}
			}
			t.Logf("%d of %d layers run Q|K|V as one product", spanned, len(m.Layers))
			prompt := make([]int32, 70)
			for i := range prompt {
				prompt[i] = int32(3 + (i*37)%(m.Config.Vocab-3))
			}
			run := func(threads int) []float32 {
				pool := kernels.NewPool(threads)
				defer pool.Close()
				r := NewRunner(m, pool)
				kv, err := kvcache.New(m.CacheConfig(16, 8, tensor.F16))
				if err != nil {
					t.Fatal(err)
				}
				pages, _ := kv.Alloc(8)
				out, err := r.Forward(kv, []Seq{{Tokens: prompt, Pages: pages, AllLogits: true}})
				if err != nil {
					t.Fatal(err)
				}
				return slices.Clone(out[0])
			}
			with := run(2)
			// layer 0 apart and the others spanned: the scratch must cover both
			s0 := [2]Linear{m.Layers[0].qkvSpan, m.Layers[0].gateUpSpan}
			m.Layers[0].qkvSpan, m.Layers[0].gateUpSpan = Linear{}, Linear{}
			mixed := run(2)
			m.Layers[0].qkvSpan, m.Layers[0].gateUpSpan = s0[0], s0[1]
			spans := make([][2]Linear, len(m.Layers))
			for i := range m.Layers {
				ly := &m.Layers[i]
				spans[i] = [2]Linear{ly.qkvSpan, ly.gateUpSpan}
				ly.qkvSpan, ly.gateUpSpan = Linear{}, Linear{}
			}
			apart1, apart2 := run(1), run(2)
			for i := range m.Layers {
				m.Layers[i].qkvSpan, m.Layers[i].gateUpSpan = spans[i][0], spans[i][1]
			}
			for i := range with {
				if b := math.Float32bits(with[i]); b != math.Float32bits(apart1[i]) || b != math.Float32bits(apart2[i]) || b != math.Float32bits(mixed[i]) {
					t.Fatalf("logit %d: %g through the spans, %g / %g through separate products (1 / 2 threads), %g with layer 0 apart",
						i, with[i], apart1[i], apart2[i], mixed[i])
				}
			}
		})
	}
}

// TestSpanOfRefusesGaps: weights that do not lie back to back, or differ in
// type or width, have no span.
func TestSpanOfRefusesGaps(t *testing.T) {
	buf := make([]byte, 300)
	a := Linear{Type: tensor.F32, In: 4, Out: 4, Data: buf[0:64]}
	b := Linear{Type: tensor.F32, In: 4, Out: 2, Data: buf[64:96]}
	gap := Linear{Type: tensor.F32, In: 4, Out: 2, Data: buf[100:132]}
	other := Linear{Type: tensor.F16, In: 8, Out: 2, Data: buf[96:128]}
	if s := spanOf(&a, &b); s.Out != 6 || len(s.Data) != 96 || &s.Data[0] != &buf[0] {
		t.Errorf("adjacent weights: span of %d rows over %d bytes, want 6 over 96 from the first", s.Out, len(s.Data))
	}
	for _, ws := range [][]*Linear{{&a, &gap}, {&b, &a}, {&a, &b, &other}} {
		if s := spanOf(ws...); s.Data != nil {
			t.Errorf("span %v of weights that are not back to back or differ", s.Out)
		}
	}
}

// TestPairOrder: pairOrder visits every tile once, and each pair of jobs
// (2i, 2i+1) holds tiles whose indices sum to n-1.
func TestPairOrder(t *testing.T) {
	for n := 1; n <= 9; n++ {
		seen := make([]bool, n)
		for j := range n {
			ti := pairOrder(j, n)
			if ti < 0 || ti >= n || seen[ti] {
				t.Fatalf("n=%d: job %d gets tile %d (seen before or out of range)", n, j, ti)
			}
			seen[ti] = true
			if j%2 == 1 && pairOrder(j-1, n)+ti != n-1 {
				t.Errorf("n=%d: jobs %d, %d get tiles %d, %d, which do not sum to %d", n, j-1, j, pairOrder(j-1, n), ti, n-1)
			}
		}
	}
}
