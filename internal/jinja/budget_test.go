package jinja

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// budgetCases break one budget each.
var budgetCases = []struct {
	name, src string
	lim       Limits
	want      Budget
}{
	{"steps", "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", Limits{}, BudgetSteps},
	{"steps (small)", "{% for i in range(1000) %}{{ i }}{% endfor %}", Limits{Steps: 500}, BudgetSteps},
	{"output", "{% for i in range(100) %}{{ 'x' * 100 }}{% endfor %}", Limits{OutputBytes: 5000}, BudgetOutput},
	{"depth (macro)", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", Limits{}, BudgetDepth},
	{"depth (caller)", "{% macro f() %}{% call f() %}{{ caller() }}{% endcall %}{% endmacro %}{{ f() }}", Limits{}, BudgetDepth},
	{"depth (call under a chain)", "{% macro f(n) %}{{ f(n)" + strings.Repeat(" | e", 100) + " }}{% endmacro %}{{ f(0) }}", Limits{}, BudgetDepth},
	{"depth (recursive loop)", "{% for x in [1] recursive %}{{ loop([x]) }}{% endfor %}", Limits{}, BudgetDepth},
	{"depth (value printed)", "{% set ns = namespace(l=[]) %}{% for i in range(500) %}{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l }}", Limits{}, BudgetDepth},
	{"depth (value as json)", "{% set ns = namespace(l=[]) %}{% for i in range(500) %}{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l | tojson }}", Limits{}, BudgetDepth},
	{"depth (value compared)", "{% set ns = namespace(l=[]) %}{% for i in range(500) %}{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l == ns.l }}", Limits{}, BudgetDepth},
	{"string (repeat)", `{{ "x" * 3000000000 }}`, Limits{}, BudgetString},
	{"string (doubling)", `{% set ns = namespace(s="x") %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}`, Limits{}, BudgetString},
	{"string (plus)", `{% set ns = namespace(s="x") %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}`, Limits{}, BudgetString},
	{"string (join)", `{{ (['x' * 1000] * 1000) | join }}`, Limits{StringBytes: 100000}, BudgetString},
	{"string (captured block)", `{% set b %}{% for i in range(1000) %}xxxxxxxxxx{% endfor %}{% endset %}`, Limits{StringBytes: 5000}, BudgetString},
	{"string (format)", `{{ '%s%s' % ('x' * 600, 'y' * 600) }}`, Limits{StringBytes: 1000}, BudgetString},
	{"string (replace)", `{{ ('x' * 100) | replace('x', 'yyyyyyyyyy') }}`, Limits{StringBytes: 500}, BudgetString},
	{"items (range)", "{% for i in range(2000000000) %}{% endfor %}", Limits{}, BudgetItems},
	{"items (list doubling)", "{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}", Limits{}, BudgetItems},
	{"items (list repeat)", "{{ [1, 2] * 3000000000 }}", Limits{}, BudgetItems},
	{"items (literal)", "{{ [1, 2, 3] }}", Limits{Items: 2}, BudgetItems},
	{"allocated bytes", "{% for i in range(1000) %}{% set s = 'x' * 10000 %}{% endfor %}", Limits{AllocBytes: 1 << 20}, BudgetAlloc},
}

func TestBudgets(t *testing.T) {
	for _, c := range budgetCases {
		t.Run(c.name, func(t *testing.T) {
			out, err := render(c.src, nil, c.lim)
			var be *BudgetError
			if !errors.As(err, &be) || !errors.Is(err, ErrBudget) {
				t.Fatalf("render = %d bytes, %v; want a budget error", len(out.Text), err)
			}
			if be.Budget != c.want {
				t.Errorf("budget %q broken, want %q (%v)", be.Budget, c.want, err)
			}
			if !strings.Contains(err.Error(), string(c.want)) {
				t.Errorf("error %q does not name the %s budget", err, c.want)
			}
		})
	}
}

// TestHostileTemplates renders the templates of testdata/hostile (finding
// 3): each ends with a budget error within the default budgets, and the
// two that are harmless for ordinary input break one only for a hostile
// request.
func TestHostileTemplates(t *testing.T) {
	files, err := filepath.Glob("testdata/hostile/*.jinja")
	if err != nil || len(files) < 10 {
		t.Fatalf("hostile templates: %v, %v", files, err)
	}
	msgs := func(content string) Value {
		v, err := FromJSON([]byte(`[{"role":"user","content":"`+content+`"}]`), true)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".jinja")
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var hostile []map[string]Value // the requests that must break a budget
		ordinary := map[string]Value{"messages": msgs("hi")}
		switch name {
		case "kwargs-range":
			hostile = []map[string]Value{{"messages": msgs("hi"), "n": Int(2000000000)}, {"messages": msgs("hi"), "n": Int(100000)}}
		case "content-trigger":
			hostile = []map[string]Value{{"messages": msgs("boom")}}
		default:
			hostile, ordinary = []map[string]Value{ordinary}, nil
		}
		if ordinary != nil {
			if _, err := render(string(src), ordinary, Limits{}); err != nil {
				t.Errorf("%s: an ordinary request fails: %v", name, err)
			}
		}
		for _, vars := range hostile {
			_, err := render(string(src), vars, Limits{})
			if !errors.Is(err, ErrBudget) {
				t.Errorf("%s: render error %v, want a budget error", name, err)
			}
			t.Logf("%s: %v", name, err)
		}
	}
}

