package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tandem/internal/engine/tensor"
	"tandem/internal/modelhub/hubtest"
	"tandem/internal/synth"
)

// tinyOnFakeHub writes the tiny synthesized model (Q8_0) to a temporary
// file, serves its bytes from a fake hub as org/tiny-GGUF/tiny-Q8_0.gguf,
// and points TANDEM_HOME (a new directory, returned) and HF_ENDPOINT at
// them, with no HF_TOKEN.
func tinyOnFakeHub(t *testing.T) (s *hubtest.Server, local string, data []byte, home string) {
	t.Helper()
	local = filepath.Join(t.TempDir(), "tiny.gguf")
	cfg, _ := synth.Preset("tiny")
	if err := synth.Write(local, synth.Options{Config: cfg, Type: tensor.Q8_0, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(local)
	if err != nil {
		t.Fatal(err)
	}
	s = hubtest.New(t)
	s.AddFile("org/tiny-GGUF", "tiny-Q8_0.gguf", data)
	home = t.TempDir()
	t.Setenv("TANDEM_HOME", home)
	t.Setenv("HF_ENDPOINT", s.Hub.URL)
	t.Setenv("HF_TOKEN", "")
	return s, local, data, home
}

// TestPullModelsAndModelRef: `--model hf.co/...` pulls a synthesized model
// from a fake hub on first use and generates what the local file does;
// `tandem pull` of the same content downloads nothing; `tandem models` lists
// both references; a cached reference asks the hub nothing.
func TestPullModelsAndModelRef(t *testing.T) {
	s, local, data, home := tinyOnFakeHub(t)
	s.AddName("org/tiny-GGUF", "README.md")

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

// TestPullAcrossTwoCuts: `tandem pull ORG/REPO` (the short form) completes a
// download the CDN cuts twice, in one invocation, resuming with Range each
// time, and the blob has the file's sha256. Then `model info` and `models
// rm` take the same short reference, and a path that exists wins over it.
func TestPullAcrossTwoCuts(t *testing.T) {
	s, _, data, home := tinyOnFakeHub(t)
	cfg, _ := synth.Preset("tiny")
	sum := sha256.Sum256(data)
	want := hex.EncodeToString(sum[:])
	t.Chdir(t.TempDir())
	third := int64(len(data) / 3)
	s.CutNext(third)
	s.CutNext(third)

	out := run(t, "pull", "org/tiny-GGUF")
	t.Logf("tandem pull org/tiny-GGUF (CDN cut at %d and %d more bytes of %d):\n%s", third, third, len(data), out)
	rg := s.Stats().Ranges
	if len(rg) != 3 || rg[0] != "" || rg[1] != fmt.Sprintf("bytes=%d-", third) || rg[2] != fmt.Sprintf("bytes=%d-", 2*third) {
		t.Fatalf("CDN Range headers %q: want none, then from each cut", rg)
	}
	if strings.Count(out, "download interrupted; resuming it") != 2 || !strings.Contains(out, "pulled hf.co/org/tiny-GGUF\n") || !strings.Contains(out, "sha256  "+want) {
		t.Fatalf("pull output:\n%s", out)
	}
	blob := filepath.Join(home, "blobs", "sha256-"+want)
	got, err := os.ReadFile(blob)
	if err != nil || sha256.Sum256(got) != sum {
		t.Fatalf("blob %s: %v, or its content is not the file's", blob, err)
	}

	var info struct {
		Path      string `json:"path"`
		Supported bool   `json:"supported"`
		Layers    int    `json:"layers"`
		Vocab     *struct {
			Tokens int `json:"tokens"`
		} `json:"vocabulary"`
	}
	if err := json.Unmarshal([]byte(runStdout(t, "model", "info", "org/tiny-GGUF", "--format", "json")), &info); err != nil {
		t.Fatal(err)
	}
	if info.Path != blob || !info.Supported || info.Layers != cfg.Layers || info.Vocab == nil || info.Vocab.Tokens == 0 {
		t.Fatalf("model info of the reference: %+v", info)
	}
	// A file of the same name here is the model instead.
	if err := os.MkdirAll("org", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("org/tiny-GGUF", data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(runStdout(t, "model", "info", "org/tiny-GGUF", "--format", "json")), &info); err != nil {
		t.Fatal(err)
	}
	if info.Path != "org/tiny-GGUF" {
		t.Fatalf("with a file org/tiny-GGUF here, model info read %s", info.Path)
	}
	if out := run(t, "models", "rm", "org/tiny-GGUF"); !strings.Contains(out, "removed hf.co/org/tiny-GGUF (") {
		t.Fatalf("models rm: %s", out)
	}
	if _, err := os.Stat(blob); err == nil {
		t.Fatal("models rm left the blob")
	}
	if out := run(t, "models"); !strings.Contains(out, "no models") {
		t.Fatalf("models after rm: %s", out)
	}
}

// runStdout runs tandem with args and returns its standard output alone.
func runStdout(t *testing.T, args ...string) string {
	t.Helper()
	root := newRoot()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("tandem %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}
