package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"tandem/internal/engine"
	"tandem/internal/engine/model"
)

// steppedEngine starts an engine whose loop the test runs step by step.
func steppedEngine(t *testing.T, m *model.Model, cfg engine.Config, cost func(tokens, seqs, attn int) time.Duration) (*engine.Engine, *engine.Stepper) {
	t.Helper()
	cfg, g := engine.WithStepper(cfg, cost)
	e := newEngine(t, m, cfg)
	t.Cleanup(g.Free) // runs before newEngine's Close
	return e, g
}

func submit(t *testing.T, e *engine.Engine, ctx context.Context, id string, prompt []int32, maxTokens int) *engine.Handle {
	t.Helper()
	h, err := e.Submit(ctx, engine.Request{ID: id, Prompt: prompt, MaxTokens: maxTokens, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestShortPrefillOvertakesLong: a short prompt submitted while a long one
// is mid-prefill gets its whole prefill in the next step (shortest
// remaining first, the long one taking the rest of the budget) and its
// first token long before the long prompt's, instead of queueing behind it.
func TestShortPrefillOvertakesLong(t *testing.T) {
	m := tinyModel(t)
	e, g := steppedEngine(t, m, engine.Config{MaxBatchTokens: 64, Pages: 256}, nil)
	rng := rand.New(rand.NewPCG(21, 22))
	submit(t, e, context.Background(), "long", randomPrompt(rng, m, 600), 1)
	first := g.Step(t)
	if first.Prefill["long"] != 64 {
		t.Fatalf("step 1: %+v, want 64 tokens of the long prompt", first)
	}
	submit(t, e, context.Background(), "short", randomPrompt(rng, m, 20), 1)
	done := map[string]int{}
	fed := map[string]int{}
	want := map[string]int{"long": 600, "short": 20}
	for _, p := range []map[string]int{first.Prefill} {
		for id, n := range p {
			fed[id] += n
		}
	}
	for step := 2; len(done) < 2; step++ {
		if step > 20 {
			t.Fatalf("prefill not done after 20 steps: fed %v", fed)
		}
		info := g.Step(t)
		if info.Tokens > 64 {
			t.Errorf("step %d fed %d tokens, more than MaxBatchTokens 64", step, info.Tokens)
		}
		for id, n := range info.Prefill {
			fed[id] += n
			if fed[id] == want[id] {
				done[id] = step
			}
		}
	}
	if done["short"] != 2 || done["long"] <= done["short"] {
		t.Errorf("prefill done at steps %v; want short at step 2 (its arrival), long after it", done)
	}
}

// TestLongPrefillNotStarved: under a stream of short prompts that alone
// more than fill every step, a long prompt still completes its prefill
// within the bound of the aging rule: nothing submitted after the engine
// fed AgingRatio×R more prefill tokens ranks before it, so it is done once
// the work submitted until then is (every step here is full: 64 tokens).
func TestLongPrefillNotStarved(t *testing.T) {
	m := tinyModel(t)
	const budget, ratio, longLen, shortLen = 64, 8, 300, 24
	e, g := steppedEngine(t, m, engine.Config{MaxBatchTokens: budget, AgingRatio: ratio, Pages: 512, MaxWaiting: 1024}, nil)
	rng := rand.New(rand.NewPCG(23, 24))
	submit(t, e, context.Background(), "long", randomPrompt(rng, m, longLen), 1)
	n := 0
	shorts := func() { // 3 x 24 = 72 tokens a step: more than the budget
		for range 3 {
			submit(t, e, context.Background(), "short", randomPrompt(rng, m, shortLen), 1)
			n++
		}
	}
	shorts()
	fed := 0
	horizon := longLen*ratio/budget + 2 // steps after which no new short ranks before the long prompt (+2: off-by-ones of arrival)
	bound := (longLen+horizon*3*shortLen+budget-1)/budget + 1
	for step := 1; fed < longLen; step++ {
		if step > bound {
			t.Fatalf("long prompt starved: %d of %d tokens after %d steps (bound %d)", fed, longLen, step-1, bound)
		}
		info := g.Step(t)
		fed += info.Prefill["long"]
		if step == horizon/2 && fed >= longLen/2 {
			t.Fatalf("by step %d the long prompt had %d tokens: the short stream does not press on it, the test shows nothing", step, fed)
		}
		shorts()
	}
}

// TestITLTargetShrinksChunk: with an injected step cost, the prefill chunk
// of a long prompt shrinks while sequences decode so that each step's cost
// stays under the target, is the full budget while nothing decodes, and
// the prompt still completes.
func TestITLTargetShrinksChunk(t *testing.T) {
	m := tinyModel(t)
	const target = 8 * time.Millisecond
	cost := func(tokens, seqs, attn int) time.Duration {
		return time.Millisecond + time.Duration(tokens)*50*time.Microsecond + time.Duration(seqs)*500*time.Microsecond +
			time.Duration(attn)*20*time.Nanosecond
	}
	e, g := steppedEngine(t, m, engine.Config{MaxBatchTokens: 256, Pages: 512, ITLTarget: target}, cost)
	rng := rand.New(rand.NewPCG(25, 26))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 4 {
		submit(t, e, ctx, "decode", randomPrompt(rng, m, 20), 1000)
	}
	// Let them reach decoding and the cost model warm up.
	for range 12 {
		g.Step(t)
	}
	const longLen = 1200
	submit(t, e, ctx, "long", randomPrompt(rng, m, longLen), 1)
	fed, limited := 0, 0
	for step := 1; fed < longLen; step++ {
		if step > 200 {
			t.Fatalf("long prompt made no progress: %d of %d tokens after 200 steps", fed, longLen)
		}
		info := g.Step(t)
		got := info.Prefill["long"]
		if got == 0 {
			t.Fatalf("step %d carried no prefill of the waiting long prompt: %+v", step, info)
		}
		fed += got
		if info.Decodes != 4 || !info.Limited {
			t.Fatalf("step %d: %+v; want 4 decodes and the ITL limit applied", step, info)
		}
		limited++
		// The first step of the new mix (5 sequences) is predicted from
		// steps of 4; it may miss by a little, later ones may not.
		limit := target
		if step == 1 {
			limit = target * 105 / 100
		}
		if c := cost(info.Tokens, info.Seqs, info.Attn); c > limit {
			t.Errorf("step %d: %d prefill tokens, cost %v over %v (target %v, predicted %v)", step, got, c, limit, target, info.Predicted)
		}
		if got > 200 {
			t.Errorf("step %d carried %d prefill tokens beside 4 decodes; the target allows far fewer", step, got)
		}
	}
	t.Logf("long prompt of %d tokens prefilled in %d steps under the target", longLen, limited)
	cancel()
	// Without decodes the chunk is the whole budget again.
	submit(t, e, context.Background(), "alone", randomPrompt(rng, m, 600), 1)
	for {
		info := g.Step(t)
		if info.Decodes == 0 && info.Prefill["alone"] > 0 {
			if info.Prefill["alone"] != 256 || info.Limited {
				t.Errorf("with nothing decoding: %+v, want a 256-token unlimited chunk", info)
			}
			break
		}
	}
}

// TestITLTargetFloor: a target below even the decode part of a step still
// lets every step carry MinPrefillTokens of prefill.
func TestITLTargetFloor(t *testing.T) {
	m := tinyModel(t)
	cost := func(tokens, seqs, attn int) time.Duration {
		return 5*time.Millisecond + time.Duration(tokens)*50*time.Microsecond + time.Duration(seqs)*500*time.Microsecond
	}
	e, g := steppedEngine(t, m, engine.Config{MaxBatchTokens: 256, Pages: 512, ITLTarget: time.Millisecond, MinPrefillTokens: 16}, cost)
	rng := rand.New(rand.NewPCG(27, 28))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	submit(t, e, ctx, "decode", randomPrompt(rng, m, 20), 1000)
	for range 10 {
		g.Step(t)
	}
	const longLen = 100
	submit(t, e, ctx, "long", randomPrompt(rng, m, longLen), 1)
	for fed, step := 0, 1; fed < longLen; step++ {
		info := g.Step(t)
		want := min(16, longLen-fed)
		if got := info.Prefill["long"]; got != want || !info.Limited {
			t.Fatalf("step %d: %+v; want %d prefill tokens (the floor) under the spent target", step, info, want)
		}
		fed += want
	}
}

// TestITLTargetColdStart: before the cost model has seen enough steps, a
// step that carries decodes gets only the floor of prefill, not the whole
// budget (measured: unlimited warm-up steps beside decodes were the worst
// inter-token gaps of a run).
func TestITLTargetColdStart(t *testing.T) {
	m := tinyModel(t)
	e, g := steppedEngine(t, m, engine.Config{MaxBatchTokens: 256, Pages: 512, ITLTarget: time.Second, MinPrefillTokens: 16}, nil)
	rng := rand.New(rand.NewPCG(29, 30))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	submit(t, e, ctx, "decode", randomPrompt(rng, m, 20), 100)
	if info := g.Step(t); info.Prefill["decode"] != 20 || info.Decodes != 0 {
		t.Fatalf("step 1: %+v; want the 20-token prompt", info)
	}
	submit(t, e, ctx, "long", randomPrompt(rng, m, 600), 1) // seen by step 2
	if info := g.Step(t); info.Decodes != 1 || info.Prefill["long"] != 16 || !info.Limited {
		t.Errorf("step 2 (cost model cold): %+v; want 1 decode and the 16-token floor", info)
	}
}

// linearCost is an injected step cost: 1 ms a step, 50 µs a token, 500 µs
// a sequence, 20 ns a query-key pair.
func linearCost(tokens, seqs, attn int) time.Duration {
	return time.Millisecond + time.Duration(tokens)*50*time.Microsecond + time.Duration(seqs)*500*time.Microsecond +
		time.Duration(attn)*20*time.Nanosecond
}

// decodingEngine starts a stepped engine under an ITL target with n
// sequences decoding and its cost model warm.
func decodingEngine(t *testing.T, m *model.Model, cfg engine.Config, n int) (*engine.Engine, *engine.Stepper, *rand.Rand) {
	t.Helper()
	e, g := steppedEngine(t, m, cfg, linearCost)
	rng := rand.New(rand.NewPCG(31, 32))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for range n {
		submit(t, e, ctx, "decode", randomPrompt(rng, m, 20), 1000)
	}
	for range 12 {
		g.Step(t)
	}
	return e, g, rng
}

// TestShortPromptBesideLongPrefillUnderTarget: under the ITL target, short
// prompts arriving every few steps while a long prompt prefills beside 4
// decodes (a decode worker's local prefill of a spilled long prompt) are
// each prefilled whole in the step after their arrival, their first token
// at its end, and every step stays within the target. Before, when a
// sequence's own prefill aged it, the long prompt ranked first in its last
// part (AgingRatio 4: 4·(1200−c) − c < 4·20 from c = 945) and took every
// token the target left, so a short prompt arriving then got none until
// the long prefill was done.
func TestShortPromptBesideLongPrefillUnderTarget(t *testing.T) {
	m := tinyModel(t)
	const target = 8 * time.Millisecond
	e, g, rng := decodingEngine(t, m, engine.Config{MaxBatchTokens: 256, Pages: 1024, ITLTarget: target}, 4)
	const longLen, shortLen, every = 1200, 20, 3
	submit(t, e, context.Background(), "long", randomPrompt(rng, m, longLen), 1)
	fed, shorts, pending := 0, 0, ""
	for step := 1; fed < longLen; step++ {
		if step > 60 {
			t.Fatalf("long prompt stalled at %d of %d tokens", fed, longLen)
		}
		info := g.Step(t)
		if pending != "" {
			if got := info.Prefill[pending]; got != shortLen {
				t.Fatalf("step %d, the first after %s arrived (long prompt at %d of %d): %+v; want its %d tokens whole",
					step, pending, fed, longLen, info, shortLen)
			}
			shorts++
		}
		got := info.Prefill["long"]
		if got == 0 {
			t.Fatalf("step %d: %+v; the long prefill got nothing", step, info)
		}
		fed += got
		if info.Decodes < 4 || !info.Limited {
			t.Fatalf("step %d: %+v; want at least the 4 decodes and the ITL limit applied", step, info)
		}
		limit := target
		if step == 1 || pending != "" { // a new mix (one sequence more) is predicted from the steps before
			limit = target * 105 / 100
		}
		if c := linearCost(info.Tokens, info.Seqs, info.Attn); c > limit {
			t.Errorf("step %d: cost %v over %v (predicted %v): %+v", step, c, limit, info.Predicted, info)
		}
		pending = ""
		if step%every == 0 && fed < longLen {
			pending = fmt.Sprintf("short-%d", step)
			submit(t, e, context.Background(), pending, randomPrompt(rng, m, shortLen), 1)
		}
	}
	if shorts < 5 {
		t.Fatalf("only %d short prompts arrived during the long prefill: the test shows little", shorts)
	}
	t.Logf("%d short prompts, each prefilled in the step after its arrival, beside a %d-token prefill", shorts, longLen)
}

// TestLongPrefillNotStarvedUnderTarget: under the ITL target and a stream
// of short prompts that more than fill what the target leaves, a long
// prompt still completes by the aging bound, counted in prefill work:
// shorts submitted after the engine fed AgingRatio×R tokens past its
// arrival rank after it, so it is done once the work submitted until then
// (itself included) is.
func TestLongPrefillNotStarvedUnderTarget(t *testing.T) {
	m := tinyModel(t)
	const target, ratio = 8 * time.Millisecond, 4
	e, g, rng := decodingEngine(t, m, engine.Config{MaxBatchTokens: 256, Pages: 2048, ITLTarget: target,
		AgingRatio: ratio, MaxWaiting: 4096}, 4)
	const longLen, shortLen, perStep = 300, 12, 10 // 120 short tokens a step: more than the ~90 the target leaves
	submit(t, e, context.Background(), "long", randomPrompt(rng, m, longLen), 1)
	submitted, total, fed := longLen, 0, 0 // prefill tokens submitted since the long prompt, fed since, fed to it
	horizon := -1                          // submitted when the engine had fed ratio×longLen past the long prompt
	for step := 1; fed < longLen; step++ {
		if step > 400 {
			t.Fatalf("long prompt at %d of %d tokens after 400 steps: starved", fed, longLen)
		}
		if horizon < 0 && total >= ratio*longLen {
			horizon = submitted
		}
		for range perStep {
			submit(t, e, context.Background(), "short", randomPrompt(rng, m, shortLen), 1)
			submitted += shortLen
		}
		info := g.Step(t)
		fed += info.Prefill["long"]
		for _, n := range info.Prefill {
			total += n
		}
		if !info.Limited {
			t.Fatalf("step %d: %+v; want the ITL limit applied", step, info)
		}
	}
	if horizon < 0 {
		t.Fatalf("the long prompt finished after %d prefill tokens, before the aging horizon: the shorts did not press on it", total)
	}
	if total > horizon+256 { // + one step: the step that finishes it may feed others too
		t.Errorf("long prompt done after %d prefill tokens; the aging bound is %d (work submitted by the horizon)", total, horizon)
	}
	t.Logf("long prompt done after %d prefill tokens (bound %d)", total, horizon)
}
