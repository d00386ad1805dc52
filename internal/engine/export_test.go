package engine

import (
	"testing"
	"time"
)

// StepInfo is what a test sees of a scheduled step before it runs.
type StepInfo struct {
	Decodes   int            // sequences fed one token (decoding)
	Prefill   map[string]int // request ID → prefill tokens fed
	Tokens    int            // all tokens fed
	Seqs      int            // sequences in the step
	Attn      int            // query-key pairs of attention
	Predicted time.Duration  // the cost model's prediction
	Limited   bool           // the ITL target applied to the step
}

// Stepper holds an engine's loop before every step, so a test decides
// exactly what each step sees (submissions made while the loop is held
// are visible to the next step's schedule).
type Stepper struct {
	steps   chan StepInfo
	resume  chan struct{}
	freed   chan struct{}
	holding bool
}

// WithStepper returns cfg with hooks that hold the loop before each step
// until Stepper.Step lets it go. cost, when non-nil, replaces the measured
// time of every step (tokens, sequences, query-key pairs → cost).
func WithStepper(cfg Config, cost func(tokens, seqs, attn int) time.Duration) (Config, *Stepper) {
	g := &Stepper{steps: make(chan StepInfo), resume: make(chan struct{}), freed: make(chan struct{})}
	h := &testHooks{step: func(si stepInfo) {
		info := StepInfo{Decodes: si.decodes, Prefill: si.prefill, Tokens: si.features.tokens, Seqs: si.features.seqs,
			Attn: si.features.attn, Predicted: si.predicted, Limited: si.limited}
		select {
		case g.steps <- info:
		case <-g.freed:
			return
		}
		select {
		case <-g.resume:
		case <-g.freed:
		}
	}}
	if cost != nil {
		h.cost = func(f stepFeatures) time.Duration { return cost(f.tokens, f.seqs, f.attn) }
	}
	cfg.hooks = h
	return cfg, g
}

// Step lets the held step (if any) run, then waits until the loop has
// scheduled the next one and returns it, holding it. It fails the test if
// no step comes within a minute (the engine went idle: a test bug).
func (g *Stepper) Step(t testing.TB) StepInfo {
	t.Helper()
	if g.holding {
		g.resume <- struct{}{}
		g.holding = false
	}
	select {
	case info := <-g.steps:
		g.holding = true
		return info
	case <-time.After(time.Minute):
		t.Fatal("the engine scheduled no step: nothing left to run?")
		return StepInfo{}
	}
}

// Free lets the loop run on its own from now on. Call it before Close.
func (g *Stepper) Free() {
	select {
	case <-g.freed:
	default:
		close(g.freed)
	}
}

// WithMaskHook returns cfg with a hook that a mask worker calls with the
// request ID before ("start") and after ("end") computing each mask; it
// may block (a slow mask), and the worker waits for it.
func WithMaskHook(cfg Config, hook func(id, at string)) Config {
	if cfg.hooks == nil {
		cfg.hooks = &testHooks{}
	}
	cfg.hooks.mask = hook
	return cfg
}
