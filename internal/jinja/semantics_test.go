package jinja

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// refClock is the instant the reference scripts pin strftime_now to.
var refClock = time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)

// refCase is one reference rendering: an output, or an error with
// Python's exception type.
type refCase struct {
	Name      string  `json:"name"`
	Output    *string `json:"output"`
	Error     *string `json:"error"`
	ErrorType string  `json:"error_type"`
}

type semCase struct {
	name, template string
	vars           map[string]json.RawMessage
}

// readCasesFrom reads a cases file (testdata/semantics/cases.txt, in the
// format render.py reads).
func readCasesFrom(t testing.TB, path string) []semCase {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cases []semCase
	var lines []string
	flush := func() {
		if len(cases) == 0 {
			return
		}
		for len(lines) > 0 && lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		cases[len(cases)-1].template = strings.Join(lines, "\n")
		lines = nil
	}
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "=== "):
			flush()
			cases = append(cases, semCase{name: line[4:]})
		case len(cases) == 0:
		case strings.HasPrefix(line, "--- vars "):
			if err := json.Unmarshal([]byte(line[len("--- vars "):]), &cases[len(cases)-1].vars); err != nil {
				t.Fatalf("case %s: vars: %v", cases[len(cases)-1].name, err)
			}
		default:
			lines = append(lines, line)
		}
	}
	flush()
	return cases
}

func readJSON(t testing.TB, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
}

// varsFrom decodes JSON variables as untrusted values.
func varsFrom(t *testing.T, raws ...map[string]json.RawMessage) map[string]Value {
	t.Helper()
	vars := map[string]Value{}
	for _, raw := range raws {
		for k, v := range raw {
			val, err := FromJSON(v, true)
			if err != nil {
				t.Fatalf("variable %s: %v", k, err)
			}
			vars[k] = val
		}
	}
	return vars
}

// render parses and renders src with the reference clock.
func render(src string, vars map[string]Value, lim Limits) (Output, error) {
	tmpl, err := Parse(src)
	if err != nil {
		return Output{}, err
	}
	return tmpl.Render(context.Background(), vars, Options{Limits: lim, Now: func() time.Time { return refClock }})
}

// matchError checks an error against a reference error: the template's
// raise_exception must keep its message, syntax errors must be syntax
// errors, undefined and sandbox errors theirs.
func matchError(err error, want refCase) string {
	var je *Error
	var be *BudgetError
	switch {
	case err == nil:
		return "rendered, want an error"
	case want.ErrorType == "TemplateError":
		if !errors.As(err, &je) || je.Kind != ErrRaised || je.Msg != *want.Error {
			return "want the template's own message"
		}
	case want.ErrorType == "TemplateSyntaxError" || want.ErrorType == "TemplateAssertionError" || want.ErrorType == "SyntaxError":
		if !errors.As(err, &je) || je.Kind != ErrSyntax {
			return "want a syntax error"
		}
	case want.ErrorType == "UndefinedError":
		if !errors.As(err, &je) || je.Kind != ErrUndefined {
			return "want an undefined error"
		}
	case want.ErrorType == "SecurityError":
		if !errors.As(err, &je) || je.Kind != ErrSecurity {
			return "want a security error"
		}
	case want.ErrorType == "OverflowError" || want.ErrorType == "MemoryError":
		if !errors.As(err, &be) && !errors.As(err, &je) {
			return "want a budget or template error"
		}
	default:
		if !errors.As(err, &je) && !errors.As(err, &be) {
			return "want a template error"
		}
	}
	return ""
}

// knownDifferences are the cases where the renderer knowingly differs from
// Python, and why.
var knownDifferences = map[string]string{
	"int overflow like python bigint": "integers are 64-bit: an integer result outside int64 is an error, where Python's ints have no bound",
}

// TestSemantics renders the small templates of testdata/semantics and
// compares each with Python's Jinja2 (transformers' setup), byte for
// byte, or error for error.
func TestSemantics(t *testing.T) {
	cases := readCasesFrom(t, "testdata/semantics/cases.txt")
	var want []refCase
	readJSON(t, "testdata/semantics/python.json", &want)
	if len(want) != len(cases) {
		t.Fatalf("python.json has %d cases, cases.txt %d: run scripts/jinja-reference/render.py semantics", len(want), len(cases))
	}
	var defaults map[string]json.RawMessage
	readJSON(t, "testdata/semantics/vars.json", &defaults)
	for i, c := range cases {
		w := want[i]
		if w.Name != c.name {
			t.Fatalf("case %d is %q in python.json, %q in cases.txt: regenerate", i, w.Name, c.name)
		}
		out, err := render(c.template, varsFrom(t, defaults, c.vars), Limits{})
		if why, ok := knownDifferences[c.name]; ok {
			if err == nil && w.Output != nil && out.Text == *w.Output {
				t.Errorf("%s: renders as Python does now; drop it from knownDifferences", c.name)
			}
			t.Logf("%s: differs from Python on purpose: %s", c.name, why)
			continue
		}
		switch {
		case w.Output != nil && err != nil:
			t.Errorf("%s: error %v\nwant %q", c.name, err, *w.Output)
		case w.Output != nil && out.Text != *w.Output:
			t.Errorf("%s:\n got %q\nwant %q", c.name, out.Text, *w.Output)
		case w.Error != nil:
			if msg := matchError(err, w); msg != "" {
				t.Errorf("%s: got %q, %v: %s (Python: %s: %s)", c.name, out.Text, err, msg, w.ErrorType, *w.Error)
			}
		}
	}
}
