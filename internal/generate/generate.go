package generate

import (
	"context"
	"fmt"
	"slices"

	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/model"
	"tandem/internal/engine/sample"
)

// Options configures a generation.
type Options struct {
	MaxTokens  int // tokens to generate at most (<= 0: until EOS or the context is full)
	Sample     sample.Params
	StopTokens []int32      // extra token ids that end generation (EOS/EOT always do)
	ChunkSize  int          // prompt tokens per prefill step (<= 0: 512)
	AddSpecial bool         // add BOS/EOS as the vocabulary says
	OnText     func(string) // called with each newly completed piece of text (may be nil)
}

// Result is a finished generation.
type Result struct {
	PromptIDs    []int32 // prompt tokens, BOS included when added
	IDs          []int32 // generated tokens (the stop token included when one ended it)
	Text         string  // text of the generated tokens
	FinishReason string  // "stop" (end-of-generation or stop token) or "length"
}

// Run generates a continuation of prompt. It allocates the pages it needs
// from kv and releases them before returning, whatever the outcome.
func Run(ctx context.Context, r *model.Runner, kv *kvcache.Cache, prompt string, o Options) (*Result, error) {
	m := r.Model()
	ids := m.Tokenizer.Encode(prompt, o.AddSpecial, o.AddSpecial)
	return RunIDs(ctx, r, kv, ids, o)
}

// RunIDs is Run for an already tokenized prompt.
func RunIDs(ctx context.Context, r *model.Runner, kv *kvcache.Cache, ids []int32, o Options) (*Result, error) {
	m := r.Model()
	if len(ids) == 0 {
		return nil, fmt.Errorf("generate: the prompt is empty and the vocabulary adds no BOS; give a prompt")
	}
	if err := o.Sample.Validate(); err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	ctxLen := min(m.Config.Context, kv.Config().Pages*kv.Config().PageTokens)
	if len(ids) >= ctxLen {
		return nil, fmt.Errorf("generate: prompt of %d tokens does not fit the context of %d tokens", len(ids), ctxLen)
	}
	maxNew := ctxLen - len(ids)
	if o.MaxTokens > 0 {
		maxNew = min(maxNew, o.MaxTokens)
	}
	chunk := o.ChunkSize
	if chunk <= 0 {
		chunk = 512
	}
	pages, err := kv.Alloc(kv.Config().PagesFor(len(ids) + maxNew))
	if err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	defer kv.Release(pages)

	res := &Result{PromptIDs: slices.Clone(ids), FinishReason: "length"}
	history := slices.Clone(ids)
	smp := sample.New(o.Sample)
	dec := m.Tokenizer.NewContinuationDecoder()
	var text []byte
	emit := func(s string) {
		text = append(text, s...)
		if o.OnText != nil && s != "" {
			o.OnText(s)
		}
	}
	// a hybrid model's recurrent state, carried from step to step
	var state []float32
	if n := m.StateSize(); n > 0 {
		state = make([]float32, n)
	}
	// prefill in chunks; the last chunk's logits give the first token
	var logits []float32
	for pos := 0; pos < len(ids); pos += chunk {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("generate: %w", err)
		}
		end := min(pos+chunk, len(ids))
		out, err := r.Forward(kv, []model.Seq{{Tokens: ids[pos:end], Pos: pos, Pages: pages, State: state}})
		if err != nil {
			return nil, fmt.Errorf("generate: prefill: %w", err)
		}
		logits = out[0]
	}
	pos := len(ids)
	for len(res.IDs) < maxNew {
		id, _ := smp.Sample(logits, history)
		res.IDs = append(res.IDs, id)
		history = append(history, id)
		if m.Tokenizer.IsEOG(id) || slices.Contains(o.StopTokens, id) {
			res.FinishReason = "stop"
			break
		}
		emit(dec.Add(id))
		if len(res.IDs) == maxNew {
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("generate: %w", err)
		}
		out, err := r.Forward(kv, []model.Seq{{Tokens: []int32{id}, Pos: pos, Pages: pages, State: state}})
		if err != nil {
			return nil, fmt.Errorf("generate: decode: %w", err)
		}
		logits = out[0]
		pos++
	}
	emit(dec.Flush())
	res.Text = string(text)
	return res, nil
}
