package engine

import (
	"fmt"
	"log/slog"

	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/model"
)

// DefaultKVMemoryBytes is the soft bound on the default KV arena's global
// pool (Config.KVMemoryBytes 0): 4 GiB. It keeps a long-context model
// (131072 tokens: 4 sequences of that are 32768 pages) from reserving
// tens of GiB by default; a model whose one full sequence needs more still
// gets that one sequence.
const DefaultKVMemoryBytes = 4 << 30

// defaultSequences is how many full sequences of the context length the
// default arena holds when the memory budget allows.
const defaultSequences = 4

// defaultPages sizes the default KV arena (the global group's pages):
// defaultSequences sequences of maxLen tokens, at most the memory budget
// holds. An explicit budget (cfg.KVMemoryBytes > 0) that cannot hold one
// sequence (and the page a step may need past it) is an error; the default
// budget then gives way to that one sequence, and says so in the log.
func defaultPages(m *model.Model, cfg Config, maxLen int, log *slog.Logger) (int, error) {
	seq := (maxLen + cfg.PageTokens - 1) / cfg.PageTokens
	want := defaultSequences * seq
	kc := m.GroupedCacheConfig(cfg.PageTokens, 1, 0, cfg.KVType)
	layers := kc.GroupLayers(kvcache.GroupGlobal)
	if layers == 0 {
		return want, nil // no pool grows with the context (every layer windowed)
	}
	perPage := int64(2*kc.PageBytes()) * int64(layers)
	budget, explicit := cfg.KVMemoryBytes, cfg.KVMemoryBytes > 0
	if !explicit {
		budget = DefaultKVMemoryBytes
	}
	fit := budget / perPage
	if fit >= int64(want) {
		return want, nil
	}
	least := seq + 1
	if fit >= int64(least) {
		return int(fit), nil
	}
	if explicit {
		return 0, fmt.Errorf("engine: the KV memory budget of %d bytes holds %d pages of %d tokens (%d bytes each), less than one %d-token sequence needs (%d pages): raise the budget or lower the max model len",
			budget, fit, cfg.PageTokens, perPage, maxLen, least)
	}
	log.Warn("one full sequence of the context length needs more KV memory than the default budget; the KV cache holds just that one: set --max-model-len to a smaller context, or --kv-cache-memory-bytes",
		"max_model_len", maxLen, "pages", least, "bytes", int64(least)*perPage, "default_budget_bytes", int64(DefaultKVMemoryBytes))
	return least, nil
}
