package engine_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"

	"tandem/internal/engine"
	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/model"
)

// fakeStateSize is the state of statefulTiny: the tiny model's forward pass
// ignores it, so these tests check the engine's slot accounting and the PD
// plumbing, not the numbers (qwen35_engine_test.go checks those).
const fakeStateSize = 24

// statefulTiny is the tiny model with a recurrent state declared: the engine
// treats it as a hybrid (slots, snapshots, ResumeState).
func statefulTiny(t *testing.T) *model.Model {
	t.Helper()
	m := tinyModel(t)
	m.Config.State = model.StateConfig{Floats: fakeStateSize, Layout: "test:24"}
	return m
}

// stateCopy is pageCopy that is also a StateSink.
type stateCopy struct {
	pageCopy
	states      [][]byte
	callsBefore int  // LayerComputed calls when PromptState came
	finalSeen   bool // the last layer's final call had come by then
	lastFinal   bool
}

func (c *stateCopy) LayerComputed(kv *kvcache.Cache, pages []int32, layer, computed int, final bool) {
	c.pageCopy.LayerComputed(kv, pages, layer, computed, final)
	c.mu.Lock()
	c.lastFinal = final && layer == kv.Config().Layers-1
	c.mu.Unlock()
}

func (c *stateCopy) PromptState(state []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.states = append(c.states, slices.Clone(state))
	c.callsBefore, c.finalSeen = c.calls, c.lastFinal
}

