package engine_test

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"tandem/internal/engine"
	"tandem/internal/engine/grammar"
)

// collectWithin drains h like collect, failing the test when the sequence
// has not ended within d (a sequence that waits for another's mask).
func collectWithin(t *testing.T, h *engine.Handle, d time.Duration, what string) ([]int32, engine.Update) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var ids []int32
	var last engine.Update
	for {
		u, err := h.Next(ctx)
		if err == io.EOF {
			return ids, last
		}
		if err != nil {
			t.Fatalf("%s: not ended within %v (%d tokens so far): %v", what, d, len(ids), err)
		}
		for _, tk := range u.Tokens {
			ids = append(ids, tk.ID)
		}
		last = u
	}
}

// gate blocks the mask jobs of one request until it is opened.
type gate struct {
	id       string
	open     chan struct{}
	once     sync.Once
	openOnce sync.Once
	started  chan struct{} // closed when the first blocked job starts
}

// release opens the gate (again: a no-op).
func (g *gate) release() { g.openOnce.Do(func() { close(g.open) }) }

func newGate(id string) *gate {
	return &gate{id: id, open: make(chan struct{}), started: make(chan struct{})}
}

func (g *gate) hook(id, at string) {
	if id != g.id || at != "start" {
		return
	}
	g.once.Do(func() { close(g.started) })
	<-g.open
}

// TestLateMaskDoesNotBlockOthers: while a constrained sequence's mask is
// held back (its worker blocked), a plain sequence in the same engine gets
// all its tokens; the constrained one sits out steps and, once its mask
// comes, produces exactly what it produces when its masks are on time.
// With the mask computed inside the step loop, as before, the plain
// sequence waits for the blocked mask and this test fails.
func TestLateMaskDoesNotBlockOthers(t *testing.T) {
	m := tinyModel(t)
	g := mustCompile(t, testSchema)
	rng := rand.New(rand.NewPCG(7, 8))
	cp, pp := randomPrompt(rng, m, 9), randomPrompt(rng, m, 11)
	creq := engine.Request{ID: "c", Prompt: cp, MaxTokens: 400, Grammar: g}
	preq := engine.Request{ID: "p", Prompt: pp, MaxTokens: 24, IgnoreEOS: true}

	ref := newEngine(t, m, engine.Config{Pages: 256})
	h, err := ref.Submit(context.Background(), creq)
	if err != nil {
		t.Fatal(err)
	}
	want, wantLast := collect(t, h)
	if wantLast.Finish != engine.FinishStop {
		t.Fatalf("reference run: finish %q (%v)", wantLast.Finish, wantLast.Err)
	}

	gt := newGate("c")
	e := newEngine(t, m, engine.WithMaskHook(engine.Config{Pages: 256, MaskBudget: time.Minute}, gt.hook))
	t.Cleanup(gt.release) // before the engine's Close, should the test fail
	hc, err := e.Submit(context.Background(), creq)
	if err != nil {
		t.Fatal(err)
	}
	<-gt.started
	hp, err := e.Submit(context.Background(), preq)
	if err != nil {
		t.Fatal(err)
	}
	ids, last := collectWithin(t, hp, 20*time.Second, "the plain sequence")
	if len(ids) != 24 || last.Finish != engine.FinishLength {
		t.Fatalf("plain sequence: %d tokens, finish %q (%v)", len(ids), last.Finish, last.Err)
	}
	if w := e.Stats().MaskWaits; w == 0 {
		t.Errorf("MaskWaits %d: the constrained sequence never waited for its mask", w)
	}
	gt.release()
	got, gotLast := collectWithin(t, hc, time.Minute, "the constrained sequence")
	if gotLast.Finish != engine.FinishStop || !slices.Equal(got, want) {
		t.Errorf("constrained sequence with a late mask: %q finish %q (%v), want %q as with masks on time",
			text(m, got), gotLast.Finish, gotLast.Err, text(m, want))
	}
}

