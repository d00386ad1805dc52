package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"tandem/internal/api/openai"
)

// toolConversation turns a reference conversation into a request body as
// an OpenAI client sends it: tool call arguments as JSON strings (the
// arguments' own key order kept).
func toolConversation(t *testing.T, msgs json.RawMessage, tools json.RawMessage) []byte {
	t.Helper()
	var list []map[string]json.RawMessage
	if err := json.Unmarshal(msgs, &list); err != nil {
		t.Fatal(err)
	}
	for _, m := range list {
		var calls []map[string]json.RawMessage
		if json.Unmarshal(m["tool_calls"], &calls) != nil {
			continue
		}
		for _, c := range calls {
			var fn map[string]json.RawMessage
			if err := json.Unmarshal(c["function"], &fn); err != nil {
				t.Fatal(err)
			}
			if args := fn["arguments"]; len(args) > 0 && args[0] == '{' {
				fn["arguments"], _ = json.Marshal(string(args))
			}
			c["function"], _ = json.Marshal(fn)
		}
		m["tool_calls"], _ = json.Marshal(calls)
	}
	body := map[string]any{"messages": list}
	if tools != nil {
		body["tools"] = tools
	}
	b, _ := json.Marshal(body)
	return b
}

// TestToolConversationsRender: the tool conversations of testdata
// (assistant tool calls, tool results, parallel calls), sent as an OpenAI
// client sends them (arguments as JSON strings), decode and render exactly
// as Hugging Face renders the conversation with arguments as objects (the
// golden renderings of @huggingface/jinja and Jinja2), with every template
// family: the arguments go back to the template as objects.
func TestToolConversationsRender(t *testing.T) {
	fams, convs, tools := refInputs(t)
	checked := 0
	for _, c := range convs {
		switch c.Name {
		case "tool-call-result", "parallel-tool-calls", "tool-call-no-tools":
		default:
			continue
		}
		var toolsRaw json.RawMessage
		if c.Tools {
			toolsRaw = tools
		}
		req, e := openai.DecodeChatRequest(toolConversation(t, c.Messages, toolsRaw))
		if e != nil {
			t.Fatalf("%s: %v", c.Name, e)
		}
		for _, fam := range fams {
			src, err := os.ReadFile(filepath.Join("testdata", fam.Template))
			if err != nil {
				t.Fatal(err)
			}
			ct, err := NewTemplate(string(src), fam.BOS, fam.EOS)
			if err != nil {
				t.Fatal(err)
			}
			ct.now = func() time.Time { return refClock }
			var golden refRendering
			readJSON(t, filepath.Join("testdata/golden-python", fam.Family+".json"), &golden)
			var want *refCase
			for i := range golden.Cases {
				if golden.Cases[i].Name == c.Name {
					want = &golden.Cases[i]
				}
			}
			if want == nil {
				t.Fatalf("%s/%s: no golden case", fam.Family, c.Name)
			}
			got, err := ct.RenderInput(Input{Messages: MessagesJSON(req.Messages), Tools: req.ToolsJSON, AddGenerationPrompt: true})
			switch {
			case want.Error != nil:
				if err == nil {
					t.Errorf("%s/%s: rendered, want the reference's error %q", fam.Family, c.Name, *want.Error)
				}
			case err != nil:
				t.Errorf("%s/%s: %v", fam.Family, c.Name, err)
			case got != *want.Output:
				i := firstDiff(got, *want.Output)
				t.Errorf("%s/%s: differs at byte %d: got …%q…, want …%q…", fam.Family, c.Name, i, excerpt(got, i), excerpt(*want.Output, i))
			default:
				checked++
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d renderings compared", checked)
	}
	t.Logf("%d tool-conversation renderings identical to transformers'", checked)
}
