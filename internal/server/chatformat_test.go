package server

import (
	"os"
	"slices"
	"testing"

	"tandem/internal/api/openai"
)

// Chat templates as the models ship them (tokenizer.chat_template), for the
// test vocabularies; the chat package's tests render the same ones.
const (
	llama2Template = "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"
	chatMLTemplate = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
	llama3Template = "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)

// TestChatPromptBOS checks that a template writing bos_token does not get a
// second BOS, and that one without it gets the vocabulary's BOS.
func TestChatPromptBOS(t *testing.T) {
	msgs := []openai.Message{{Role: "user", Content: "Hello"}}
	readTemplate := func(name string) string {
		src, err := os.ReadFile("chat/testdata/templates/" + name)
		if err != nil {
			t.Fatalf("read template: %v", err)
		}
		return string(src)
	}
	for _, tc := range []struct {
		name string
		src  string
	}{{"template with bos_token", llama2Template}, {"template without bos_token", chatMLTemplate}, {"fallback", ""},
		{"Llama 3 (bos_token in the first message)", readTemplate("llama3.jinja")},
		{"Llama 3.2 (bos_token first)", readTemplate("llama3.2.jinja")}} {
		tok := testVocab(t, tc.src, true)
		f, err := newChatFormat(tok, "")
		if err != nil {
			t.Fatalf("%s: newChatFormat error: %v", tc.name, err)
		}
		ids, err := f.prompt(tok, msgs)
		if err != nil {
			t.Fatalf("%s: prompt error: %v", tc.name, err)
		}
		bos := 0
		for _, id := range ids {
			if id == tok.BOS() {
				bos++
			}
		}
		if bos != 1 || ids[0] != tok.BOS() {
			t.Errorf("%s: prompt %v has %d BOS tokens (first %d), want exactly one, first", tc.name, ids, bos, ids[0])
		}
	}
}

// TestFallbackStop checks how the fallback format ends generation: on the
// <|im_end|> token when the vocabulary has it, else on the stop string.
func TestFallbackStop(t *testing.T) {
	tok := testVocab(t, "", true)
	f, _ := newChatFormat(tok, "")
	if want := tokenIDs(t, tok, "<|im_end|>"); !slices.Equal(f.stopTokens, want) || f.stops != nil {
		t.Errorf("fallback with <|im_end|> token: stop tokens %v strings %q, want %v and none", f.stopTokens, f.stops, want)
	}
	tok = testVocab(t, "", false)
	f, _ = newChatFormat(tok, "")
	if f.stopTokens != nil || !slices.Equal(f.stops, []string{"<|im_end|>"}) {
		t.Errorf("fallback without <|im_end|> token: stop tokens %v strings %q, want none and [<|im_end|>]", f.stopTokens, f.stops)
	}
	tok = testVocab(t, "{% for x in %}", true)
	f, err := newChatFormat(tok, "")
	if err == nil || !f.tmpl.Fallback() {
		t.Errorf("newChatFormat(broken template) = fallback %v, error %v; want the fallback and an error", f.tmpl.Fallback(), err)
	}
}
