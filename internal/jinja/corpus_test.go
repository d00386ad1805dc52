package jinja

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The differential corpus: the chat templates of real model families
// (testdata/corpus/templates), each rendered over the conversations of
// testdata/corpus/conversations.json by Python's Jinja2 as transformers
// sets it up (python/) and by @huggingface/jinja (node/), both written by
// scripts/jinja-reference. The renderer must match Python byte for byte
// (or fail where it fails), and so @huggingface/jinja wherever the two
// references agree; where they disagree Python decides, and the cases are
// listed in testdata/corpus/differences.txt.

type corpusTemplate struct {
	File string `json:"file"`
	BOS  string `json:"bos_token"`
	EOS  string `json:"eos_token"`
}

type corpusConversation struct {
	Name                string                     `json:"name"`
	Messages            json.RawMessage            `json:"messages"`
	Tools               string                     `json:"tools"`
	AddGenerationPrompt *bool                      `json:"add_generation_prompt"`
	Kwargs              map[string]json.RawMessage `json:"kwargs"`
}

type corpusInputs struct {
	Tools         map[string]json.RawMessage `json:"tools"`
	Conversations []corpusConversation       `json:"conversations"`
}

func readCorpus(t testing.TB) ([]corpusTemplate, corpusInputs) {
	t.Helper()
	var tmpls []corpusTemplate
	readJSON(t, "testdata/corpus/templates.json", &tmpls)
	var in corpusInputs
	readJSON(t, "testdata/corpus/conversations.json", &in)
	return tmpls, in
}

// corpusVars are the variables transformers renders a conversation with:
// messages, tools (None when absent), documents (None),
// add_generation_prompt, bos_token, eos_token and the kwargs; client data
// is untrusted.
func corpusVars(t *testing.T, tm corpusTemplate, in corpusInputs, c corpusConversation) map[string]Value {
	t.Helper()
	vars := varsFrom(t, c.Kwargs)
	msgs, err := FromJSON(c.Messages, true)
	if err != nil {
		t.Fatal(err)
	}
	vars["messages"] = msgs
	vars["tools"] = None()
	if c.Tools != "" {
		if vars["tools"], err = FromJSON(in.Tools[c.Tools], true); err != nil {
			t.Fatal(err)
		}
	}
	vars["documents"] = None()
	vars["add_generation_prompt"] = Bool(c.AddGenerationPrompt == nil || *c.AddGenerationPrompt)
	vars["bos_token"] = Str(tm.BOS)
	vars["eos_token"] = Str(tm.EOS)
	return vars
}

func sameRef(a, b refCase) bool {
	if a.Output != nil || b.Output != nil {
		return a.Output != nil && b.Output != nil && *a.Output == *b.Output
	}
	return true
}

func TestCorpus(t *testing.T) {
	tmpls, in := readCorpus(t)
	var differ []string
	total, errs := 0, 0
	var most usage
	var mostOutput int
	for _, tm := range tmpls {
		name := strings.TrimSuffix(tm.File, ".jinja")
		src, err := os.ReadFile(filepath.Join("testdata/corpus/templates", tm.File))
		if err != nil {
			t.Fatal(err)
		}
		tmpl, err := Parse(string(src))
		if err != nil {
			t.Errorf("%s: Parse: %v", name, err)
			continue
		}
		var py, node []refCase
		readJSON(t, filepath.Join("testdata/corpus/python", name+".json"), &py)
		readJSON(t, filepath.Join("testdata/corpus/node", name+".json"), &node)
		if len(py) != len(in.Conversations) || len(node) != len(in.Conversations) {
			t.Fatalf("%s: the references have %d and %d cases, want %d: run scripts/jinja-reference", name, len(py), len(node), len(in.Conversations))
		}
		for i, c := range in.Conversations {
			want := py[i]
			if !sameRef(want, node[i]) {
				differ = append(differ, name+" "+c.Name)
			}
			out, err := tmpl.Render(t.Context(), corpusVars(t, tm, in, c), Options{Now: func() time.Time { return refClock }})
			total++
			switch {
			case want.Error != nil:
				errs++
				if msg := matchError(err, want); msg != "" {
					t.Errorf("%s/%s: got %q, %v: %s (Python: %s: %s)", name, c.Name, excerpt(out.Text, 0), err, msg, want.ErrorType, *want.Error)
				}
			case err != nil:
				t.Errorf("%s/%s: %v; Python renders %q", name, c.Name, err, excerpt(*want.Output, 0))
			case out.Text != *want.Output:
				i := firstDiff(out.Text, *want.Output)
				t.Errorf("%s/%s: differs from Python at byte %d: got …%q…, want …%q…", name, c.Name, i, excerpt(out.Text, i), excerpt(*want.Output, i))
			}
			most.steps, most.alloc = max(most.steps, out.used.steps), max(most.alloc, out.used.alloc)
			most.depth, mostOutput = max(most.depth, out.used.depth), max(mostOutput, len(out.Text))
		}
	}
	t.Logf("%d renderings over %d templates (%d errors in Python too); @huggingface/jinja differs from Python in %d", total, len(tmpls), errs, len(differ))
	t.Logf("most any rendering used: %d steps (budget %d), %d output bytes (%d), call depth %d (%d), %d bytes built (%d)",
		most.steps, DefaultSteps, mostOutput, DefaultOutputBytes, most.depth, DefaultDepth, most.alloc, DefaultAllocBytes)
	if most.steps*100 > DefaultSteps || int64(mostOutput)*100 > DefaultOutputBytes || most.depth*4 > DefaultDepth || most.alloc*100 > DefaultAllocBytes {
		t.Errorf("a real template came within two orders of magnitude (depth: a factor 4) of a default budget")
	}
	var listed []string
	data, err := os.ReadFile("testdata/corpus/differences.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && !strings.HasPrefix(line, "#") {
			listed = append(listed, f[0]+" "+f[1])
		}
	}
	slices.Sort(differ)
	slices.Sort(listed)
	if !slices.Equal(differ, listed) {
		t.Errorf("the cases where @huggingface/jinja and Python differ changed; update testdata/corpus/differences.txt:\nnow:    %q\nlisted: %q", differ, listed)
	}
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
	return s[max(0, i-60):min(len(s), i+60)]
}
