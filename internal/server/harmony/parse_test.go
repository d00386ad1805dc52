package harmony

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"tandem/internal/server/toolcall"
)

// The generation prompt of gpt-oss's chat template.
const genPrompt = "<|start|>user<|message|>Hi<|end|><|start|>assistant"

func ids() func() string {
	n := 0
	return func() string { n++; return fmt.Sprintf("call_%d", n) }
}

func TestParse(t *testing.T) {
	cases := []struct {
		name, prompt, out string
		want              Result
	}{
		{"reasoning then final", genPrompt,
			"<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Hello!<|return|>",
			Result{Reasoning: "Think.", Content: "Hello!"}},
		{"final only, stream ends without <|return|>", genPrompt,
			"<|channel|>final<|message|>Hello!", Result{Content: "Hello!"}},
		{"tool call, recipient after the channel", genPrompt,
			"<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>",
			Result{Reasoning: "Need weather.", Calls: []toolcall.Call{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}}},
		{"tool call, recipient in the role part", genPrompt,
			" to=functions.get_weather<|channel|>commentary json<|message|>{\"city\":\"Paris\"}<|call|>",
			Result{Calls: []toolcall.Call{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}}},
		{"two calls", genPrompt,
			"<|channel|>commentary to=functions.a<|message|>{}<|call|><|start|>assistant<|channel|>commentary to=functions.b<|message|>{\"x\":1}<|call|>",
			Result{Calls: []toolcall.Call{{ID: "call_1", Name: "a", Arguments: "{}"}, {ID: "call_2", Name: "b", Arguments: `{"x":1}`}}}},
		{"commentary preamble is content", genPrompt,
			"<|channel|>commentary<|message|>Let me check.<|end|>", Result{Content: "Let me check."}},
		{"prompt opened the final message", "<|start|>assistant<|channel|>final<|message|>",
			"Hello<|return|>", Result{Content: "Hello"}},
		{"no header at all", genPrompt, "Just text.", Result{Content: "Just text."}},
		{"no prompt", "", "plain", Result{Content: "plain"}},
		{"cut inside a header", genPrompt,
			"<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>fin", Result{Reasoning: "a"}},
		{"cut inside a call", genPrompt,
			"<|channel|>commentary to=functions.f<|constrain|>json<|message|>{\"a\":", Result{Calls: []toolcall.Call{{ID: "call_1", Name: "f", Arguments: `{"a":`}}}},
		{"a marker's text inside a body", genPrompt,
			"<|channel|>final<|message|>a<|message|>b <| c |> <|chan", Result{Content: "a<|message|>b <| c |> <|chan"}},
		{"unclosed reasoning", genPrompt, "<|channel|>analysis<|message|>hmm", Result{Reasoning: "hmm"}},
		{"header too long", genPrompt, "<|channel|>" + strings.Repeat("x", MaxHeader+10) + "<|message|>y",
			Result{Content: "<|channel|>" + strings.Repeat("x", MaxHeader+10) + "y"}},
		{"built-in tool", genPrompt, "<|channel|>analysis to=browser.search<|message|>{\"q\":1}<|call|>",
			Result{Calls: []toolcall.Call{{ID: "call_1", Name: "browser.search", Arguments: `{"q":1}`}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Parse(c.prompt, c.out, ids())
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("Parse(%q)\n got %+v\nwant %+v", c.out, got, c.want)
			}
			// Split at every byte: the same result.
			for i := range len(c.out) + 1 {
				p := NewParser(c.prompt, ids())
				got := Collect(p.Feed(c.out[:i]), p.Feed(c.out[i:]), p.Flush())
				if !reflect.DeepEqual(got, c.want) {
					t.Fatalf("split at %d: got %+v, want %+v", i, got, c.want)
				}
			}
		})
	}
}

func TestStreamDeltas(t *testing.T) {
	p := NewParser(genPrompt, ids())
	var ds []Delta
	for _, piece := range []string{"<|channel|>", "analysis", "<|message|>", "Th", "ink", "<|end|>", "<|start|>", "assistant",
		"<|channel|>", "commentary to=functions.get_weather <|constrain|>json", "<|message|>", `{"city"`, `:"Paris"}`, "<|call|>"} {
		ds = append(ds, p.Feed(piece))
	}
	ds = append(ds, p.Flush())
	// The call's id and name come as soon as its header is read, then its
	// arguments piece by piece.
	if d := ds[10]; len(d.Calls) != 1 || d.Calls[0].ID != "call_1" || d.Calls[0].Name != "get_weather" {
		t.Errorf("delta at the call's <|message|> = %+v, want the call's id and name", d)
	}
	if d := ds[11]; len(d.Calls) != 1 || d.Calls[0].Arguments != `{"city"` || d.Calls[0].ID != "" {
		t.Errorf("delta of the first arguments piece = %+v", d)
	}
	if d := ds[3]; d.Reasoning != "Th" {
		t.Errorf("delta of the first reasoning piece = %+v", d)
	}
	if p.Calls() != 1 {
		t.Errorf("Calls() = %d, want 1", p.Calls())
	}
}

func TestParseHeader(t *testing.T) {
	for h, want := range map[string]Header{
		"assistant<|channel|>analysis":                           {Role: "assistant", Channel: "analysis"},
		"assistant to=functions.f<|channel|>commentary json":     {Role: "assistant", Channel: "commentary", Recipient: "functions.f", Constrain: "json"},
		"<|channel|>commentary to=functions.f <|constrain|>json": {Channel: "commentary", Recipient: "functions.f", Constrain: "json"},
		"functions.f to=assistant<|channel|>commentary":          {Role: "functions.f", Channel: "commentary", Recipient: "assistant"},
		"": {},
	} {
		if got := ParseHeader(h); got != want {
			t.Errorf("ParseHeader(%q) = %+v, want %+v", h, got, want)
		}
	}
}

func TestDetect(t *testing.T) {
	if !Detect("{{- '<|start|>assistant<|channel|>final<|message|>' }}") {
		t.Error("a harmony template is not detected")
	}
	if Detect("{{ '<|im_start|>assistant' }}<think></think>") {
		t.Error("a ChatML template is detected as harmony")
	}
}

// FuzzParse: the parser never panics, and its result does not depend on
// where the text is split; every byte of body text reaches the result.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>final<|message|>b<|return|>",
		"<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>",
		"<|start|><|start|><|message|><|end|><|call|><|return|><|constrain|>x<|", "<|chan<|channel|>",
	} {
		f.Add(genPrompt, s, uint16(3))
		f.Add("", s, uint16(0))
	}
	f.Fuzz(func(t *testing.T, prompt, out string, cut uint16) {
		if len(out) > 1<<12 || len(prompt) > 1<<12 {
			return
		}
		want := Parse(prompt, out, ids())
		i := int(cut) % (len(out) + 1)
		p := NewParser(prompt, ids())
		got := Collect(p.Feed(out[:i]), p.Feed(out[i:]), p.Flush())
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("split at %d: %+v, whole %+v", i, got, want)
		}
		if n := len(want.Reasoning) + len(want.Content); n > len(out) {
			t.Fatalf("result has %d bytes of text from %d bytes of output", n, len(out))
		}
	})
}