// TestStatePDAPI: on a model with state, the prefill side's StateSink gets
// the state once, sized StateSize*4, after the last LayerComputed(final);
// the decode side refuses Resume (ErrStateRequired) and a state of the wrong
// size (ErrBadRequest), and ResumeState decodes as a colocated run does.
func TestStatePDAPI(t *testing.T) {
	m := statefulTiny(t)
	plain := tinyModel(t)
	prefill := newEngine(t, m, engine.Config{MaxBatchTokens: 32, Pages: 64})
	decode := newEngine(t, m, engine.Config{Pages: 64})
	rng := rand.New(rand.NewPCG(31, 32))
	for _, n := range []int{5, 16, 70} {
		prompt := randomPrompt(rng, m, n)
		want := alone(t, plain, prompt, 8)
		sink := &stateCopy{}
		hp, err := prefill.Submit(context.Background(), engine.Request{Prompt: prompt, MaxTokens: 1, KVSink: sink, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		first, _ := collect(t, hp)
		if len(sink.states) != 1 || len(sink.states[0]) != 4*m.StateSize() {
			t.Fatalf("prompt %d: PromptState calls %d (sizes %v), want one of %d bytes", n, len(sink.states), lens(sink.states), 4*m.StateSize())
		}
		if !sink.finalSeen || sink.callsBefore != sink.calls {
			t.Errorf("prompt %d: PromptState came after %d of %d LayerComputed calls (final seen %v), want after the last", n, sink.callsBefore, sink.calls, sink.finalSeen)
		}
		if _, err := prefill.Submit(context.Background(), engine.Request{Prompt: prompt, MaxTokens: 1, KVSink: &sink.pageCopy}); !errors.Is(err, engine.ErrBadRequest) {
			t.Errorf("a KVSink that is not a StateSink on a model with state: %v, want ErrBadRequest", err)
		}
		allocated := make(chan kvcache.Tables, 1)
		var kvDst *kvcache.Cache
		hd, err := decode.Submit(context.Background(), engine.Request{Prompt: prompt, MaxTokens: 8, IgnoreEOS: true,
			Import: &engine.Import{Allocated: func(kv *kvcache.Cache, t kvcache.Tables) { kvDst = kv; allocated <- t }}})
		if err != nil {
			t.Fatal(err)
		}
		tabs := <-allocated
		for ord, layers := range sink.pages {
			for l, kvb := range layers {
				copy(kvDst.KPage(l, tabs[kvcache.GroupGlobal][ord]), kvb[0])
				copy(kvDst.VPage(l, tabs[kvcache.GroupGlobal][ord]), kvb[1])
			}
		}
		if err := hd.Resume(engine.Token{ID: first[0]}); !errors.Is(err, engine.ErrStateRequired) {
			t.Errorf("Resume on a model with state: %v, want ErrStateRequired", err)
		}
		if err := hd.ResumeState(engine.Token{ID: first[0]}, sink.states[0][4:]); !errors.Is(err, engine.ErrBadRequest) {
			t.Errorf("ResumeState with %d bytes: %v, want ErrBadRequest", len(sink.states[0])-4, err)
		}
		if err := hd.ResumeState(engine.Token{ID: first[0]}, sink.states[0]); err != nil {
			t.Fatal(err)
		}
		got, last := collect(t, hd)
		if !slices.Equal(got, want) || last.Finish != engine.FinishLength {
			t.Errorf("prompt %d: disaggregated ids %v (%s), colocated %v", n, got, last.Finish, want)
		}
	}
	waitIdle(t, decode, decode.Stats().PagesTot)
	waitIdle(t, prefill, prefill.Stats().PagesTot)
}

// TestResumeStateWithoutState: on a model without state, ResumeState with
// no state is Resume, and any state is the wrong size.
func TestResumeStateWithoutState(t *testing.T) {
	m := tinyModel(t)
	e := newEngine(t, m, engine.Config{Pages: 64})
	allocated := make(chan struct{})
	h, err := e.Submit(context.Background(), engine.Request{Prompt: []int32{1, 5, 6, 7}, MaxTokens: 4, IgnoreEOS: true,
		Import: &engine.Import{Allocated: func(*kvcache.Cache, kvcache.Tables) { close(allocated) }}})
	if err != nil {
		t.Fatal(err)
	}
	<-allocated
	if err := h.ResumeState(engine.Token{ID: 9}, make([]byte, 8)); !errors.Is(err, engine.ErrBadRequest) {
		t.Errorf("ResumeState with 8 bytes on a model without state: %v, want ErrBadRequest", err)
	}
	if err := h.ResumeState(engine.Token{ID: 9}, nil); err != nil {
		t.Fatal(err)
	}
	got, _ := collect(t, h)
	if len(got) != 4 || got[0] != 9 { // the pages were never written: only the plumbing counts
		t.Fatalf("ids %v, want 9 then 3 more", got)
	}
	if st := e.Stats(); st.StateSlotsTot != 0 {
		t.Errorf("state slots %d on a model without state", st.StateSlotsTot)
	}
}

func lens(bs [][]byte) []int {
	var n []int
	for _, b := range bs {
		n = append(n, len(b))
	}
	return n
}

// TestStateSlotsBoundAdmission: with 2 state slots, no step ever runs more
// than 2 sequences, the others wait (no error, no panic), and every request
// ends with its colocated output and every slot back.
func TestStateSlotsBoundAdmission(t *testing.T) {
	m := statefulTiny(t)
	plain := tinyModel(t)
	cfg, st := engine.WithStepper(engine.Config{MaxBatchTokens: 64, Pages: 128, StateSlots: 2}, nil)
	e := newEngine(t, m, cfg)
	defer st.Free()
	rng := rand.New(rand.NewPCG(41, 42))
	var prompts [][]int32
	var hs []*engine.Handle
	for range 5 {
		p := randomPrompt(rng, m, 3+rng.IntN(20))
		prompts = append(prompts, p)
		h, err := e.Submit(context.Background(), engine.Request{Prompt: p, MaxTokens: 6, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	var mu sync.Mutex
	results := make([][]int32, len(hs))
	var wg sync.WaitGroup
	for i, h := range hs {
		wg.Go(func() {
			ids, _ := collect(t, h)
			mu.Lock()
			results[i] = ids
			mu.Unlock()
		})
	}
	most := 0
	for range 5 * 7 { // at most 7 steps per request (a prompt step and 6 decodes)
		info := st.Step(t)
		most = max(most, info.Seqs)
		if s := e.Stats(); s.StateSlotsUsed > 2 {
			t.Fatalf("%d state slots used of 2", s.StateSlotsUsed)
		}
		if e.Stats().GeneratedTokens == 5*6-1 {
			break
		}
	}
	st.Free()
	wg.Wait()
	if most != 2 {
		t.Errorf("at most %d sequences in a step, want 2 (the state slots)", most)
	}
	for i, p := range prompts {
		if want := alone(t, plain, p, 6); !slices.Equal(results[i], want) {
			t.Errorf("request %d: ids %v, want %v", i, results[i], want)
		}
	}
	waitIdle(t, e, e.Stats().PagesTot)
}

// TestStateSlotsReleasedOnEveryEnd: cancellation while waiting and while
// running, preemption (a KV arena too small for all at once) and Close with
// sequences running give every state slot back.
func TestStateSlotsReleasedOnEveryEnd(t *testing.T) {
	m := statefulTiny(t)
	plain := tinyModel(t)
	e := newEngine(t, m, engine.Config{MaxBatchTokens: 32, Pages: 12, StateSlots: 3})
	rng := rand.New(rand.NewPCG(51, 52))
	type job struct {
		prompt []int32
		h      *engine.Handle
	}
	var jobs []job
	for range 6 {
		p := randomPrompt(rng, m, 20+rng.IntN(30))
		h, err := e.Submit(context.Background(), engine.Request{Prompt: p, MaxTokens: 40, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, job{p, h})
	}
	jobs[5].h.Cancel() // likely still waiting
	for i, j := range jobs[:5] {
		ids, last := collect(t, j.h)
		if want := alone(t, plain, j.prompt, 40); !slices.Equal(ids, want) {
			t.Errorf("request %d: ids %v (%s), want %v", i, ids, last.Finish, want)
		}
	}
	if st := e.Stats(); st.Preemptions == 0 {
		t.Errorf("no preemption with 12 pages for 6 sequences of up to 90 tokens: the test does not cover it")
	}
	waitIdle(t, e, e.Stats().PagesTot)

	// cancel running sequences mid-decode
	var hs []*engine.Handle
	for range 3 {
		h, err := e.Submit(context.Background(), engine.Request{Prompt: randomPrompt(rng, m, 10), MaxTokens: 60, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	for _, h := range hs {
		first, err := h.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		h.Cancel()
		_, last := collect(t, h)
		if first.Done { // it finished before the cancellation
			last = first
		}
		if last.Finish != engine.FinishCancelled && last.Finish != engine.FinishLength {
			t.Errorf("cancelled: final %+v", last)
		}
	}
	waitIdle(t, e, e.Stats().PagesTot)
	// Close with sequences running: newEngine's cleanup checks the slots.
	for range 4 {
		if _, err := e.Submit(context.Background(), engine.Request{Prompt: randomPrompt(rng, m, 10), MaxTokens: 60, IgnoreEOS: true}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStateSnapshotAtBranchPoint: on a model with state, prefill chunks end
// at the snapshot boundaries. A's prompt (60 tokens, 16-token pages) is
// snapshotted at its last full page (48); B shares 40 tokens with it, 2
// pages, but no snapshot within them (a miss: recomputed from 0), so B is
// snapshotted at the branch point (32) and at its last full page (64); C,
// with the same 40 tokens, resumes from B's snapshot at 32 (a hit).
func TestStateSnapshotAtBranchPoint(t *testing.T) {
	m := statefulTiny(t)
	plain := tinyModel(t)
	cfg, st := engine.WithStepper(engine.Config{MaxBatchTokens: 512, Pages: 64, PrefixCache: true}, nil)
	e := newEngine(t, m, cfg)
	defer st.Free()
	rng := rand.New(rand.NewPCG(61, 62))
	sys := randomPrompt(rng, m, 40)
	mk := func(n int) []int32 { return append(slices.Clone(sys), randomPrompt(rng, m, n+1)[1:]...) }
	prompts := map[string][]int32{"A": mk(20), "B": mk(25), "C": mk(30)}
	hs := map[string]*engine.Handle{}
	submit := func(id string) {
		h, err := e.Submit(context.Background(), engine.Request{ID: id, Prompt: prompts[id], MaxTokens: 1, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		hs[id] = h
	}
	var chunks []string
	step := func() {
		info := st.Step(t)
		for id, n := range info.Prefill {
			chunks = append(chunks, id+":"+strconv.Itoa(n))
		}
		if info.Decodes > 0 { // a last single prompt token counts as a decode
			chunks = append(chunks, "one")
		}
	}
	submit("A")
	step()
	step()
	submit("B") // admitted after A's last step: A's snapshot is in
	step()
	step()
	step()
	submit("C")
	step()
	step()
	st.Free()
	if want := []string{"A:48", "A:12", "B:32", "B:32", "one", "C:32", "C:6"}; !slices.Equal(chunks, want) {
		t.Errorf("prefill chunks %v, want %v", chunks, want)
	}
	for id, wantCached := range map[string]int{"A": 0, "B": 0, "C": 32} {
		ids, last := collect(t, hs[id])
		if last.CachedTokens != wantCached {
			t.Errorf("%s: %d cached tokens, want %d", id, last.CachedTokens, wantCached)
		}
		if want := alone(t, plain, prompts[id], 1); !slices.Equal(ids, want) {
			t.Errorf("%s: ids %v, want %v", id, ids, want)
		}
	}
	s := e.Stats()
	if s.StateSnapshotHits != 1 || s.StateSnapshotMisses != 1 || s.StateSnapshots != 4 {
		t.Errorf("snapshot hits %d, misses %d, held %d; want 1, 1 and 4 (A at 48, B at 32 and 64, C at 64)",
			s.StateSnapshotHits, s.StateSnapshotMisses, s.StateSnapshots)
	}
	waitIdleCached(t, e)
}
