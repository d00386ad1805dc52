package chat

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tandem/internal/api/openai"
	"tandem/internal/engine/gguf"
	"tandem/internal/testenv"
)

// Chat templates as the models ship them (tokenizer.chat_template).
const (
	llama2Template = "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"
	chatMLTemplate = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
	llama3Template = "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
	// sliceTemplate exercises string slicing, filters and namespaces.
	sliceTemplate = "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{{ m.role[:1] | upper }}:{{ m.content[-3:] }};{% endfor %}{{ ns.n }}{% if add_generation_prompt %}>{% endif %}"
)

func TestChatTemplates(t *testing.T) {
	conv := []openai.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: " Hi there "},
		{Role: "assistant", Content: "Hello!"}, {Role: "user", Content: "Bye"}}
	tests := []struct {
		name, src string
		msgs      []openai.Message
		want      string
	}{
		{"llama-2", llama2Template, conv,
			"<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\n Hi there [/INST] Hello! </s><s>[INST] Bye [/INST]"},
		{"chatml", chatMLTemplate, conv[1:],
			"<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n Hi there <|im_end|>\n" +
				"<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n"},
		{"llama-3", llama3Template, conv,
			"<s><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>" +
				"<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>" +
				"<|start_header_id|>assistant<|end_header_id|>\n\n"},
		{"slicing and filters", sliceTemplate, conv, "S:ef.;U:re ;A:lo!;U:Bye;4>"},
		{"fallback", "", conv,
			"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n Hi there <|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n" +
				"<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n"},
	}
	for _, tc := range tests {
		ct, err := NewTemplate(tc.src, "<s>", "</s>")
		if err != nil {
			t.Errorf("%s: NewTemplate error: %v", tc.name, err)
			continue
		}
		if ct.Fallback() != (tc.src == "") {
			t.Errorf("%s: Fallback() = %v, want %v", tc.name, ct.Fallback(), tc.src == "")
		}
		got, err := ct.Render(tc.msgs, true)
		if err != nil || got != tc.want {
			t.Errorf("%s: Render = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

func TestChatTemplateErrors(t *testing.T) {
	ct, err := NewTemplate(llama2Template, "<s>", "</s>")
	if err != nil {
		t.Fatalf("NewTemplate(llama-2) error: %v", err)
	}
	_, err = ct.Render([]openai.Message{{Role: "user", Content: "a"}, {Role: "user", Content: "b"}}, true)
	if err == nil || !strings.Contains(err.Error(), "must alternate") {
		t.Errorf("Render(user, user) error = %v, want the template's raise_exception message", err)
	}
	if _, err := NewTemplate("{% for x in %}", "", ""); err == nil {
		t.Errorf("NewTemplate(broken source) succeeded, want an error")
	}
}

// TestSharedChatTemplates renders the chat templates shipped in the shared
// vocabulary files.
func TestSharedChatTemplates(t *testing.T) {
	path := testenv.Shared(t, "testdata/tokenizer/ggml-vocab-phi-3.gguf")
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatalf("gguf.Open(%s) error: %v", path, err)
	}
	defer f.Close()
	src, ok := f.String("tokenizer.chat_template")
	if !ok {
		t.Fatalf("%s has no tokenizer.chat_template", path)
	}
	ct, err := NewTemplate(src, "<s>", "<|endoftext|>")
	if err != nil {
		t.Fatalf("NewTemplate(phi-3) error: %v", err)
	}
	got, err := ct.Render([]openai.Message{{Role: "user", Content: "Hi"}, {Role: "assistant", Content: "Yo"}, {Role: "user", Content: "Bye"}}, true)
	want := "<s><|user|>\nHi<|end|>\n<|assistant|>\nYo<|end|>\n<|user|>\nBye<|end|>\n<|assistant|>\n"
	if err != nil || got != want {
		t.Errorf("phi-3 Render = %q, %v; want %q", got, err, want)
	}
}

// TestRendersTools: a template whose prompt changes with tools renders
// them; one without a tools section (ChatML, the plain Llama 3 template
// some tokenizer packages ship) and the fallback format do not.
func TestRendersTools(t *testing.T) {
	for _, tc := range []struct {
		name, file, src string
		want            bool
	}{
		{"qwen3", "qwen3.jinja", "", true},
		{"llama3.2", "llama3.2.jinja", "", true},
		{"chatml", "", chatMLTemplate, false},
		{"llama-3 without tools", "", llama3Template, false},
		{"fallback", "", "", false},
	} {
		src := tc.src
		if tc.file != "" {
			b, err := os.ReadFile(filepath.Join("testdata", "templates", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			src = string(b)
		}
		ct, err := NewTemplate(src, "<s>", "</s>")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := ct.RendersTools(); got != tc.want {
			t.Errorf("%s: RendersTools() = %v, want %v", tc.name, got, tc.want)
		}
	}
}
