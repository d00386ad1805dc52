package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	"tandem/internal/engine"
	"tandem/internal/engine/grammar"
	"tandem/internal/engine/kvcache"
	"tandem/internal/engine/model"
	"tandem/internal/engine/sample"
)

// testSchema is bounded in every dimension, so that greedy and random
// generations on random weights finish well within the token budget.
const testSchema = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 6},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "kind": {"enum": ["cat", "dog", "owl"]},
    "tags": {"type": "array", "items": {"type": "boolean"}, "maxItems": 3},
    "score": {"type": ["number", "null"], "minimum": -5, "maximum": 5}
  },
  "required": ["name", "age", "kind"],
  "additionalProperties": false
}`

// checkTestSchema validates a document against testSchema by hand (an
// independent check of what the grammar promises).
func checkTestSchema(doc string) error {
	var v map[string]json.RawMessage
	dec := json.NewDecoder(strings.NewReader(doc))
	if err := dec.Decode(&v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the object")
	}
	for _, k := range []string{"name", "age", "kind"} {
		if _, ok := v[k]; !ok {
			return errors.New("missing required " + k)
		}
	}
	for k, raw := range v {
		switch k {
		case "name":
			var s string
			if err := json.Unmarshal(raw, &s); err != nil || len([]rune(s)) < 1 || len([]rune(s)) > 6 {
				return errors.New("bad name " + string(raw))
			}
		case "age":
			var f float64
			if err := json.Unmarshal(raw, &f); err != nil || f != float64(int64(f)) || f < 0 || f > 120 {
				return errors.New("bad age " + string(raw))
			}
		case "kind":
			var s string
			if err := json.Unmarshal(raw, &s); err != nil || !slices.Contains([]string{"cat", "dog", "owl"}, s) {
				return errors.New("bad kind " + string(raw))
			}
		case "tags":
			var b []bool
			if err := json.Unmarshal(raw, &b); err != nil || len(b) > 3 {
				return errors.New("bad tags " + string(raw))
			}
		case "score":
			if string(raw) == "null" {
				continue
			}
			var f float64
			if err := json.Unmarshal(raw, &f); err != nil || f < -5 || f > 5 {
				return errors.New("bad score " + string(raw))
			}
		default:
			return errors.New("unexpected property " + k)
		}
	}
	return nil
}

// mustCompile compiles a schema for compact output (random weights pick
// whitespace often enough to exhaust small token budgets otherwise).
func mustCompile(t *testing.T, schema string) *grammar.Grammar {
	t.Helper()
	g, err := grammar.Compile([]byte(schema), grammar.Options{DisableAnyWhitespace: true})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// text is the output of generated ids as the server streams it (each
// token's piece), without end-of-generation tokens.
func text(m *model.Model, ids []int32) string {
	var b []byte
	for _, id := range ids {
		if !m.Tokenizer.IsEOG(id) {
			b = append(b, m.Tokenizer.TokenPiece(id)...)
		}
	}
	return string(b)
}

// TestGrammarOutputsValid runs constrained sequences (greedy and seeded,
// both whitespace modes) batched with plain ones: every constrained output
// is a document the schema accepts and ends with finish stop; the plain
// sequences produce what they produce alone.
func TestGrammarOutputsValid(t *testing.T) {
	m := tinyModel(t)
	e := newEngine(t, m, engine.Config{MaxBatchTokens: 64, Pages: 256})
	free := e.KVCache().FreeCount()
	compact := mustCompile(t, testSchema)
	loose, err := grammar.Compile([]byte(testSchema), grammar.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	type job struct {
		h       *engine.Handle
		plain   bool
		prompt  []int32
		compact bool
	}
	var jobs []job
	for i := range 12 {
		p := randomPrompt(rng, m, 5+rng.IntN(30))
		req := engine.Request{Prompt: p, MaxTokens: 800}
		j := job{prompt: p}
		switch i % 3 {
		case 0:
			j.plain = true
			req.MaxTokens = 12
			req.IgnoreEOS = true
		case 1:
			req.Grammar = loose
			req.Sample = sample.Params{Temperature: 1, Seed: uint64(i)}
		case 2:
			req.Grammar = compact
			j.compact = true
			if i%2 == 0 {
				req.Sample = sample.Params{Temperature: 0.8, TopK: 20, Seed: uint64(i)}
			}
		}
		h, err := e.Submit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		j.h = h
		jobs = append(jobs, j)
	}
	for i, j := range jobs {
		ids, last := collect(t, j.h)
		if j.plain {
			if want := alone(t, m, j.prompt, 12); !slices.Equal(ids, want) {
				t.Errorf("plain request %d batched with constrained ones: %v, alone %v", i, ids, want)
			}
			continue
		}
		doc := text(m, ids)
		if last.Finish != engine.FinishStop {
			t.Errorf("constrained request %d: finish %q (err %v) after %d tokens, want stop; output %q", i, last.Finish, last.Err, len(ids), doc)
			continue
		}
		if err := checkTestSchema(doc); err != nil {
			t.Errorf("constrained request %d: output %q does not satisfy the schema: %v", i, doc, err)
		}
		var c bytes.Buffer
		if j.compact && (json.Compact(&c, []byte(doc)) != nil || c.String() != doc) {
			t.Errorf("compact request %d has whitespace outside strings: %q", i, doc)
		}
	}
	waitIdle(t, e, free)
}

// TestRegexAndChoice: outputs of regex and choice grammars match them.
func TestRegexAndChoice(t *testing.T) {
	m := tinyModel(t)
	e := newEngine(t, m, engine.Config{Pages: 128})
	re, err := grammar.CompileRegex(`[a-c]{2,5}-[0-9]+x`, grammar.Options{})
	if err != nil {
		t.Fatal(err)
	}
	choices := []string{"yes", "no", "maybe not"}
	ch, err := grammar.CompileChoice(choices, grammar.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`^[a-c]{2,5}-[0-9]+x$`)
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range 8 {
		p := randomPrompt(rng, m, 8)
		sp := sample.Params{Temperature: 1.2, Seed: uint64(i)}
		h, err := e.Submit(context.Background(), engine.Request{Prompt: p, MaxTokens: 200, Grammar: re, Sample: sp})
		if err != nil {
			t.Fatal(err)
		}
		ids, last := collect(t, h)
		if got := text(m, ids); !want.MatchString(got) || last.Finish != engine.FinishStop {
			t.Errorf("regex output %q (finish %q, err %v) does not match", got, last.Finish, last.Err)
		}
		h, err = e.Submit(context.Background(), engine.Request{Prompt: p, MaxTokens: 50, Grammar: ch, Sample: sp})
		if err != nil {
			t.Fatal(err)
		}
		ids, last = collect(t, h)
		if got := text(m, ids); !slices.Contains(choices, got) || last.Finish != engine.FinishStop {
			t.Errorf("choice output %q (finish %q, err %v) is not one of %q", got, last.Finish, last.Err, choices)
		}
	}
}

// TestLogitBias: +100 forces a token, -100 bans the greedy one.
func TestLogitBias(t *testing.T) {
	m := tinyModel(t)
	e := newEngine(t, m, engine.Config{Pages: 64})
	p := []int32{1, 50, 60, 70}
	plain := alone(t, m, p, 6)
	run := func(req engine.Request) ([]int32, engine.Update) {
		t.Helper()
		req.Prompt, req.MaxTokens, req.IgnoreEOS = p, 6, true
		h, err := e.Submit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return collect(t, h)
	}
	forced := int32(300)
	if got, _ := run(engine.Request{LogitBias: map[int32]float32{forced: 100}}); !slices.Equal(got, slices.Repeat([]int32{forced}, 6)) {
		t.Errorf("bias +100 on %d: %v", forced, got)
	}
	got, _ := run(engine.Request{LogitBias: map[int32]float32{plain[0]: -100}})
	if got[0] == plain[0] {
		t.Errorf("bias -100 on the greedy first token %d: still chosen (%v)", plain[0], got)
	}
	// Sampled too: a banned token never comes out.
	got, _ = run(engine.Request{LogitBias: map[int32]float32{forced: 100, 301: 100}, Sample: sample.Params{Temperature: 1, Seed: 3}})
	for _, id := range got {
		if id != forced && id != 301 {
			t.Errorf("bias +100 on 300 and 301 with temperature 1 drew %d (%v)", id, got)
		}
	}
	for _, bad := range []map[int32]float32{{-1: 1}, {int32(m.Config.Vocab): 1}, {5: 101}, {5: -100.5}} {
		if _, err := e.Submit(context.Background(), engine.Request{Prompt: p, MaxTokens: 2, LogitBias: bad}); !errors.Is(err, engine.ErrBadRequest) {
			t.Errorf("logit bias %v: err %v, want ErrBadRequest", bad, err)
		}
	}
}

// TestMinTokens: with the end token forced by a bias, min_tokens holds it
// off for exactly that many tokens; with ignore_eos it never ends early.
func TestMinTokens(t *testing.T) {
	m := tinyModel(t)
	e := newEngine(t, m, engine.Config{Pages: 64})
	eos := m.Tokenizer.EOS()
	p := []int32{1, 50, 60, 70}
	for _, min := range []int{0, 1, 5} {
		h, err := e.Submit(context.Background(), engine.Request{Prompt: p, MaxTokens: 20, MinTokens: min,
			LogitBias: map[int32]float32{eos: 100}})
		if err != nil {
			t.Fatal(err)
		}
		ids, last := collect(t, h)
		if len(ids) != min+1 || ids[min] != eos || slices.Contains(ids[:min], eos) || last.Finish != engine.FinishStop {
			t.Errorf("min_tokens %d with EOS forced: ids %v finish %q, want %d other tokens then EOS", min, ids, last.Finish, min)
		}
	}
	// A stop token is held off as well.
	h, err := e.Submit(context.Background(), engine.Request{Prompt: p, MaxTokens: 20, MinTokens: 3, StopTokens: []int32{300},
		LogitBias: map[int32]float32{300: 100}})
	if err != nil {
		t.Fatal(err)
	}
	if ids, _ := collect(t, h); len(ids) != 4 || ids[3] != 300 || slices.Contains(ids[:3], 300) {
		t.Errorf("min_tokens 3 with stop token 300 forced: %v", ids)
	}
	h, err = e.Submit(context.Background(), engine.Request{Prompt: p, MaxTokens: 7, IgnoreEOS: true,
		LogitBias: map[int32]float32{eos: 100}})
	if err != nil {
		t.Fatal(err)
	}
	if ids, last := collect(t, h); len(ids) != 7 || last.Finish != engine.FinishLength {
		t.Errorf("ignore_eos with EOS forced: %d tokens, finish %q; want 7, length", len(ids), last.Finish)
	}
	for _, bad := range []engine.Request{{MinTokens: -1}, {MinTokens: 21}} {
		bad.Prompt, bad.MaxTokens = p, 20
		if _, err := e.Submit(context.Background(), bad); !errors.Is(err, engine.ErrBadRequest) {
			t.Errorf("min tokens %d with max 20: err %v, want ErrBadRequest", bad.MinTokens, err)
		}
	}
}

// TestGrammarWithMinTokens: min_tokens cannot keep a complete document
// going when nothing but its end may follow (the grammar wins), and does
// hold off an end the grammar merely allows.
func TestGrammarWithMinTokens(t *testing.T) {
	m := tinyModel(t)
	e := newEngine(t, m, engine.Config{Pages: 64})
	ch, err := grammar.CompileChoice([]string{"a", "ab", "abc"}, grammar.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eos := m.Tokenizer.EOS()
	// EOS is forced whenever allowed; min_tokens 2 makes the document go
	// on past "a" (where an end is allowed but so is "b").
	h, err := e.Submit(context.Background(), engine.Request{Prompt: []int32{1, 9}, MaxTokens: 20, Grammar: ch, MinTokens: 2,
		LogitBias: map[int32]float32{eos: 100}})
	if err != nil {
		t.Fatal(err)
	}
	ids, last := collect(t, h)
	if got := text(m, ids); len(got) < 2 || last.Finish != engine.FinishStop {
		t.Errorf("choice a|ab|abc with min_tokens 2 and EOS forced: %q finish %q", got, last.Finish)
	}
	h, err = e.Submit(context.Background(), engine.Request{Prompt: []int32{1, 9}, MaxTokens: 20, Grammar: ch, MinTokens: 10})
	if err != nil {
		t.Fatal(err)
	}
	ids, last = collect(t, h)
	if got := text(m, ids); !slices.Contains([]string{"a", "ab", "abc"}, got) || last.Finish != engine.FinishStop {
		t.Errorf("choice with min_tokens 10: %q finish %q err %v; want a choice and stop", got, last.Finish, last.Err)
	}
}

// TestGrammarSurvivesPreemption: constrained seeded sequences preempted
// and recomputed produce what they produce in an engine with room to spare.
func TestGrammarSurvivesPreemption(t *testing.T) {
	m := tinyModel(t)
	g := mustCompile(t, testSchema)
	rng := rand.New(rand.NewPCG(9, 10))
	var reqs []engine.Request
	for i := range 6 {
		reqs = append(reqs, engine.Request{Prompt: randomPrompt(rng, m, 60+rng.IntN(30)), MaxTokens: 150, Grammar: g,
			Sample: sample.Params{Temperature: 1, Seed: uint64(i)}})
	}
	// runAll submits every request while the loop is held before its
	// second step (the first runs a one-token request alone), so from the
	// second step on all six compete for the pages in the same order
	// whatever the machine's speed: submitted one by one against a running
	// loop, early requests could finish before the last arrived, and under
	// -race nothing was preempted.
	runAll := func(cfg engine.Config) ([][]int32, int) {
		cfg, st := engine.WithStepper(cfg, nil)
		e := newEngine(t, m, cfg)
		first, err := e.Submit(context.Background(), engine.Request{Prompt: reqs[0].Prompt[:1], MaxTokens: 1})
		if err != nil {
			t.Fatal(err)
		}
		st.Step(t) // held before the step of the one-token request
		var hs []*engine.Handle
		for _, r := range reqs {
			h, err := e.Submit(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			hs = append(hs, h)
		}
		st.Free()
		collect(t, first)
		var out [][]int32
		pre := 0
		for _, h := range hs {
			ids, last := collect(t, h)
			out = append(out, ids)
			pre += last.Preempted
		}
		return out, pre
	}
	want, _ := runAll(engine.Config{Pages: 256})
	got, pre := runAll(engine.Config{MaxBatchTokens: 256, Pages: 24, PageTokens: 16})
	if pre == 0 {
		t.Fatal("no sequence was preempted; the test does not exercise preemption")
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("request %d: after preemption %q, without %q", i, text(m, got[i]), text(m, want[i]))
		}
		if err := checkTestSchema(text(m, got[i])); err != nil {
			t.Errorf("request %d: %v (%q)", i, err, text(m, got[i]))
		}
	}
}

// TestConstrainedExportImportMatchesColocated: a constrained sequence
// whose first token is sampled by a prefill engine (under the grammar) and
// continued by a decode engine (rebuilding the matcher from that token)
// equals the colocated one, token for token, greedy and seeded.
func TestConstrainedExportImportMatchesColocated(t *testing.T) {
	m := tinyModel(t)
	colo := newEngine(t, m, engine.Config{Pages: 64})
	prefill := newEngine(t, m, engine.Config{MaxBatchTokens: 32, Pages: 64})
	decode := newEngine(t, m, engine.Config{Pages: 64})
	schema := mustCompile(t, testSchema)
	re, err := grammar.CompileRegex(`(ab|cd){1,4}[0-9]{3}`, grammar.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(13, 14))
	for _, g := range []*grammar.Grammar{schema, re} {
		for _, sp := range []sample.Params{{}, {Temperature: 1, Seed: 77}, {Temperature: 0.9, TopP: 0.9, Seed: 5}} {
			prompt := randomPrompt(rng, m, 5+rng.IntN(60))
			req := engine.Request{Prompt: prompt, MaxTokens: 120, Grammar: g, Sample: sp}
			h, err := colo.Submit(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			want, wl := collect(t, h)
			got, gl := disaggregated(t, prefill, decode, req)
			if !slices.Equal(got, want) || gl.Finish != wl.Finish {
				t.Errorf("sampling %+v: disaggregated %q (%s), colocated %q (%s)", sp, text(m, got), gl.Finish, text(m, want), wl.Finish)
			}
			if wl.Finish != engine.FinishStop {
				t.Errorf("sampling %+v: colocated finish %q, want stop (%q)", sp, wl.Finish, text(m, want))
			}
		}
	}
}

// disaggregated runs req's prompt on prefill (one token, exporting K/V)
// and continues on decode from imported pages.
func disaggregated(t *testing.T, prefill, decode *engine.Engine, req engine.Request) ([]int32, engine.Update) {
	t.Helper()
	sink := &pageCopy{}
	pr := req
	pr.MaxTokens, pr.KVSink = 1, sink
	hp, err := prefill.Submit(context.Background(), pr)
	if err != nil {
		t.Fatal(err)
	}
	first, pl := collect(t, hp)
	if len(first) != 1 {
		t.Fatalf("prefill leg: ids %v final %+v", first, pl)
	}
	allocated := make(chan []int32, 1)
	var kvDst *kvcache.Cache
	dr := req
	dr.Import = &engine.Import{Allocated: func(kv *kvcache.Cache, t kvcache.Tables) { kvDst = kv; allocated <- t[kvcache.GroupGlobal] }}
	hd, err := decode.Submit(context.Background(), dr)
	if err != nil {
		t.Fatal(err)
	}
	pages := <-allocated
	for ord, layers := range sink.pages {
		for l, kvb := range layers {
			copy(kvDst.KPage(l, pages[ord]), kvb[0])
			copy(kvDst.VPage(l, pages[ord]), kvb[1])
		}
	}
	if err := hd.Resume(engine.Token{ID: first[0]}); err != nil {
		t.Fatal(err)
	}
	return collect(t, hd)
}

// TestResumeWithRejectedToken: a first token the decode side's grammar
// rejects ends the sequence with ErrConstraint instead of continuing
// unconstrained output.
func TestResumeWithRejectedToken(t *testing.T) {
	m := tinyModel(t)
	e := newEngine(t, m, engine.Config{Pages: 64})
	free := e.KVCache().FreeCount()
	g := mustCompile(t, testSchema)
	got := make(chan []int32, 1)
	h, err := e.Submit(context.Background(), engine.Request{Prompt: []int32{1, 5, 6}, MaxTokens: 10, Grammar: g,
		Import: &engine.Import{Allocated: func(_ *kvcache.Cache, t kvcache.Tables) { got <- t[kvcache.GroupGlobal] }}})
	if err != nil {
		t.Fatal(err)
	}
	<-got
	x := m.Tokenizer.Encode("x", false, false)
	if err := h.Resume(engine.Token{ID: x[len(x)-1]}); err != nil {
		t.Fatal(err)
	}
	ids, last := collect(t, h)
	if len(ids) != 0 || last.Finish != engine.FinishError || !errors.Is(last.Err, engine.ErrConstraint) {
		t.Errorf("resume with a token the grammar rejects: ids %v final %+v, want no token and ErrConstraint", ids, last)
	}
	waitIdle(t, e, free)
}
