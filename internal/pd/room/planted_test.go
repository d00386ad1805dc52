package room

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlantedDropEarlyAbort shows what the planted bug changes, and only
// that: with it an ABORT for a room prefill does not know is dropped
// (rejected, no tombstone), so the router's later request creates a live
// room that waits for a HELLO; without it the same request is answered at
// once. ABORT for a live room and FAILED for an unknown one behave the same
// either way.
func TestPlantedDropEarlyAbort(t *testing.T) {
	id, live, failed := scenarioID(1), scenarioID(2), scenarioID(3)
	tests := []struct {
		planted       PlantedBug
		abortOutcome  Outcome
		requestResult Outcome
		wantState     State
	}{
		{PlantedNone, OutcomeParked, OutcomeAnswered, StateFailed},
		{PlantedDropEarlyAbort, OutcomeRejected, OutcomeApplied, StateBootstrapping},
	}
	for _, tt := range tests {
		cfg := defaultConfig(RolePrefill)
		cfg.Planted = tt.planted
		m, err := New(cfg)
		if err != nil {
			t.Fatalf("New(planted %v): %v", tt.planted, err)
		}
		if o := m.Step(1e6, Event{Kind: EventAbort, Room: id, Peer: testDecodePeer, Reason: ReasonClientAbort}); o != tt.abortOutcome {
			t.Errorf("planted %v: Step(abort for an unknown room) = %v, want %v", tt.planted, o, tt.abortOutcome)
		}
		if o := m.Step(2e6, Event{Kind: EventRequest, Room: id, RequestID: "r"}); o != tt.requestResult {
			t.Errorf("planted %v: Step(request after the abort) = %v, want %v", tt.planted, o, tt.requestResult)
		}
		if s, _, _ := m.State(id); s != tt.wantState {
			t.Errorf("planted %v: room after abort then request is %v, want %v", tt.planted, s, tt.wantState)
		}
		// Unchanged by the planted bug: ABORT for a live room, FAILED for
		// an unknown room.
		m.Step(3e6, Event{Kind: EventRequest, Room: live, RequestID: "r2"})
		if o := m.Step(4e6, Event{Kind: EventAbort, Room: live, Peer: testDecodePeer}); o != OutcomeApplied {
			t.Errorf("planted %v: Step(abort for a live room) = %v, want applied", tt.planted, o)
		}
		if o := m.Step(5e6, Event{Kind: EventFailed, Room: failed, Peer: testDecodePeer}); o != OutcomeParked {
			t.Errorf("planted %v: Step(failed for an unknown room) = %v, want parked", tt.planted, o)
		}
	}
}

func TestPlantedBugString(t *testing.T) {
	tests := []struct {
		p    PlantedBug
		want string
	}{{PlantedNone, "none"}, {PlantedDropEarlyAbort, "drop_early_abort"}, {PlantedIgnoreState, "ignore_state"}, {plantedCount, "planted(3)"}}
	for _, tt := range tests {
		if got := tt.p.String(); got != tt.want {
			t.Errorf("PlantedBug(%d).String() = %q, want %q", tt.p, got, tt.want)
		}
	}
	cfg := defaultConfig(RolePrefill)
	cfg.Planted = plantedCount
	if _, err := New(cfg); err == nil {
		t.Errorf("New(Planted %v) = nil error, want an error for an unknown planted bug", cfg.Planted)
	}
}

// TestPlantedOnlyInTests parses the module's non-test Go files: outside
// this package none may name a planted bug or the Planted field, and inside
// it none may set the field (New and the prefill role only read it). So no
// flag, environment variable or configuration file can plant a bug.
func TestPlantedOnlyInTests(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root %s: %v", root, err)
	}
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "testdata", "vendor", "node_modules", ".git":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		checked++
		abs, err := filepath.Abs(filepath.Dir(path))
		if err != nil {
			return err
		}
		for _, problem := range plantedUses(t, path, abs == here) {
			t.Errorf("%s: %s; planted bugs are for tests only", path, problem)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	if checked < 20 {
		t.Errorf("checked %d non-test Go files; the walk did not find the module", checked)
	}
}

// plantedUses returns what a non-test file does with planted bugs that it
// must not: outside package room, naming any Planted identifier; inside,
// setting Config.Planted. A file that does not parse is searched as text.
func plantedUses(t *testing.T, path string, inRoom bool) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		b, rerr := os.ReadFile(path)
		if rerr != nil {
			t.Fatalf("read %s: %v", path, rerr)
		}
		if !inRoom && strings.Contains(string(b), "Planted") {
			return []string{"names Planted (in a file that does not parse)"}
		}
		return nil
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Ident:
			if !inRoom && strings.HasPrefix(n.Name, "Planted") {
				out = append(out, "names "+n.Name)
			}
		case *ast.KeyValueExpr:
			if k, ok := n.Key.(*ast.Ident); ok && inRoom && k.Name == "Planted" {
				out = append(out, "sets Planted in a composite literal")
			}
		case *ast.AssignStmt:
			for _, lhs := range n.Lhs {
				if sel, ok := lhs.(*ast.SelectorExpr); ok && inRoom && sel.Sel.Name == "Planted" {
					out = append(out, "assigns Planted")
				}
			}
		}
		return true
	})
	return out
}
