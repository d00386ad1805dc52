package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"tandem/internal/engine/kernels"
	"tandem/internal/testenv"
)

// run executes the tandem command line args in-process and returns stdout.
func run(t *testing.T, args ...string) string {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("tandem %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// TestGenerateMatchesLlamaCpp: `tandem generate` on stories260K prints
// llama.cpp's greedy continuation. llama.cpp's 200 greedy tokens from BOS
// begin with the prompt's own tokens, so the ids after them are the
// continuation of "Once upon a time".
func TestGenerateMatchesLlamaCpp(t *testing.T) {
	model := testenv.Shared(t, "models/stories260K.gguf")
	b, err := os.ReadFile(testenv.Shared(t, "testdata/reference/stories260K.bos.greedy.ids.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var ref []int32
	for _, f := range strings.Fields(string(b)) {
		v, _ := strconv.Atoi(f)
		ref = append(ref, int32(v))
	}
	out := run(t, "generate", "--model", model, "--prompt", "Once upon a time", "--temperature", "0", "--max-tokens", "60", "--format", "json")
	var got struct {
		PromptIDs []int32 `json:"prompt_ids"`
		IDs       []int32 `json:"ids"`
		Text      string  `json:"text"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("json output %q: %v", out, err)
	}
	if !slices.Equal(got.PromptIDs, ref[:5]) {
		t.Fatalf("prompt_ids = %v, want BOS plus llama.cpp's tokens %v", got.PromptIDs, ref[:5])
	}
	if want := ref[5 : 5+60]; !slices.Equal(got.IDs, want) {
		t.Errorf("generated ids\n got %v\nwant %v", got.IDs, want)
	}
	if !strings.HasPrefix(got.Text, ", there was a little girl named Lily.") {
		t.Errorf("text = %q", got.Text)
	}
	text := run(t, "generate", "--model", model, "--prompt", "Once upon a time", "--temperature", "0", "--max-tokens", "60")
	if strings.TrimRight(text, "\n") != got.Text {
		t.Errorf("text format printed %q, json text is %q", text, got.Text)
	}
}

// TestSynthInfoGenerateBench runs the fixture commands end to end on a
// synthesized model (no shared data needed).
func TestSynthInfoGenerateBench(t *testing.T) {
	dir := t.TempDir()
	for _, typ := range []string{"f16", "q8_0", "q4_k", "q3_k_m", "q2_k", "iq4_xs", "iq4_nl", "mxfp4"} {
		p := filepath.Join(dir, typ+".gguf")
		run(t, "model", "synth", "--preset", "tiny", "--type", typ, "-o", p)
		info := run(t, "model", "info", p)
		for _, want := range []string{"architecture  llama", "layers        2", "heads         4 (kv 2, head dim 64)", "vocabulary    512 tokens"} {
			if !strings.Contains(info, want) {
				t.Errorf("model info of %s lacks %q:\n%s", typ, want, info)
			}
		}
		out := run(t, "generate", "--model", p, "--prompt", "hello world", "--temperature", "0.7", "--seed", "3", "--max-tokens", "8", "--format", "json")
		var g struct{ IDs []int32 }
		if err := json.Unmarshal([]byte(out), &g); err != nil || len(g.IDs) == 0 {
			t.Errorf("generate on %s: %q (%v)", typ, out, err)
		}
		again := run(t, "generate", "--model", p, "--prompt", "hello world", "--temperature", "0.7", "--seed", "3", "--max-tokens", "8", "--format", "json")
		if again != out {
			t.Errorf("same seed, different output on %s:\n%s\n%s", typ, out, again)
		}
		bench := run(t, "bench", "engine", "--model", p, "--prompt-tokens", "32", "--gen-tokens", "4", "--threads", "1", "--format", "json")
		type shares struct{ MatMul, Attention, Other float64 }
		var br struct {
			PrefillTokS   float64 `json:"prefill_tok_s"`
			DecodeTokS    float64 `json:"decode_tok_s"`
			PrefillShares shares  `json:"prefill_time_shares"`
			DecodeShares  shares  `json:"decode_time_shares"`
		}
		if err := json.Unmarshal([]byte(bench), &br); err != nil || br.PrefillTokS <= 0 || br.DecodeTokS <= 0 {
			t.Errorf("bench engine on %s: %q (%v)", typ, bench, err)
		}
		for _, sh := range []shares{br.PrefillShares, br.DecodeShares} {
			if sum := sh.MatMul + sh.Attention + sh.Other; sh.MatMul <= 0 || sh.Attention <= 0 || sum < 0.999 || sum > 1.001 {
				t.Errorf("bench engine on %s: time shares %+v must be positive for matmul and attention and sum to 1", typ, sh)
			}
		}
	}
}

// TestModelInfoVocabOnly: model info describes files Tandem cannot run
// (a vocabulary-only GPT-2 file) instead of failing.
func TestModelInfoVocabOnly(t *testing.T) {
	p := testenv.Shared(t, "testdata/tokenizer/ggml-vocab-gpt-2.gguf")
	out := run(t, "model", "info", p)
	for _, want := range []string{"architecture  gpt2 (tandem cannot run it", "vocabulary    50257 tokens, gpt2 tokenizer, pre-tokenizer gpt-2"} {
		if !strings.Contains(out, want) {
			t.Errorf("model info lacks %q:\n%s", want, out)
		}
	}
}

// TestKernelLevelFlag: --kernel-level picks the kernels a run uses (bench
// engine says which), and a level that does not exist is an error naming the
// choices.
func TestKernelLevelFlag(t *testing.T) {
	lvl := kernels.CurrentLevel()
	t.Cleanup(func() { kernels.SetLevel(lvl) })
	p := filepath.Join(t.TempDir(), "tiny.gguf")
	run(t, "model", "synth", "--preset", "tiny", "--type", "q8_0", "-o", p)
	out := run(t, "bench", "engine", "--model", p, "--prompt-tokens", "8", "--gen-tokens", "2", "--threads", "1", "--kernel-level", "generic", "--format", "json")
	var br struct{ Kernels string }
	if err := json.Unmarshal([]byte(out), &br); err != nil || br.Kernels != "generic" {
		t.Errorf("bench engine --kernel-level generic: kernels %q (%v) in %s", br.Kernels, err, out)
	}
	root := newRoot()
	var buf bytes.Buffer
	root.SetOut(&buf)
	root.SetErr(&buf)
	root.SetArgs([]string{"bench", "engine", "--model", p, "--kernel-level", "avx9"})
	err := root.ExecuteContext(context.Background())
	if err == nil || !strings.Contains(err.Error(), "want generic, avx2 or avx512") {
		t.Errorf("--kernel-level avx9: err = %v, want one naming the levels", err)
	}
}

// TestBenchMemory: `tandem bench memory` prints per-pass read rates in
// JSON and text, and refuses a buffer below the cache-proof minimum.
func TestBenchMemory(t *testing.T) {
	out := run(t, "bench", "memory", "--size", "64MiB", "--threads", "2", "--passes", "2", "--format", "json")
	var r struct {
		Bytes   int       `json:"bytes"`
		Threads int       `json:"threads"`
		Passes  []float64 `json:"pass_gb_s"`
		Median  float64   `json:"median_gb_s"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Bytes != 64<<20 || r.Threads != 2 || len(r.Passes) != 2 || r.Median <= 0 {
		t.Errorf("bench memory --format json: %q (%v)", out, err)
	}
	if out := run(t, "bench", "memory", "--size", "64MiB", "--passes", "1"); !strings.Contains(out, "1 threads, 0.06 GiB buffer: median") {
		t.Errorf("bench memory: %q", out)
	}
	if out, err := runErr("bench", "memory", "--size", "1MiB"); err == nil {
		t.Errorf("bench memory --size 1MiB: no error: %q", out)
	}
}

// TestMmapFlag: --mmap=false (the file read into memory) generates what
// the mapped file does.
func TestMmapFlag(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tiny.gguf")
	run(t, "model", "synth", "--preset", "tiny", "--arch", "qwen3moe", "--experts", "8", "--experts-used", "2", "--type", "q4_k_m", "-o", p)
	args := []string{"generate", "--model", p, "--prompt", "hello world", "--max-tokens", "8", "--threads", "1", "--format", "json"}
	mapped := run(t, args...)
	read := run(t, append(args, "--mmap=false")...)
	if mapped != read || !strings.Contains(mapped, `"ids"`) {
		t.Errorf("generate --mmap=false %s, mapped %s", read, mapped)
	}
}
