package main

import (
	"os/exec"
	"strings"
	"testing"
)

// importRules are the dependency boundaries of the tree: what a package
// must not link, directly or through another. The HTTP edge (the router,
// the shared HTTP plumbing, the leg contract, tandem inspect) speaks the
// OpenAI wire format and must not pull in the engine (its grammar
// compiler and tokenizer among it); the wire package itself imports
// nothing of Tandem, so that anything may use it; chat templates render
// text and leave tokenizing it to the server.
var importRules = []struct {
	pkg    string
	forbid []string // import paths, each with everything under it; "tandem" forbids every Tandem package
}{
	{"tandem/internal/api/openai", []string{"tandem"}},
	{"tandem/internal/api/httpx", []string{"tandem/internal/engine"}},
	{"tandem/internal/api/leg", []string{"tandem/internal/engine"}},
	{"tandem/internal/router", []string{"tandem/internal/engine"}},
	{"tandem/internal/router/answer", []string{"tandem/internal/engine"}},
	{"tandem/internal/router/pool", []string{"tandem/internal/engine"}},
	{"tandem/internal/server/chat", []string{"tandem/internal/engine"}},
	{"tandem/internal/inspect", []string{"tandem/internal/engine"}},
}

// TestImportRules checks importRules against `go list -deps`: each
// package's whole dependency closure, not only its own imports.
func TestImportRules(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("find the go command to list dependencies: %v", err)
	}
	args := []string{"list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`}
	for _, r := range importRules {
		args = append(args, r.pkg)
	}
	out, err := exec.Command(goTool, args...).Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	deps := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		deps[f[0]] = f[1:]
	}
	for _, r := range importRules {
		ds, ok := deps[r.pkg]
		if !ok {
			t.Errorf("go list printed nothing for %s", r.pkg)
			continue
		}
		for _, d := range ds {
			for _, f := range r.forbid {
				if d == f || strings.HasPrefix(d, f+"/") {
					t.Errorf("%s depends on %s, which it must not (rule: nothing under %s); see `go list -deps %s`",
						r.pkg, d, f, r.pkg)
				}
			}
		}
	}
}
