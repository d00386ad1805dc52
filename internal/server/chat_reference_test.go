package server

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The chat template reference test: testdata/chat/render.mjs renders the
// conversations of testdata/chat/conversations.json with every template of
// testdata/chat/families.json using @huggingface/jinja, and Tandem must
// render each byte for byte the same (or fail where the reference fails).
// The files in testdata/chat/golden are that script's output, so the test
// compares even where Node is absent; with Node and the npm packages
// (TANDEM_NPM_DIR, default /tmp/tandem-npm) it also runs the script now.

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

// refInputs loads the families and conversations of testdata/chat.
func refInputs(t *testing.T) ([]refFamily, []refConversation, json.RawMessage) {
	var fams []refFamily
	readJSON(t, "testdata/chat/families.json", &fams)
	var convs struct {
		Tools         json.RawMessage   `json:"tools"`
		Conversations []refConversation `json:"conversations"`
	}
	readJSON(t, "testdata/chat/conversations.json", &convs)
	return fams, convs.Conversations, convs.Tools
}

// nodeReference runs render.mjs into a temporary folder and returns it, or
// "" (with the reason logged) when Node or the packages are missing.
func nodeReference(t *testing.T) string {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Logf("node not found: comparing with the golden files only")
		return ""
	}
	dir := os.Getenv("TANDEM_NPM_DIR")
	if dir == "" {
		dir = "/tmp/tandem-npm"
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@huggingface", "jinja")); err != nil {
		t.Logf("@huggingface/jinja not installed in %s (set TANDEM_NPM_DIR; see testdata/chat/README.md): comparing with the golden files only", dir)
		return ""
	}
	out := t.TempDir()
	cmd := exec.Command(node, "testdata/chat/render.mjs", out)
	cmd.Env = append(os.Environ(), "TANDEM_NPM_DIR="+dir)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("node render.mjs: %v\n%s", err, msg)
	}
	return out
}

// TestChatTemplateReference renders every conversation with every template
// family and compares with @huggingface/jinja's renderings: the golden files
// always, and a fresh run of render.mjs when Node and the packages are there.
func TestChatTemplateReference(t *testing.T) {
	fams, convs, tools := refInputs(t)
	live := nodeReference(t)
	total := 0
	for _, fam := range fams {
		src, err := os.ReadFile(filepath.Join("testdata/chat", fam.Template))
		if err != nil {
			t.Fatalf("read template: %v", err)
		}
		ct, err := NewChatTemplate(string(src), fam.BOS, fam.EOS)
		if err != nil {
			t.Errorf("%s: NewChatTemplate: %v", fam.Family, err)
			continue
		}
		ct.now = func() time.Time { return refClock }
		refs := map[string]string{"golden": filepath.Join("testdata/chat/golden", fam.Family+".json")}
		if live != "" {
			refs["node"] = filepath.Join(live, fam.Family+".json")
		}
		for refName, path := range refs {
			var ref refRendering
			readJSON(t, path, &ref)
			if len(ref.Cases) != len(convs) {
				t.Errorf("%s (%s): %d cases, want %d: regenerate the golden files", fam.Family, refName, len(ref.Cases), len(convs))
				continue
			}
			same := 0
			for i, c := range convs {
				want := ref.Cases[i]
				in := ChatInput{Messages: c.Messages, AddGenerationPrompt: c.AddGenerationPrompt == nil || *c.AddGenerationPrompt, Kwargs: c.Kwargs}
				if c.Tools {
					in.Tools = tools
				}
				got, err := ct.RenderInput(in)
				switch {
				case want.Error != nil && err == nil:
					t.Errorf("%s/%s (%s): rendered %q, want the error %q", fam.Family, c.Name, refName, got, *want.Error)
				case want.Error != nil && !strings.Contains(err.Error(), *want.Error):
					t.Errorf("%s/%s (%s): error %q, want it to contain %q", fam.Family, c.Name, refName, err, *want.Error)
				case want.Output != nil && err != nil:
					t.Errorf("%s/%s (%s): error %v, want %q", fam.Family, c.Name, refName, err, *want.Output)
				case want.Output != nil && got != *want.Output:
					i := firstDiff(got, *want.Output)
					t.Errorf("%s/%s (%s): rendering differs at byte %d: got …%q…, want …%q…", fam.Family, c.Name, refName, i,
						excerpt(got, i), excerpt(*want.Output, i))
				default:
					same++
				}
			}
			total += same
			t.Logf("%s (%s): %d of %d conversations identical", fam.Family, refName, same, len(convs))
		}
	}
	t.Logf("%d renderings identical", total)
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
