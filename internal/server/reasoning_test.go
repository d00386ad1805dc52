package server

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"

	"tandem/internal/api/openai"
	"tandem/internal/engine"
	"tandem/internal/server/chat"
)

// TestThinkParserSplits checks the split of whole outputs, and that feeding
// the same output in pieces broken at every pair of positions gives the
// same reasoning and content.
func TestThinkParserSplits(t *testing.T) {
	tests := []struct {
		name, out          string
		open               bool
		reasoning, content string
	}{
		{"qwen3 shape", "<think>\nLet me add.\n</think>\n\nIt is 4.", false, "Let me add.", "It is 4."},
		{"no think", "It is 4.", false, "", "It is 4."},
		{"leading whitespace", "\n <think>r</think>c", false, "r", "c"},
		{"empty reasoning", "<think>\n\n</think>\n\nAnswer", false, "", "Answer"},
		{"unclosed", "<think>\nstill thinking\n", false, "still thinking", ""},
		{"prompt opened", "\nreasoning\n</think>\n\nanswer", true, "reasoning", "answer"},
		{"tag-like content", "<thanks> a lot", false, "", "<thanks> a lot"},
		{"think later is content", "Hi <think>x</think>", false, "", "Hi <think>x</think>"},
		{"partial close in reasoning", "<think>a </thin b\n\nc</think>d\ne", false, "a </thin b\n\nc", "d\ne"},
		{"prefix only", "<thi", false, "", "<thi"},
	}
	for _, tc := range tests {
		r, c := splitReasoning(tc.out, tc.open)
		if r != tc.reasoning || c != tc.content {
			t.Errorf("%s: split(%q) = %q, %q; want %q, %q", tc.name, tc.out, r, c, tc.reasoning, tc.content)
		}
		for i := 0; i <= len(tc.out); i++ {
			for j := i; j <= len(tc.out); j++ {
				p := newThinkParser(tc.open)
				var rs, cs strings.Builder
				for _, piece := range []string{tc.out[:i], tc.out[i:j], tc.out[j:]} {
					r, c := p.feed(piece)
					rs.WriteString(r)
					cs.WriteString(c)
				}
				r, c := p.flush()
				rs.WriteString(r)
				cs.WriteString(c)
				if rs.String() != tc.reasoning || cs.String() != tc.content {
					t.Fatalf("%s: pieces %q %q %q give %q, %q; want %q, %q", tc.name, tc.out[:i], tc.out[i:j], tc.out[j:],
						rs.String(), cs.String(), tc.reasoning, tc.content)
				}
			}
		}
	}
}

func TestReasoningSelection(t *testing.T) {
	qwen3, err := os.ReadFile("chat/testdata/templates/qwen3.jinja")
	if err != nil {
		t.Fatal(err)
	}
	thinks, _ := chat.NewTemplate(string(qwen3), "", "<|im_end|>")
	plain, _ := chat.NewTemplate(chatMLTemplate, "", "")
	for _, tc := range []struct {
		parser string
		tmpl   *chat.Template
		want   bool
	}{{"", thinks, true}, {"auto", thinks, true}, {"auto", plain, false}, {"none", thinks, false}, {"think", plain, true}} {
		got, err := reasoningEnabled(tc.parser, tc.tmpl)
		if err != nil || got != tc.want {
			t.Errorf("reasoningEnabled(%q, thinks=%v) = %v, %v; want %v", tc.parser, tc.tmpl == thinks, got, err, tc.want)
		}
	}
	if _, err := reasoningEnabled("deepseek", plain); err == nil {
		t.Errorf("reasoningEnabled(unknown) succeeded, want an error")
	}
	if !promptOpensThink("<|im_start|>assistant\n<think>\n") || promptOpensThink("<|im_start|>assistant\n<think>\n\n</think>\n\n") ||
		promptOpensThink("<|im_start|>assistant\n") {
		t.Errorf("promptOpensThink misjudges open and closed blocks")
	}
}

// thinkTokens is a fake output whose tags fall across token boundaries:
// "<think>\nplan\n</think>\n\nHi!" as "<", "th", ... pieces of the test
// vocabulary.
var thinkTokens = []string{"<", "t", "h", "i", "n", "k", ">", "<0x0A>", "p", "l", "a", "n", "<0x0A>", "<", "/", "t", "h", "i",
	"n", "k", ">", "<0x0A>", "<0x0A>", "H", "i", "!"}

