package modelhub

import (
	"strings"
	"testing"
)

func TestParseRef(t *testing.T) {
	cases := []struct {
		in   string
		want Ref
		key  string
	}{
		{"hf.co/org/repo", Ref{Repo: "org/repo", Revision: "main"}, "hf.co/org/repo"},
		{"hf.co/org/repo:q4_k_m", Ref{Repo: "org/repo", Quant: "Q4_K_M", Revision: "main"}, "hf.co/org/repo:Q4_K_M"},
		{"huggingface.co/Org/Repo-GGUF:IQ4_XS", Ref{Repo: "Org/Repo-GGUF", Quant: "IQ4_XS", Revision: "main"}, "hf.co/Org/Repo-GGUF:IQ4_XS"},
		{"https://huggingface.co/org/repo", Ref{Repo: "org/repo", Revision: "main"}, "hf.co/org/repo"},
		{"https://huggingface.co/org/repo/resolve/main/m-Q8_0.gguf", Ref{Repo: "org/repo", Revision: "main", File: "m-Q8_0.gguf"}, "hf.co/org/repo/resolve/main/m-Q8_0.gguf"},
		{"https://huggingface.co/org/repo/blob/v1.0/sub/m.gguf", Ref{Repo: "org/repo", Revision: "v1.0", File: "sub/m.gguf"}, "hf.co/org/repo/resolve/v1.0/sub/m.gguf"},
		{"hf.co/org/repo/resolve/refs%2Fpr%2F1/m.gguf", Ref{Repo: "org/repo", Revision: "refs/pr/1", File: "m.gguf"}, "hf.co/org/repo/resolve/refs%2Fpr%2F1/m.gguf"},
		{"org/repo", Ref{Repo: "org/repo", Revision: "main"}, "hf.co/org/repo"},
		{"Qwen/Qwen2.5-0.5B-Instruct-GGUF:q4_k_m", Ref{Repo: "Qwen/Qwen2.5-0.5B-Instruct-GGUF", Quant: "Q4_K_M", Revision: "main"}, "hf.co/Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M"},
		{"http://127.0.0.1:8080/org/repo/resolve/main/m.gguf", Ref{Repo: "org/repo", Revision: "main", File: "m.gguf", Origin: "http://127.0.0.1:8080"}, "http://127.0.0.1:8080/org/repo/resolve/main/m.gguf"},
	}
	for _, c := range cases {
		got, err := ParseRef(c.in)
		if err != nil {
			t.Errorf("ParseRef(%q): %v", c.in, err)
			continue
		}
		if got != c.want || got.String() != c.key {
			t.Errorf("ParseRef(%q) = %+v (%s), want %+v (%s)", c.in, got, got.String(), c.want, c.key)
		}
		if again, err := ParseRef(got.String()); err != nil || again != got {
			t.Errorf("ParseRef(%q) round trip: %+v, %v", got.String(), again, err)
		}
	}
	for _, bad := range []string{"model.gguf", "hf.co/org", "hf.co/org/repo/extra", "hf.co/../repo", "hf.co/org/repo:", "hf.co/org/repo:a b",
		"http://huggingface.co/org/repo", "hf.co/org/repo?x=1", "https://example.com/org/repo", "hf.co/org/repo/resolve/main/../x.gguf", "hf.co//repo"} {
		if r, err := ParseRef(bad); err == nil {
			t.Errorf("ParseRef(%q) = %+v, want an error", bad, r)
		}
	}
	if IsRef("./models/x.gguf") || IsRef("/tmp/hf.co/x") || !IsRef("HF.CO/a/b") {
		t.Error("IsRef misclassifies")
	}
	for s, want := range map[string]bool{"org/repo": true, "org/repo:Q8_0": true, "Org.x/Repo-GGUF": true,
		"models/m.gguf": false, "models/M.GGUF": false, "./org/repo": false, "/org/repo": false, "a/b/c": false,
		"org/": false, "/repo": false, "org/repo:": false, "org/repo:a b": false, "../repo": false, "org/..": false,
		"~/m": false, "llama3.2": false, "m.gguf": false, "org/repo/": false} {
		if IsShortRef(s) != want || IsRef(s) != want {
			t.Errorf("IsShortRef(%q) = %v, IsRef %v; want %v", s, IsShortRef(s), IsRef(s), want)
		}
	}
}

func TestSelectFile(t *testing.T) {
	files := []string{"README.md", "m-Q4_K.gguf", "m-Q4_K_M.gguf", "m-IQ4_XS.gguf", "m.Q8_0.gguf", "mmproj-f16.gguf", "sub/m-F16.gguf"}
	for quant, want := range map[string]string{"q4_k_m": "m-Q4_K_M.gguf", "Q4_K": "m-Q4_K.gguf", "q8_0": "m.Q8_0.gguf", "iq4_xs": "m-IQ4_XS.gguf", "F16": "sub/m-F16.gguf", "": "m-Q4_K_M.gguf"} {
		if got, err := SelectFile("o/r", files, quant); err != nil || got != want {
			t.Errorf("SelectFile(%q) = %q, %v; want %q", quant, got, err, want)
		}
	}
	if got, err := SelectFile("o/r", []string{"a.txt", "only-Q6_K.gguf", "mmproj-model-f16.gguf"}, ""); err != nil || got != "only-Q6_K.gguf" {
		t.Errorf("the only GGUF: %q, %v", got, err)
	}
	_, err := SelectFile("o/r", []string{"m-Q8_0.gguf", "m-Q6_K.gguf"}, "")
	if err == nil || !strings.Contains(err.Error(), "m-Q6_K.gguf  (hf.co/o/r:Q6_K)") || !strings.Contains(err.Error(), "m-Q8_0.gguf  (hf.co/o/r:Q8_0)") {
		t.Errorf("no default: err %v, want the choices listed", err)
	}
	if _, err := SelectFile("o/r", []string{"m-Q4_0.gguf"}, "Q4_0_4_4"); err == nil {
		t.Error("a tag that matches nothing was accepted")
	}
	if _, err := SelectFile("o/r", []string{"a-Q8_0.gguf", "b-Q8_0.gguf"}, "Q8_0"); err == nil || !strings.Contains(err.Error(), "matches 2 files") {
		t.Errorf("ambiguous tag: %v", err)
	}
	if _, err := SelectFile("o/r", []string{"m-Q4_K_M-00001-of-00002.gguf", "m-Q4_K_M-00002-of-00002.gguf"}, "Q4_K_M"); err == nil || !strings.Contains(err.Error(), "split GGUF") {
		t.Errorf("split: %v", err)
	}
}
