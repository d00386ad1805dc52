package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tandem/internal/engine/model"
)

// runErr executes the tandem command line args in-process and returns its
// error and output.
func runErr(args ...string) (string, error) {
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// TestSynthArchs: `tandem model synth --arch A` writes a file of each
// architecture that `model info` describes and `generate` runs.
func TestSynthArchs(t *testing.T) {
	dir := t.TempDir()
	for _, arch := range []string{"llama", "qwen2", "qwen3", "phi3", "gemma2", "gemma3", "gemma4", "qwen3moe", "qwen2moe", "gpt-oss"} {
		p := filepath.Join(dir, arch+".gguf")
		run(t, "model", "synth", "--preset", "tiny", "--type", "q8_0", "--arch", arch, "--sliding-window", "8", "-o", p)
		info := run(t, "model", "info", p)
		if !strings.Contains(info, "architecture  "+arch+"\n") {
			t.Errorf("model info of the %s file:\n%s", arch, info)
		}
		out := run(t, "generate", "--model", p, "--prompt", "hello world", "--temperature", "0", "--max-tokens", "12", "--format", "json")
		var g struct{ IDs []int32 }
		if err := json.Unmarshal([]byte(out), &g); err != nil || len(g.IDs) != 12 {
			t.Errorf("generate on %s: %q (%v)", arch, out, err)
		}
	}
	if info := run(t, "model", "info", filepath.Join(dir, "gpt-oss.gguf")); !strings.Contains(info, "yarn rope (factor 32, original context 2048") ||
		!strings.Contains(info, "attention sinks") || !strings.Contains(info, "sliding window 8 on 1 of 2 layers") ||
		!strings.Contains(info, "experts       8, 4 used per token, width 256, softmax over the chosen gating") {
		t.Errorf("model info of the gpt-oss file:\n%s", info)
	}
	if info := run(t, "model", "info", filepath.Join(dir, "gemma4.gguf")); !strings.Contains(info, "sliding window 8 on 1 of 2 layers") ||
		!strings.Contains(info, "windowed layers' head dim 32 (rope 32 dims), kv heads per layer [2 1]") {
		t.Errorf("model info of the gemma4 file:\n%s", info)
	}
	// the gemma4 presets: the E2B-like one and the 26B-A4B-like mixture of experts
	for _, preset := range []string{"g4e", "g4a4b"} {
		p := filepath.Join(dir, preset+".gguf")
		run(t, "model", "synth", "--preset", preset, "--type", "q8_0", "-o", p)
		info := run(t, "model", "info", p)
		want := "K/V kept by layers 0-2, shared by the last 3, per-layer embeddings of 64"
		if preset == "g4a4b" {
			want = "experts       16, 4 used per token, width 64, softmax gating, weights renormalized over the chosen"
		}
		if !strings.Contains(info, want) || !strings.Contains(info, "sliding window 16") {
			t.Errorf("model info of the %s file lacks %q:\n%s", preset, want, info)
		}
	}
	if out, err := runErr("model", "synth", "--arch", "mamba", "-o", filepath.Join(dir, "x.gguf")); err == nil ||
		!strings.Contains(err.Error(), `architecture "mamba" cannot be synthesized`) {
		t.Errorf("synth --arch mamba: %v\n%s", err, out)
	}
}

// TestUnsupportedArchEveryCommand: a file of an architecture Tandem does
// not run gets the same error, naming it and the supported list, from
// generate, serve and bench engine, and model info says so too.
func TestUnsupportedArchEveryCommand(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "gemma2.gguf")
	run(t, "model", "synth", "--preset", "tiny", "--type", "q8_0", "--arch", "gemma2", "-o", src)
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	// general.architecture is the first key, so its value is the first "gemma2".
	i := bytes.Index(b, []byte("gemma2"))
	copy(b[i:], "mamba9")
	bad := filepath.Join(dir, "mamba9.gguf")
	if err := os.WriteFile(bad, b, 0o644); err != nil {
		t.Fatal(err)
	}
	want := `model architecture "mamba9" is not supported (supported: ` + strings.Join(model.Architectures, ", ") + `)`
	for _, args := range [][]string{
		{"generate", "--model", bad, "--prompt", "hi"},
		{"serve", "--model", bad, "--port", "0"},
		{"bench", "engine", "--model", bad, "--prompt-tokens", "8", "--gen-tokens", "2"},
	} {
		out, err := runErr(args...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("tandem %s: %v\n%s", args[0], err, out)
		}
	}
	if info := run(t, "model", "info", bad); !strings.Contains(info, "tandem cannot run it: "+want) {
		t.Errorf("model info:\n%s", info)
	}
}

// TestModelInfoExperts: `model info` of a mixture-of-experts file shows
// its experts and what one token reads: here 2 layers of 201,344 dense
// parameters (attention, norms, a 16-expert router) and 4 of 16 experts of
// 3·256·256, one token_embd row of 256, output_norm and output: 2,107,136.
func TestModelInfoExperts(t *testing.T) {
	p := filepath.Join(t.TempDir(), "moe.gguf")
	run(t, "model", "synth", "--arch", "qwen3moe", "--experts", "16", "--experts-used", "4", "--type", "q4_k", "-o", p)
	info := run(t, "model", "info", p)
	for _, want := range []string{
		"experts       16, 4 used per token, width 256, softmax gating, weights renormalized over the chosen\n",
		"per token     2107136 active parameters",
	} {
		if !strings.Contains(info, want) {
			t.Errorf("model info lacks %q:\n%s", want, info)
		}
	}
}
