package jinjacmp

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"tandem/internal/jinja/jinjacmp/oldchat"
	"tandem/internal/server/chat"
)

var clock = func() time.Time { return time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC) }

// A typical chat request: a system prompt and three turns; with tools, two
// tools and a tool call with its result.
const (
	multiTurn = `[{"role":"system","content":"You are a helpful assistant. Answer briefly."},{"role":"user","content":"What is the capital of France?"},` +
		`{"role":"assistant","content":"The capital of France is Paris."},{"role":"user","content":"And of Italy? Tell me one fact about it too."}]`
	toolTurns = `[{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function",` +
		`"function":{"name":"get_weather","arguments":{"city":"Paris","days":2}}}]},{"role":"tool","tool_call_id":"call_1","content":"{\"temp\": 21.5}"},` +
		`{"role":"assistant","content":"It is 21.5 °C."},{"role":"user","content":"Thanks! And Rome?"}]`
	tools = `[{"type":"function","function":{"name":"get_weather","description":"Get the current weather in a city.","parameters":{"type":"object",` +
		`"properties":{"city":{"type":"string","description":"City name"},"unit":{"type":"string","enum":["celsius","fahrenheit"]},` +
		`"days":{"type":"integer","default":3}},"required":["city"]}}},{"type":"function","function":{"name":"search","description":"Search the web.",` +
		`"parameters":{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}}}]`
)

type benchCase struct {
	name, template, bos, eos, messages, tools string
}

var cases = []benchCase{
	{"qwen3", "qwen3.jinja", "", "<|im_end|>", multiTurn, ""},
	{"qwen3-tools", "qwen3.jinja", "", "<|im_end|>", toolTurns, tools},
	{"llama3.2", "llama3.2.jinja", "<|begin_of_text|>", "<|eot_id|>", multiTurn, ""},
	{"llama3.2-tools", "llama3.2.jinja", "<|begin_of_text|>", "<|eot_id|>", toolTurns, tools},
	{"gemma3", "gemma3.jinja", "<bos>", "<end_of_turn>", multiTurn, ""},
}

func source(b *testing.B, name string) string {
	src, err := os.ReadFile(filepath.Join("..", "..", "server", "chat", "testdata", "templates", name))
	if err != nil {
		b.Fatal(err)
	}
	return string(src)
}

// BenchmarkRender renders each case per iteration from the request's JSON
// (decoding included), with each renderer.
func BenchmarkRender(b *testing.B) {
	for _, c := range cases {
		src := source(b, c.template)
		b.Run(c.name+"/tandem", func(b *testing.B) {
			t, err := chat.NewTemplate(src, c.bos, c.eos)
			if err != nil {
				b.Fatal(err)
			}
			t = t.WithClock(clock)
			in := chat.Input{Messages: json.RawMessage(c.messages), Tools: json.RawMessage(c.tools), AddGenerationPrompt: true}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := t.RenderInput(in); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/ardanlabs", func(b *testing.B) {
			t, err := oldchat.NewTemplate(src, c.bos, c.eos)
			if err != nil {
				b.Fatal(err)
			}
			t = t.WithClock(clock)
			in := oldchat.Input{Messages: json.RawMessage(c.messages), Tools: json.RawMessage(c.tools), AddGenerationPrompt: true}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := t.RenderInput(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestSameOutput checks that the pair renders the same text (where the old
// renderer was right), so that the benchmark compares like with like.
func TestSameOutput(t *testing.T) {
	for _, c := range cases {
		src, err := os.ReadFile(filepath.Join("..", "..", "server", "chat", "testdata", "templates", c.template))
		if err != nil {
			t.Fatal(err)
		}
		nt, err := chat.NewTemplate(string(src), c.bos, c.eos)
		if err != nil {
			t.Fatal(err)
		}
		ot, err := oldchat.NewTemplate(string(src), c.bos, c.eos)
		if err != nil {
			t.Fatal(err)
		}
		got, err1 := nt.WithClock(clock).RenderInput(chat.Input{Messages: json.RawMessage(c.messages), Tools: json.RawMessage(c.tools), AddGenerationPrompt: true})
		want, err2 := ot.WithClock(clock).RenderInput(oldchat.Input{Messages: json.RawMessage(c.messages), Tools: json.RawMessage(c.tools), AddGenerationPrompt: true})
		if err1 != nil || err2 != nil || got != want {
			t.Errorf("%s: tandem %q, %v\nardanlabs %q, %v", c.name, got, err1, want, err2)
		}
	}
}
