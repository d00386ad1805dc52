package chat

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"tandem/internal/api/openai"
)

// TestHarmonyConversationsFromOpenAI: the harmony conversations of the
// renderer's corpus, sent as an OpenAI client sends them (reasoning as
// reasoning_content, no "thinking"; developer instructions; tools and
// chat_template_kwargs as request members), render with gpt-oss's template
// through HarmonyMessagesJSON exactly as Jinja2 renders the corpus
// conversation (scripts/jinja-reference wrote the reference). Without the
// "thinking" member the reasoning of a call would be missing.
func TestHarmonyConversationsFromOpenAI(t *testing.T) {
	const corpus = "../../jinja/testdata/corpus/"
	var convs struct {
		Tools         map[string]json.RawMessage `json:"tools"`
		Conversations []struct {
			Name     string                     `json:"name"`
			Tools    string                     `json:"tools"`
			Kwargs   map[string]json.RawMessage `json:"kwargs"`
			Messages []map[string]any           `json:"messages"`
		} `json:"conversations"`
	}
	readJSON(t, corpus+"conversations.json", &convs)
	var refs []refCase
	readJSON(t, corpus+"python/gpt-oss.json", &refs)
	want := map[string]refCase{}
	for _, c := range refs {
		want[c.Name] = c
	}
	src, err := os.ReadFile(corpus + "templates/gpt-oss.jinja")
	if err != nil {
		t.Fatal(err)
	}
	ct, err := NewTemplate(string(src), "<|startoftext|>", "<|return|>")
	if err != nil {
		t.Fatal(err)
	}
	ct.now = func() time.Time { return refClock }
	n, needThinking := 0, 0
	for _, c := range convs.Conversations {
		if !strings.HasPrefix(c.Name, "harmony-") {
			continue
		}
		n++
		thinking := false
		for _, m := range c.Messages {
			if _, ok := m["thinking"]; ok {
				thinking = true
			}
			delete(m, "thinking") // an OpenAI client sends reasoning_content only
		}
		body := map[string]any{"messages": c.Messages}
		if c.Tools != "" {
			body["tools"] = convs.Tools[c.Tools]
		}
		if c.Kwargs != nil {
			body["chat_template_kwargs"] = c.Kwargs
		}
		data, _ := json.Marshal(body)
		req, e := openai.DecodeChatRequest(data)
		if e != nil {
			t.Fatalf("%s: %v", c.Name, e)
		}
		in := Input{Messages: HarmonyMessagesJSON(req.Messages), Tools: req.ToolsJSON, AddGenerationPrompt: true, Kwargs: req.ChatTemplateKwargs}
		got, err := ct.RenderInput(in)
		ref := want[c.Name]
		if err != nil || ref.Output == nil || got != *ref.Output {
			i := 0
			if ref.Output != nil {
				i = firstDiff(got, *ref.Output)
			}
			t.Errorf("%s: rendering differs from Jinja2's (err %v) at byte %d: got …%q…", c.Name, err, i, excerpt(got, i))
			continue
		}
		if thinking {
			in.Messages = MessagesJSON(req.Messages)
			if plain, _ := ct.RenderInput(in); plain != got {
				needThinking++
			}
		}
	}
	if needThinking == 0 {
		t.Error("no harmony conversation renders differently without the thinking member: none checks it")
	}
	if n < 3 {
		t.Fatalf("%d harmony conversations in the corpus, want at least 3", n)
	}
}
