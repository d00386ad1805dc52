package bench

import (
	"context"
	"testing"

	"tandem/internal/engine/grammar"
	"tandem/internal/engine/kernels"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
	"tandem/internal/fixture"
)

// TestEngineBatchAndGrammar: a batch decodes batch*gen tokens, plain and
// constrained; a constrained run completes documents and times its grammar
// work; bad options are errors.
func TestEngineBatchAndGrammar(t *testing.T) {
	m := fixture.Tiny(t, tensor.Q8_0, 7)
	pool := kernels.NewPool(1)
	defer pool.Close()
	r := model.NewRunner(m, pool)
	g, err := grammar.CompileChoice([]string{"yes", "no"}, grammar.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []EngineOptions{
		{PromptTokens: 8, GenTokens: 6},
		{PromptTokens: 8, GenTokens: 6, Batch: 3},
		{PromptTokens: 8, GenTokens: 12, Batch: 3, Grammar: g, Temperature: 1, Seed: 2},
	} {
		res, err := Engine(context.Background(), r, 1, o)
		if err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
		if res.Batch != max(o.Batch, 1) || res.DecodeTokS <= 0 || res.PrefillTokS <= 0 || res.SampleS <= 0 || res.SampleS > res.DecodeS {
			t.Errorf("%+v: %+v", o, res)
		}
		if res.Constrained != (o.Grammar != nil) || (o.Grammar != nil && (res.Documents < 3 || res.ConstraintS <= 0)) {
			t.Errorf("%+v: constrained %v, %d documents, %v s in the grammar; want at least one document per sequence", o, res.Constrained, res.Documents, res.ConstraintS)
		}
	}
	for _, o := range []EngineOptions{{PromptTokens: 0, GenTokens: 1}, {PromptTokens: 4, GenTokens: 1, Batch: MaxBatch + 1}, {PromptTokens: 4000, GenTokens: 1}} {
		if _, err := Engine(context.Background(), r, 1, o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

// TestEngineActiveBytes: the result carries the model's active weight
// bytes and the decode rate of them.
func TestEngineActiveBytes(t *testing.T) {
	m := fixture.Tiny(t, tensor.Q8_0, 7)
	if m.File == nil {
		t.Fatal("fixture model without its GGUF file")
	}
	pool := kernels.NewPool(1)
	defer pool.Close()
	res, err := Engine(context.Background(), model.NewRunner(m, pool), 1, EngineOptions{PromptTokens: 4, GenTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	_, want := model.ActiveWeights(m.File, m.Config)
	if res.ActiveBytes != want || want == 0 {
		t.Errorf("active bytes %d, want %d", res.ActiveBytes, want)
	}
	if got := float64(res.ActiveBytes) * float64(res.GenTokens) / res.DecodeS / 1e9; res.DecodeWeightGBs != got || got <= 0 {
		t.Errorf("decode weight rate %v GB/s, want %v", res.DecodeWeightGBs, got)
	}
}
