package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tandem/internal/engine/tensor"
	"tandem/internal/modelhub/hubtest"
	"tandem/internal/synth"
)

// TestPullModelsAndModelRef: `--model hf.co/...` pulls a synthesized model
// from a fake hub on first use and generates what the local file does;
// `tandem pull` of the same content downloads nothing; `tandem models` lists
// both references; a cached reference asks the hub nothing.
func TestPullModelsAndModelRef(t *testing.T) {
	local := filepath.Join(t.TempDir(), "tiny.gguf")
	cfg, _ := synth.Preset("tiny")
	if err := synth.Write(local, synth.Options{Config: cfg, Type: tensor.Q8_0, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(local)
	if err != nil {
		t.Fatal(err)
	}
	s := hubtest.New(t)
	s.AddFile("org/tiny-GGUF", "tiny-Q8_0.gguf", data)
	s.AddName("org/tiny-GGUF", "README.md")
	home := t.TempDir()
	t.Setenv("TANDEM_HOME", home)
	t.Setenv("HF_ENDPOINT", s.Hub.URL)
	t.Setenv("HF_TOKEN", "")

	gen := func(m string) string {
		return run(t, "generate", "--model", m, "--prompt", "hello world", "--temperature", "0", "--max-tokens", "6", "--threads", "1", "--format", "json")
	}
	want := gen(local)
	if got := gen("hf.co/org/tiny-GGUF"); got != want {
		t.Fatalf("generate with the hub reference:\n%s\nwith the local file:\n%s", got, want)
	}
	if st := s.Stats(); st.CDNRequests != 1 {
		t.Fatalf("first use made %d CDN requests, want 1", st.CDNRequests)
	}
	out := run(t, "pull", "hf.co/org/tiny-GGUF:q8_0")
	if !strings.Contains(out, "pulled hf.co/org/tiny-GGUF:Q8_0") || !strings.Contains(out, "tiny-Q8_0.gguf") {
		t.Fatalf("pull output:\n%s", out)
	}
	before := s.Stats()
	if before.CDNRequests != 1 {
		t.Fatalf("pulling cached content made %d more CDN requests", before.CDNRequests-1)
	}
	if got := gen("hf.co/org/tiny-GGUF:Q8_0"); got != want {
		t.Fatalf("generate with the pulled reference differs:\n%s", got)
	}
	if after := s.Stats(); after.HubRequests != before.HubRequests || after.CDNRequests != before.CDNRequests {
		t.Fatalf("a cached --model reference made %d hub and %d CDN requests", after.HubRequests-before.HubRequests, after.CDNRequests-before.CDNRequests)
	}

	list := run(t, "models")
	lines := strings.Split(strings.TrimSpace(list), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "REFERENCE") ||
		!strings.HasPrefix(lines[1], "hf.co/org/tiny-GGUF ") || !strings.HasPrefix(lines[2], "hf.co/org/tiny-GGUF:Q8_0 ") {
		t.Fatalf("tandem models:\n%s", list)
	}
	var rows []struct {
		Reference, File, SHA256, Path string
		Size                          int64
	}
	if err := json.Unmarshal([]byte(run(t, "models", "--format", "json")), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].SHA256 != rows[1].SHA256 || rows[0].Size != int64(len(data)) || !strings.Contains(list, rows[0].SHA256[:12]) {
		t.Fatalf("tandem models --format json: %+v", rows)
	}
	if !strings.HasPrefix(rows[0].Path, filepath.Join(home, "blobs", "sha256-")) {
		t.Fatalf("blob path %s is not under %s/blobs", rows[0].Path, home)
	}
}

// TestPullErrorNamesFix: a failing pull exits with the hub's advice.
func TestPullErrorNamesFix(t *testing.T) {
	s := hubtest.New(t)
	t.Setenv("TANDEM_HOME", t.TempDir())
	t.Setenv("HF_ENDPOINT", s.Hub.URL)
	root := newRoot()
	root.SetArgs([]string{"pull", "hf.co/org/nothing"})
	root.SetOut(&strings.Builder{})
	root.SetErr(&strings.Builder{})
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), "HF_TOKEN") {
		t.Fatalf("pull of a missing repository: %v", err)
	}
	if out := run(t, "models"); !strings.Contains(out, "no models") {
		t.Fatalf("models with an empty cache: %s", out)
	}
}
