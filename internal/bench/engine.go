package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"tandem/internal/engine/grammar"
	"tandem/internal/engine/kernels"
	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/model"
	"tandem/internal/engine/sample"
	"tandem/internal/engine/tensor"
)

// MaxBatch bounds EngineOptions.Batch.
const MaxBatch = 256

// EngineOptions configures an engine benchmark.
type EngineOptions struct {
	PromptTokens int         // prompt length per sequence, prefilled in one step as llama.cpp's bench does
	GenTokens    int         // tokens decoded per sequence after the prompt
	Batch        int         // sequences decoded together, one token each per step (0: 1)
	KVType       tensor.Type // KV cache element type
	PageTokens   int         // KV page size
	Seed         uint64      // picks the random prompt tokens (and seeds sampling)
	// Temperature of the draw; 0 is greedy.
	Temperature float32
	// Grammar, when set, constrains every sequence as the engine does: the
	// grammar's mask before each draw, Accept after it. A sequence whose
	// document is complete starts a new one (its matcher is reset) and
	// decoding goes on, so that a constrained run does the same forward
	// work as a plain one and the difference is the constraint's cost.
	Grammar *grammar.Grammar
}

// EngineResult is what an engine benchmark measured.
type EngineResult struct {
	Model        string  `json:"model"`
	Threads      int     `json:"threads"`
	Kernels      string  `json:"kernels"` // the kernel level the run used (kernels.CurrentLevel)
	Batch        int     `json:"batch"`
	Constrained  bool    `json:"constrained"`
	PromptTokens int     `json:"prompt_tokens"` // per sequence
	GenTokens    int     `json:"gen_tokens"`    // per sequence
	PrefillS     float64 `json:"prefill_s"`
	DecodeS      float64 `json:"decode_s"`
	PrefillTokS  float64 `json:"prefill_tok_s"` // all sequences' prompt tokens per second
	DecodeTokS   float64 `json:"decode_tok_s"`  // all sequences' generated tokens per second
	// SampleS is the part of DecodeS spent choosing tokens: the draw and,
	// when constrained, the masks and Accept calls (ConstraintS of it).
	SampleS     float64 `json:"sample_s"`
	ConstraintS float64 `json:"constraint_s"`
	// VocabS is the one-time vocabulary indexing for the grammar (not in
	// DecodeS); Documents counts the documents completed while decoding.
	VocabS    float64 `json:"vocab_s,omitempty"`
	Documents int     `json:"documents,omitempty"`
	// PrefillShares and DecodeShares say where each phase's forward time
	// went, from the runner's own counters.
	PrefillShares Shares `json:"prefill_time_shares"`
	DecodeShares  Shares `json:"decode_time_shares"`
	// ActiveBytes is the weight bytes one decode step reads
	// (model.ActiveWeights: the used experts' share of a mixture of
	// experts); DecodeWeightGBs is those bytes times decode steps per
	// second, in 10^9 bytes per second, the rate to hold against the
	// machine's streaming bandwidth (Memory). KV cache reads are not in it.
	ActiveBytes     uint64  `json:"active_weight_bytes"`
	DecodeWeightGBs float64 `json:"decode_weight_gb_s"`
}

// Shares splits a phase's forward time into matrix multiplications,
// attention and everything else (norms, RoPE, activations, embedding,
// sampling setup), as fractions summing to 1.
type Shares struct {
	MatMul    float64 `json:"matmul"`
	Attention float64 `json:"attention"`
	Other     float64 `json:"other"`
}

// sharesOf turns the runner's counters into Shares.
func sharesOf(t model.PhaseTimes) Shares {
	if t.Total <= 0 {
		return Shares{}
	}
	tot := float64(t.Total)
	s := Shares{MatMul: float64(t.MatMul) / tot, Attention: float64(t.Attention) / tot}
	s.Other = max(0, 1-s.MatMul-s.Attention)
	return s
}

// benchSeq is one sequence of the batch.
type benchSeq struct {
	history []int32
	pages   []int32
	logits  []float32
	state   []float32 // a hybrid model's recurrent state slot (nil for the others)
	smp     *sample.Sampler
	m       *grammar.Matcher
	mask    grammar.Bitset
}