// TestMaskBudgetEndsSequence: a sequence whose mask runs past MaskBudget
// (its worker held for longer) ends with FinishGrammarBudget and an error
// wrapping ErrGrammarTooCostly, counted in Stats, without waiting for the
// worker; a plain sequence beside it is untouched. With RequestMaskBudget
// the masks' total is bounded the same way.
func TestMaskBudgetEndsSequence(t *testing.T) {
	m := tinyModel(t)
	g := mustCompile(t, testSchema)
	rng := rand.New(rand.NewPCG(9, 10))
	t.Run("one mask", func(t *testing.T) {
		gt := newGate("c")
		e := newEngine(t, m, engine.WithMaskHook(engine.Config{Pages: 256, MaskBudget: 20 * time.Millisecond}, gt.hook))
		t.Cleanup(gt.release)
		hc, err := e.Submit(context.Background(), engine.Request{ID: "c", Prompt: randomPrompt(rng, m, 9), MaxTokens: 400, Grammar: g})
		if err != nil {
			t.Fatal(err)
		}
		hp, err := e.Submit(context.Background(), engine.Request{ID: "p", Prompt: randomPrompt(rng, m, 9), MaxTokens: 16, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		ids, last := collectWithin(t, hc, 20*time.Second, "the over-budget sequence")
		if last.Finish != engine.FinishGrammarBudget || !errors.Is(last.Err, engine.ErrGrammarTooCostly) ||
			!strings.Contains(last.Err.Error(), "one token mask took longer than 20ms") {
			t.Errorf("over-budget sequence: %d tokens, finish %q, err %v; want %q wrapping ErrGrammarTooCostly", len(ids), last.Finish, last.Err, engine.FinishGrammarBudget)
		}
		if ids, last := collectWithin(t, hp, 20*time.Second, "the plain sequence"); len(ids) != 16 || last.Finish != engine.FinishLength {
			t.Errorf("plain sequence: %d tokens, finish %q (%v)", len(ids), last.Finish, last.Err)
		}
		if n := e.Stats().GrammarBudgetEnds; n != 1 {
			t.Errorf("GrammarBudgetEnds %d, want 1", n)
		}
	})
	t.Run("all masks", func(t *testing.T) {
		slow := func(id, at string) {
			if id == "c" && at == "start" {
				time.Sleep(3 * time.Millisecond)
			}
		}
		e := newEngine(t, m, engine.WithMaskHook(engine.Config{Pages: 256, MaskBudget: 10 * time.Millisecond, RequestMaskBudget: 10 * time.Millisecond}, slow))
		hc, err := e.Submit(context.Background(), engine.Request{ID: "c", Prompt: randomPrompt(rng, m, 9), MaxTokens: 400, Grammar: g})
		if err != nil {
			t.Fatal(err)
		}
		ids, last := collectWithin(t, hc, 20*time.Second, "the over-budget sequence")
		if last.Finish != engine.FinishGrammarBudget || !errors.Is(last.Err, engine.ErrGrammarTooCostly) {
			t.Errorf("sequence past its request's mask budget: %d tokens, finish %q, err %v", len(ids), last.Finish, last.Err)
		}
	})
}

// TestGrammarCostRefusedAtSubmit: a grammar whose first masks need more
// work than Config.GrammarCost allows is refused by Submit with an error
// wrapping ErrBadRequest and ErrGrammarTooCostly (counted in Stats);
// ordinary grammars pass the same probe.
func TestGrammarCostRefusedAtSubmit(t *testing.T) {
	m := tinyModel(t)
	e := newEngine(t, m, engine.Config{Pages: 256, GrammarCost: grammar.CostLimit{Masks: 8, MaskNodes: 1, TotalNodes: 4}})
	doubling, err := grammar.CompileGBNF("root ::= a\na ::= [^0-3] a \"0\" | [^0-3] b \"1\" | \"\"\nb ::= [^0-3] a \"2\" | [^0-3] b \"3\" | \"\"", grammar.Options{})
	if err != nil {
		t.Fatal(err)
	}
	prompt := randomPrompt(rand.New(rand.NewPCG(1, 1)), m, 5)
	_, err = e.Submit(context.Background(), engine.Request{Prompt: prompt, MaxTokens: 8, Grammar: doubling})
	if !errors.Is(err, engine.ErrBadRequest) || !errors.Is(err, engine.ErrGrammarTooCostly) || !errors.Is(err, grammar.ErrTooCostly) {
		t.Fatalf("ambiguous grammar: Submit error %v, want ErrBadRequest and ErrGrammarTooCostly", err)
	}
	if n := e.Stats().GrammarRefused; n != 1 {
		t.Errorf("GrammarRefused %d, want 1", n)
	}
	h, err := e.Submit(context.Background(), engine.Request{Prompt: prompt, MaxTokens: 400, Grammar: mustCompile(t, testSchema)})
	if err != nil {
		t.Fatalf("ordinary schema refused: %v", err)
	}
	if _, last := collect(t, h); last.Finish != engine.FinishStop {
		t.Errorf("ordinary schema: finish %q (%v)", last.Finish, last.Err)
	}
}
