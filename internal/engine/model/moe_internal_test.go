package model

import (
	"math"
	"slices"
	"testing"
)

// TestRoute: the gating functions, top-k, renormalization and the
// ascending order of the chosen experts.
func TestRoute(t *testing.T) {
	logits := []float32{0.5, 2, -1, 1.5, 3, 0}
	for _, tc := range []struct {
		name string
		mc   MoEConfig
		sel  []int32
		want func(i int32) float64 // the weight of expert i
	}{
		{"softmax-norm", MoEConfig{Gating: GatingSoftmax, NormWeights: true}, []int32{1, 3, 4},
			func(i int32) float64 {
				return math.Exp(float64(logits[i])) / (math.Exp(2) + math.Exp(1.5) + math.Exp(3))
			}},
		{"softmax", MoEConfig{Gating: GatingSoftmax}, []int32{1, 4},
			func(i int32) float64 {
				var z float64
				for _, v := range logits {
					z += math.Exp(float64(v))
				}
				return math.Exp(float64(logits[i])) / z
			}},
		{"sigmoid-scaled", MoEConfig{Gating: GatingSigmoid, WeightScale: 2.5}, []int32{1, 3, 4},
			func(i int32) float64 { return 2.5 / (1 + math.Exp(-float64(logits[i]))) }},
		{"softmax-topk", MoEConfig{Gating: GatingSoftmaxTopK}, []int32{1, 4},
			func(i int32) float64 { return math.Exp(float64(logits[i])) / (math.Exp(2) + math.Exp(3)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.mc.Experts, tc.mc.Used = len(logits), len(tc.sel)
			r := &Runner{m: &Model{Config: Config{MoE: tc.mc}}}
			r.moe.probs = make([]float32, len(logits))
			sel, wts := make([]int32, len(tc.sel)), make([]float32, len(tc.sel))
			r.route(logits, sel, wts)
			if !slices.Equal(sel, tc.sel) {
				t.Fatalf("chosen %v, want %v", sel, tc.sel)
			}
			for j, e := range sel {
				if w := tc.want(e); math.Abs(float64(wts[j])-w) > 1e-6 {
					t.Errorf("expert %d weight %v, want %v", e, wts[j], w)
				}
			}
		})
	}
}