// TestChatReasoning runs chat completions over a fake backend that emits a
// Qwen3-style thinking block token by token, streaming and not, with the
// reasoning parser on (auto, for a template that thinks) and off.
func TestChatReasoning(t *testing.T) {
	qwen3, err := os.ReadFile("chat/testdata/templates/qwen3.jinja")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		parser             string
		reasoning, content string
	}{{"auto", "plan", "Hi!"}, {"none", "", "<think>\nplan\n</think>\n\nHi!"}} {
		tok := testVocab(t, string(qwen3), true)
		b := newFake(t, tok, append(tokens(t, tok, 0, thinkTokens...), done(engine.FinishStop)))
		b.cfg.Context = 512
		s, _ := newTestServer(t, b, Options{ReasoningParser: tc.parser})

		rec := do(s.Handler(), "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}]}`)
		var r openai.ChatResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil || rec.Code != 200 || len(r.Choices) != 1 {
			t.Fatalf("%s: answer %d %s: %v", tc.parser, rec.Code, rec.Body, err)
		}
		m := r.Choices[0].Message
		if m.Content != tc.content || deref(m.ReasoningContent) != tc.reasoning || (tc.reasoning == "") != (m.ReasoningContent == nil) {
			t.Errorf("%s: message content %q reasoning %v, want %q and %q", tc.parser, m.Content, m.ReasoningContent, tc.content, tc.reasoning)
		}

		rec = do(s.Handler(), "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"stream":true}`)
		var reasoning, content strings.Builder
		for _, c := range chatChunks(t, rec) {
			for _, ch := range c.Choices {
				if ch.Delta.ReasoningContent != nil {
					if content.Len() > 0 {
						t.Errorf("%s: reasoning %q streamed after content %q", tc.parser, *ch.Delta.ReasoningContent, content.String())
					}
					reasoning.WriteString(*ch.Delta.ReasoningContent)
				}
				if ch.Delta.Content != nil {
					content.WriteString(*ch.Delta.Content)
				}
			}
		}
		if reasoning.String() != tc.reasoning || content.String() != tc.content {
			t.Errorf("%s: streamed reasoning %q content %q, want %q and %q", tc.parser, reasoning.String(), content.String(), tc.reasoning, tc.content)
		}
	}
}

// TestChatTemplateKwargs checks that chat_template_kwargs reach the
// template: Qwen3 with enable_thinking false closes an empty thinking
// block in the prompt.
func TestChatTemplateKwargs(t *testing.T) {
	qwen3, err := os.ReadFile("chat/testdata/templates/qwen3.jinja")
	if err != nil {
		t.Fatal(err)
	}
	tok := testVocab(t, string(qwen3), true)
	b := newFake(t, tok, append(tokens(t, tok, 0, "H", "i"), done(engine.FinishStop)))
	b.cfg.Context = 512
	s, _ := newTestServer(t, b, Options{})
	for i, tc := range []struct {
		kwargs, prompt string
	}{
		{``, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"},
		{`,"chat_template_kwargs":{"enable_thinking":false}`, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
		{`,"chat_template_kwargs":null`, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"},
	} {
		rec := do(s.Handler(), "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}]`+tc.kwargs+`}`)
		if rec.Code != 200 {
			t.Fatalf("kwargs %s: %d %s", tc.kwargs, rec.Code, rec.Body)
		}
		got := b.submitted()[i].req.Prompt
		if want := tok.Encode(tc.prompt, true, true); !slicesEqual(got, want) {
			t.Errorf("kwargs %s: prompt %q, want %q", tc.kwargs, tok.Decode(got), tc.prompt)
		}
	}
	rec := do(s.Handler(), "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"chat_template_kwargs":[1]}`)
	if rec.Code != 400 || !strings.Contains(rec.Body.String(), "chat_template_kwargs") {
		t.Errorf("chat_template_kwargs [1]: %d %s, want a 400 naming the parameter", rec.Code, rec.Body)
	}
}

// TestChatTemplateOverride checks Options.ChatTemplate (--chat-template)
// replaces the model's template.
func TestChatTemplateOverride(t *testing.T) {
	tok := testVocab(t, chatMLTemplate, true)
	b := newFake(t, tok, append(tokens(t, tok, 0, "H"), done(engine.FinishStop)))
	b.cfg.Context = 512
	s, _ := newTestServer(t, b, Options{ChatTemplate: "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}>"})
	if rec := do(s.Handler(), "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}]}`); rec.Code != 200 {
		t.Fatalf("chat: %d %s", rec.Code, rec.Body)
	}
	if got, want := b.submitted()[0].req.Prompt, tok.Encode("[user]Hi>", true, true); !slicesEqual(got, want) {
		t.Errorf("prompt %q, want %q", tok.Decode(got), "[user]Hi>")
	}
}

func slicesEqual(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestTemplateWithoutToolsSaysSo: a chat template that does not render
// tools is logged at load, and a chat answer whose request had tools
// carries a Warning header saying the model did not see them; a request
// without tools, or a template that renders them, carries none.
func TestTemplateWithoutToolsSaysSo(t *testing.T) {
	const tools = `,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]`
	for _, tc := range []struct {
		name, tmpl string
		drops      bool
	}{
		{"no tools section", "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}>", true},
		{"tools section", "{% if tools %}{{ tools | tojson }}{% endif %}{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}>", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := testVocab(t, chatMLTemplate, true)
			b := newFake(t, tok, append(tokens(t, tok, 0, "H"), done(engine.FinishStop)), append(tokens(t, tok, 0, "H"), done(engine.FinishStop)))
			b.cfg.Context = 512
			var logs bytes.Buffer
			s, _ := newTestServer(t, b, Options{ChatTemplate: tc.tmpl, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if got := strings.Contains(logs.String(), "does not render tools"); got != tc.drops {
				t.Errorf("load log mentions a template that does not render tools: %v, want %v\n%s", got, tc.drops, logs.String())
			}
			rec := do(s.Handler(), "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}]`+tools+`}`)
			if rec.Code != 200 {
				t.Fatalf("chat with tools: %d %s", rec.Code, rec.Body)
			}
			if got := rec.Header().Get("Warning"); (got != "") != tc.drops || tc.drops && !strings.Contains(got, "does not render tools") {
				t.Errorf("chat with tools: Warning %q, want one: %v", got, tc.drops)
			}
			rec = do(s.Handler(), "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}]}`)
			if got := rec.Header().Get("Warning"); rec.Code != 200 || got != "" {
				t.Errorf("chat without tools: %d, Warning %q, want 200 and none", rec.Code, got)
			}
		})
	}
}