// Engine prefills Batch random prompts in one step and decodes them
// together, timing each phase.
func Engine(ctx context.Context, r *model.Runner, threads int, o EngineOptions) (*EngineResult, error) {
	m := r.Model()
	total := o.PromptTokens + o.GenTokens
	batch := max(o.Batch, 1)
	switch {
	case o.PromptTokens <= 0 || o.GenTokens < 0:
		return nil, fmt.Errorf("bench: prompt tokens must be positive and gen tokens non-negative")
	case batch > MaxBatch:
		return nil, fmt.Errorf("bench: batch %d is above the limit of %d", batch, MaxBatch)
	case total > m.Config.Context:
		return nil, fmt.Errorf("bench: %d prompt + %d generated tokens exceed the model's context of %d", o.PromptTokens, o.GenTokens, m.Config.Context)
	}
	pt := o.PageTokens
	if pt <= 0 {
		pt = 16
	}
	per := (total + pt - 1) / pt
	kv, err := kvcache.New(m.CacheConfig(pt, batch*per, o.KVType))
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	res := &EngineResult{Model: m.Config.Name, Threads: threads, Kernels: kernels.CurrentLevel().String(), Batch: batch, Constrained: o.Grammar != nil,
		PromptTokens: o.PromptTokens, GenTokens: o.GenTokens}
	if m.File != nil {
		_, res.ActiveBytes = model.ActiveWeights(m.File, m.Config)
	}
	var vocab *grammar.Vocab
	if o.Grammar != nil {
		t0 := time.Now()
		if vocab, err = grammar.FromTokenizer(m.Tokenizer); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		res.VocabS = time.Since(t0).Seconds()
	}
	rng := rand.New(rand.NewPCG(o.Seed, 1))
	seqs := make([]*benchSeq, batch)
	fw := make([]model.Seq, batch)
	for i := range seqs {
		s := &benchSeq{smp: sample.New(sample.Params{Temperature: o.Temperature, Seed: o.Seed + uint64(i)})}
		if s.pages, err = kv.Alloc(per); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		s.history = make([]int32, o.PromptTokens, total)
		for j := range s.history {
			s.history[j] = int32(3 + rng.IntN(m.Config.Vocab-3)) // skip the usual special ids 0..2
		}
		if o.Grammar != nil {
			s.m = grammar.NewMatcher(o.Grammar, vocab)
			s.mask = grammar.NewBitset(vocab.Size())
		}
		if n := m.StateSize(); n > 0 {
			s.state = make([]float32, n) // a hybrid model's recurrent state
		}
		seqs[i] = s
		fw[i] = model.Seq{Tokens: s.history, Pos: 0, Pages: s.pages, State: s.state}
	}
	r.ResetTimes()
	start := time.Now()
	out, err := r.Forward(kv, fw)
	if err != nil {
		return nil, fmt.Errorf("bench: prefill: %w", err)
	}
	res.PrefillS = time.Since(start).Seconds()
	res.PrefillShares = sharesOf(r.Times())
	r.ResetTimes()
	for i, s := range seqs {
		s.logits = out[i]
	}
	var sampleD, conD time.Duration
	start = time.Now()
	for step := range o.GenTokens {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t0 := time.Now()
		for i, s := range seqs {
			id, err := s.next(&conD, &res.Documents)
			if err != nil {
				return nil, fmt.Errorf("bench: sequence %d, token %d: %w", i, step, err)
			}
			s.history = append(s.history, id)
			fw[i] = model.Seq{Tokens: s.history[len(s.history)-1:], Pos: o.PromptTokens + step, Pages: s.pages, State: s.state}
		}
		sampleD += time.Since(t0)
		if out, err = r.Forward(kv, fw); err != nil {
			return nil, fmt.Errorf("bench: decode: %w", err)
		}
		for i, s := range seqs {
			s.logits = out[i]
		}
	}
	res.DecodeS = time.Since(start).Seconds()
	res.DecodeShares = sharesOf(r.Times())
	res.SampleS, res.ConstraintS = sampleD.Seconds(), conD.Seconds()
	res.PrefillTokS = float64(batch*o.PromptTokens) / res.PrefillS
	if o.GenTokens > 0 {
		res.DecodeTokS = float64(batch*o.GenTokens) / res.DecodeS
		res.DecodeWeightGBs = float64(res.ActiveBytes) * float64(o.GenTokens) / res.DecodeS / 1e9
	}
	return res, nil
}

// next chooses s's next token, under its grammar when it has one (the
// engine's order: mask, draw, Accept), adding the time spent in the
// grammar to con and starting a new document when one completes.
func (s *benchSeq) next(con *time.Duration, docs *int) (int32, error) {
	if s.m == nil {
		id, _ := s.smp.Sample(s.logits, s.history)
		return id, nil
	}
	t0 := time.Now()
	s.m.Mask(s.mask)
	*con += time.Since(t0)
	id, _ := s.smp.SampleConstrained(s.logits, s.history, sample.Constraint{Allow: s.mask})
	if id < 0 {
		return 0, fmt.Errorf("the grammar allows no token")
	}
	t0 = time.Now()
	err := s.m.Accept(id)
	if err == nil && s.m.Done() {
		*docs++
		s.m.Reset()
	}
	*con += time.Since(t0)
	return id, err
}
