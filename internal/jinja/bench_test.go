package jinja

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkRender renders a typical request (system prompt and three
// turns; with tools, two tools and a question) with real
// templates of the corpus, JSON decoding included, as a chat request does.
// The pair against the renderer this one replaced is in jinjacmp.
func BenchmarkRender(b *testing.B) {
	tmpls, in := readCorpus(b)
	convs := map[string]corpusConversation{}
	for _, c := range in.Conversations {
		convs[c.Name] = c
	}
	for _, name := range []string{"qwen3", "llama3.2", "gemma3", "gpt-oss-120b", "mistral-small-3.2-24b-instruct-2506"} {
		for _, conv := range []string{"multi-turn", "tools-system-user"} {
			var tm corpusTemplate
			for _, t := range tmpls {
				if t.File == name+".jinja" {
					tm = t
				}
			}
			src, err := os.ReadFile(filepath.Join("testdata/corpus/templates", tm.File))
			if err != nil {
				b.Fatal(err)
			}
			tmpl, err := Parse(string(src))
			if err != nil {
				b.Fatal(err)
			}
			c := convs[conv]
			b.Run(name+"/"+conv, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					msgs, err := FromJSON(c.Messages, true)
					if err != nil {
						b.Fatal(err)
					}
					vars := map[string]Value{"messages": msgs, "tools": None(), "add_generation_prompt": Bool(true),
						"bos_token": Str(tm.BOS), "eos_token": Str(tm.EOS)}
					if c.Tools != "" {
						if vars["tools"], err = FromJSON(in.Tools[c.Tools], true); err != nil {
							b.Fatal(err)
						}
					}
					if _, err := tmpl.Render(b.Context(), vars, Options{}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
