package jinja

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// fuzzLimits keep fuzzed renders small: every input must end within them,
// with an output or an error, never a panic or a hang.
var fuzzLimits = Limits{Steps: 200_000, OutputBytes: 1 << 20, Depth: 32, StringBytes: 1 << 20, Items: 10_000, AllocBytes: 32 << 20, CheckEvery: 256}

const fuzzVars = `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi<|im_end|>"},` +
	`{"role":"assistant","content":null,"tool_calls":[{"function":{"name":"f","arguments":{"x":1}}}]}],` +
	`"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","properties":{"x":{"type":"integer"}}}}}],` +
	`"add_generation_prompt":true,"bos_token":"<s>","eos_token":"</s>","n":2000000000}`

// fuzzSeeds adds every template of testdata (the corpus, the hostile
// templates, the semantics cases) as a seed.
func fuzzSeeds(f *testing.F, add func(src string)) {
	files, _ := filepath.Glob("testdata/corpus/templates/*.jinja")
	hostile, _ := filepath.Glob("testdata/hostile/*.jinja")
	for _, p := range append(files, hostile...) {
		src, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		add(string(src))
	}
	for _, c := range readCasesFrom(f, "testdata/semantics/cases.txt") {
		add(c.template)
	}
}

func FuzzParse(f *testing.F) {
	fuzzSeeds(f, func(src string) { f.Add(src) })
	f.Fuzz(func(t *testing.T, src string) {
		tmpl, err := Parse(src)
		if err != nil {
			var je *Error
			if !errors.As(err, &je) || je.Kind != ErrSyntax {
				t.Fatalf("Parse error %v (%T), want a syntax *Error", err, err)
			}
			return
		}
		out, err := tmpl.Render(context.Background(), nil, Options{Limits: fuzzLimits})
		checkRenderResult(t, out, err)
	})
}

func FuzzRender(f *testing.F) {
	fuzzSeeds(f, func(src string) { f.Add(src, fuzzVars) })
	f.Fuzz(func(t *testing.T, src, vars string) {
		tmpl, err := Parse(src)
		if err != nil {
			return
		}
		var raw map[string]json.RawMessage
		if json.Unmarshal([]byte(vars), &raw) != nil {
			return
		}
		values := map[string]Value{}
		for k, r := range raw {
			v, err := FromJSON(r, true)
			if err != nil {
				return
			}
			values[k] = v
		}
		start := time.Now()
		out, err := tmpl.Render(context.Background(), values, Options{Limits: fuzzLimits})
		if d := time.Since(start); d > 30*time.Second { // a hang, not a measurement
			t.Fatalf("render took %v within budgets of %d steps", d, fuzzLimits.Steps)
		}
		checkRenderResult(t, out, err)
	})
}

// checkRenderResult checks that a render gave an output with sound
// provenance, or one of the errors Render documents.
func checkRenderResult(t *testing.T, out Output, err error) {
	var je *Error
	var be *BudgetError
	switch {
	case err == nil:
		checkSpans(t, out)
		if int64(len(out.Text)) > fuzzLimits.OutputBytes {
			t.Fatalf("output of %d bytes over the %d budget", len(out.Text), fuzzLimits.OutputBytes)
		}
	case errors.As(err, &be), errors.As(err, &je), errors.Is(err, ErrShadowsBuiltin):
	default:
		t.Fatalf("Render error %v (%T) is none of the documented ones", err, err)
	}
}
