package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"tandem/internal/engine"
	"tandem/internal/engine/kernels"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tensor"
	"tandem/internal/fixture"
	"tandem/internal/synth"
)

// longContextModel is the tiny preset with a 131072-token context.
func longContextModel(t *testing.T) *model.Model {
	t.Helper()
	cfg, err := synth.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Context = 131072
	return fixture.Synth(t, cfg, tensor.Q8_0, 1)
}

// TestMaxModelLenSizesTheKV: MaxModelLen caps the context below the
// model's; the default KV arena holds 4 sequences of it, not of the
// model's context; a request longer than the cap is refused (ErrTooLong);
// a cap above the model's context is an error.
func TestMaxModelLenSizesTheKV(t *testing.T) {
	m := longContextModel(t)
	full := newEngine(t, m, engine.Config{})
	capped := newEngine(t, m, engine.Config{MaxModelLen: 8192})
	if got, want := full.Config().Pages, 4*131072/16; got != want {
		t.Errorf("no cap: %d pages, want %d (4 contexts of 131072)", got, want)
	}
	if got, want := capped.Config().Pages, 4*8192/16; got != want {
		t.Errorf("MaxModelLen 8192: %d pages, want %d (4 sequences of 8192)", got, want)
	}
	if capped.MaxContext() != 8192 || full.MaxContext() != 131072 {
		t.Errorf("MaxContext = %d capped, %d not; want 8192, 131072", capped.MaxContext(), full.MaxContext())
	}
	fs, cs := full.Stats(), capped.Stats()
	if cs.KVBytesTot*16 != fs.KVBytesTot {
		t.Errorf("KV bytes: %d capped, %d not; want a 16th", cs.KVBytesTot, fs.KVBytesTot)
	}
	t.Logf("KV: %d pages, %d bytes for 131072; %d pages, %d bytes with MaxModelLen 8192", fs.PagesTot, fs.KVBytesTot, cs.PagesTot, cs.KVBytesTot)

	long := make([]int32, 8190)
	for i := range long {
		long[i] = int32(3 + i%200)
	}
	if _, err := capped.Submit(context.Background(), engine.Request{Prompt: long, MaxTokens: 8}); !errors.Is(err, engine.ErrTooLong) {
		t.Errorf("8190 + 8 tokens with MaxModelLen 8192: err %v, want ErrTooLong", err)
	}
	pool := kernels.NewPool(1)
	defer pool.Close()
	if _, err := engine.New(model.NewRunner(m, pool), engine.Config{MaxModelLen: 131073}, nil); err == nil || !strings.Contains(err.Error(), "max model len") {
		t.Errorf("MaxModelLen past the model's context: err %v, want one naming max model len", err)
	}
}

// TestKVMemoryBudget: an explicit budget bounds the default arena, and one
// that cannot hold a single MaxModelLen sequence fails New; the default
// budget never takes the arena below one full sequence.
func TestKVMemoryBudget(t *testing.T) {
	m := longContextModel(t)
	capped := newEngine(t, m, engine.Config{MaxModelLen: 8192})
	perPage := capped.Stats().KVBytesTot / int64(capped.Config().Pages)
	e := newEngine(t, m, engine.Config{MaxModelLen: 8192, KVMemoryBytes: 1000 * perPage})
	if got := e.Config().Pages; got != 1000 {
		t.Errorf("budget of 1000 pages: %d pages", got)
	}
	if e.MaxContext() != 8192 {
		t.Errorf("budget of 1000 pages (16000 tokens): MaxContext %d, want 8192", e.MaxContext())
	}
	pool := kernels.NewPool(1)
	defer pool.Close()
	_, err := engine.New(model.NewRunner(m, pool), engine.Config{MaxModelLen: 8192, KVType: tensor.F16, KVMemoryBytes: 100 * perPage}, nil)
	if err == nil || !strings.Contains(err.Error(), "budget") {
		t.Errorf("a budget of 100 pages for 8192-token sequences: err %v, want one naming the budget", err)
	}
}