// TestCancel checks that a render stops when its context ends: the
// template's clock (strftime_now) cancels the context mid-render, and the
// render, which would run for billions of steps, stops within the steps
// between two checks.
func TestCancel(t *testing.T) {
	tmpl, err := Parse("{{ strftime_now('%Y') }}{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	now := func() time.Time { cancel(); return refClock }
	out, err := tmpl.Render(ctx, nil, Options{Limits: Limits{Steps: 1 << 62}, Now: now})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("render error %v, want context.Canceled", err)
	}
	t.Logf("stopped: %v", err)
	_ = out
	// A context already done stops the render before it starts.
	if _, err = tmpl.Render(ctx, nil, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("render with a done context: %v, want context.Canceled", err)
	}
}

func TestShadowedBuiltin(t *testing.T) {
	for _, name := range []string{"namespace", "range", "raise_exception", "strftime_now", "dict", "cycler", "joiner"} {
		if !IsBuiltin(name) {
			t.Errorf("IsBuiltin(%q) = false", name)
		}
		_, err := render("{{ 1 }}", map[string]Value{name: Int(1)}, Limits{})
		if !errors.Is(err, ErrShadowsBuiltin) {
			t.Errorf("variable %q: %v, want ErrShadowsBuiltin", name, err)
		}
	}
	if IsBuiltin("messages") || IsBuiltin("enable_thinking") {
		t.Errorf("IsBuiltin reports an ordinary variable")
	}
}

// TestDepthIsCounted checks that the call depth is the renderer's count:
// Limits.Depth deep is fine, one deeper is a budget error.
func TestDepthIsCounted(t *testing.T) {
	src := "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% else %}bottom{% endif %}{% endmacro %}{{ f(d) }}"
	out, err := render(src, map[string]Value{"d": Int(DefaultDepth - 1)}, Limits{})
	if err != nil || out.Text != "bottom" {
		t.Errorf("depth %d: %q, %v; want bottom", DefaultDepth, out.Text, err)
	}
	_, err = render(src, map[string]Value{"d": Int(DefaultDepth)}, Limits{})
	var be *BudgetError
	if !errors.As(err, &be) || be.Budget != BudgetDepth {
		t.Errorf("depth %d: %v, want a depth budget error", DefaultDepth+1, err)
	}
}

func TestParseLimits(t *testing.T) {
	for name, src := range map[string]string{
		"source size":        strings.Repeat("x", sourceBytesMax+1),
		"nested parentheses": "{{ " + strings.Repeat("(", 300) + "1" + strings.Repeat(")", 300) + " }}",
		"nested ifs":         strings.Repeat("{% if true %}", 200) + strings.Repeat("{% endif %}", 200),
		"nested not":         "{{ " + strings.Repeat("not ", 300) + "1 }}",
		"nested unary":       "{{ " + strings.Repeat("-", 300) + "1 }}",
		"nested lists":       "{{ " + strings.Repeat("[", 300) + strings.Repeat("]", 300) + " }}",
		// Chains nest the tree as deep as parentheses do, and the
		// evaluator recurses on them: a call at the bottom of a long chain
		// inside a recursive macro would otherwise take the Go stack
		// depth times chain length deep.
		"filter chain":    "{{ x" + strings.Repeat(" | e", 300) + " }}",
		"plus chain":      "{{ 1" + strings.Repeat(" + 1", 300) + " }}",
		"attribute chain": "{{ x" + strings.Repeat(".a", 300) + " }}",
		"call chain":      "{{ x" + strings.Repeat("()", 300) + " }}",
		"or chain":        "{{ x" + strings.Repeat(" or x", 300) + " }}",
		"conditional":     "{{ x" + strings.Repeat(" if x", 300) + " }}",
	} {
		_, err := Parse(src)
		var je *Error
		if !errors.As(err, &je) || je.Kind != ErrSyntax {
			t.Errorf("%s: Parse error %v, want a syntax error", name, err)
		}
	}
}

// TestChainsWithinLimits checks that chains as long as templates write
// them still parse.
func TestChainsWithinLimits(t *testing.T) {
	for name, src := range map[string]string{
		"filter chain":  "{{ x" + strings.Repeat(" | trim", 60) + " }}",
		"plus chain":    "{{ 'a'" + strings.Repeat(" + 'a'", 100) + " }}",
		"tilde chain":   "{{ 'a'" + strings.Repeat(" ~ 'a'", 500) + " }}",
		"compare chain": "{{ 1" + strings.Repeat(" < 2", 200) + " }}",
	} {
		if _, err := Parse(src); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestPythonFloat(t *testing.T) {
	for f, want := range map[float64]string{1: "1.0", 0.5: "0.5", 1e-7: "1e-07", 1e21: "1e+21", 123456789: "123456789.0",
		1e16: "1e+16", 1e15: "1000000000000000.0", 1e-4: "0.0001", 1.5e-5: "1.5e-05", -0.25: "-0.25", 1.5e300: "1.5e+300"} {
		if got := pythonFloat(f); got != want {
			t.Errorf("pythonFloat(%v) = %q, want %q", f, got, want)
		}
	}
}

func TestStrftime(t *testing.T) {
	tm := time.Date(2026, 3, 7, 15, 4, 5, 0, time.UTC)
	if got, want := strftime(tm, "%d %b %Y|%A %a %B %m %H:%M:%S %I%p %j %y %e %% %Q %-d %-m"), "07 Mar 2026|Saturday Sat March 03 15:04:05 03PM 066 26  7 % %Q 7 3"; got != want {
		t.Errorf("strftime = %q, want %q", got, want)
	}
}
