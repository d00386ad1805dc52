package grammar

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// propsSchema is an object schema with n optional string properties.
func propsSchema(n int) []byte {
	var sb strings.Builder
	sb.WriteString(`{"type":"object","properties":{`)
	for i := range n {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `"property_%05d":{"type":"string","description":"the property number %d"}`, i, i)
	}
	sb.WriteString(`}}`)
	return []byte(sb.String())
}

// TestCompileMemoryBudget: the 10,000-property schema of the red-team
// finding 2 (2026-12-03) fails with ErrTooLarge having allocated a small
// part of what it took before (about 850 MB: each property's chain copied
// the rest of the list); a compile budget of 1 MiB refuses a schema the
// default budget compiles, naming the budget.
func TestCompileMemoryBudget(t *testing.T) {
	schema := propsSchema(10000)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Compile(schema, Options{})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("%d-byte schema of 10,000 properties: %v, want ErrTooLarge", len(schema), err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 200<<20 {
		t.Errorf("the refused compile allocated %d MB, want under 200", alloc>>20)
	}
	small := propsSchema(60)
	if _, err := Compile(small, Options{}); err != nil {
		t.Fatalf("60 properties: %v", err)
	}
	_, err = Compile(small, Options{MaxCompileBytes: 1 << 20})
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "compile budget") {
		t.Errorf("60 properties within 1 MiB: %v, want ErrTooLarge naming the compile budget", err)
	}
	for name, compile := range map[string]func(Options) error{
		"gbnf":  func(o Options) error { _, err := CompileGBNF(gbnfJSON, o); return err },
		"regex": func(o Options) error { _, err := CompileRegex(`(a|b)*a(a|b){10}`, o); return err },
		"parts": func(o Options) error { _, err := CompileParts(Seq(Lit("x"), Schema(small)), o); return err },
	} {
		if err := compile(Options{MaxCompileBytes: 64 << 10}); !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s within 64 KiB: %v, want ErrTooLarge", name, err)
		}
	}
}

// TestCompileCancelled: a compilation under a done context stops with its
// error, at once when it was done before, and soon when it is cancelled
// during a long subset construction; the compiled grammar does not keep
// the context.
func TestCompileCancelled(t *testing.T) {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	o := Options{}.WithContext(done)
	for name, err := range map[string]error{
		"schema":     second(Compile([]byte(`{"type":"integer"}`), o)),
		"any object": second(CompileAnyObject(o)),
		"regex":      second(CompileRegex(`a+`, o)),
		"choice":     second(CompileChoice([]string{"a", "b"}, o)),
		"gbnf":       second(CompileGBNF(`root ::= "a"`, o)),
		"parts":      second(CompileParts(Seq(Lit("a"), Schema([]byte(`true`))), o)),
	} {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s under a cancelled context: %v", name, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	start := time.Now()
	_, err := CompileRegex(`(a|b)*a(a|b){15}`, Options{}.WithContext(ctx))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("a 65536-state regex cancelled after 20ms: %v (after %v)", err, time.Since(start))
	}
	g, err := CompileRegex(`a+`, Options{}.WithContext(context.Background()))
	if err != nil || g.opts.ctx != nil {
		t.Errorf("compiled grammar: %v, context kept %v", err, g.opts.ctx)
	}
}

func second[T any](_ T, err error) error { return err }

// TestPartsBlameLargest: when the grammar of several parts is too large
// as a whole, the error is a *PartError naming the schema part whose
// automaton is the largest, though each part compiles alone.
func TestPartsBlameLargest(t *testing.T) {
	pat := func(n int) []byte {
		return fmt.Appendf(nil, `{"type":"string","pattern":"^(a|b)*a(a|b){%d}$"}`, n)
	}
	big := Schema(pat(15)) // 65536 states; the others 32768 each
	_, err := CompileParts(Alt(Seq(Lit("1"), Schema(pat(14))), Seq(Lit("2"), big), Seq(Lit("3"), Schema(pat(14))), Seq(Lit("4"), Schema(pat(14)))), Options{})
	var pe *PartError
	if !errors.As(err, &pe) || !errors.Is(err, ErrTooLarge) {
		t.Fatalf("three large parts: %v, want a *PartError wrapping ErrTooLarge", err)
	}
	if pe.Part != big || pe.Index != 7 || !strings.Contains(err.Error(), "schema part 7 takes the most of it") {
		t.Errorf("blamed part %d (%v): %v, want the largest, part 7", pe.Index, pe.Part == big, err)
	}
	_, err = CompileParts(Seq(Lit("x"), Schema([]byte(`{"not":{}}`))), Options{})
	if !errors.As(err, &pe) || pe.Index != 3 || !errors.Is(err, ErrUnsupported) {
		t.Errorf("unsupported keyword in part 3: %v", err)
	}
}
