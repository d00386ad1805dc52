package engine

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/tensor"
	"tandem/internal/fixture"
	"tandem/internal/synth"
)

// TestDefaultKVBudget: the default arena of a long-context model whose 4
// sequences pass DefaultKVMemoryBytes holds what the budget allows (and
// never less than one full sequence, logged as a warning when the budget
// gives way). Sizing only: nothing is allocated.
func TestDefaultKVBudget(t *testing.T) {
	cfg, err := synth.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Context, cfg.Layers = 131072, 16*cfg.Layers
	m := fixture.Synth(t, cfg, tensor.Q8_0, 1)
	kc := m.GroupedCacheConfig(16, 1, 0, tensor.F16)
	perPage := int64(2*kc.PageBytes()) * int64(kc.GroupLayers(kvcache.GroupGlobal))
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	c := Config{PageTokens: 16, KVType: tensor.F16}

	pages, err := defaultPages(m, c, 131072, log)
	if want := int(DefaultKVMemoryBytes / perPage); err != nil || pages != want || want >= 4*8192 {
		t.Errorf("131072 tokens, %d bytes a page: %d pages (%v), want the budget's %d (under 4 sequences, %d)", perPage, pages, err, want, 4*8192)
	}
	pages, err = defaultPages(m, c, 8192, log)
	if err != nil || pages != 4*512 {
		t.Errorf("8192 tokens: %d pages (%v), want 4 sequences, %d", pages, err, 4*512)
	}
	if logs.Len() != 0 {
		t.Errorf("logged while the budget held:\n%s", logs.String())
	}
	c.KVType = tensor.F32 // twice the bytes: one sequence no longer fits the budget
	cfg.Layers *= 4
	big := fixture.Synth(t, cfg, tensor.Q8_0, 1)
	pages, err = defaultPages(big, c, 131072, log)
	if err != nil || pages != 131072/16+1 || !strings.Contains(logs.String(), "--max-model-len") {
		t.Errorf("one sequence past the default budget: %d pages (%v), want %d and a warning naming --max-model-len:\n%s", pages, err, 131072/16+1, logs.String())
	}
}
