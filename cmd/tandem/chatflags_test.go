package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestChatOptions checks --chat-template (read and compiled at start) and
// --reasoning-parser (one of none, auto, think).
func TestChatOptions(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jinja")
	bad := filepath.Join(dir, "bad.jinja")
	if err := os.WriteFile(good, []byte("{% for m in messages %}{{ m.content }}{% endfor %}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("{% for x in %}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file, parser string
		wantTmpl     bool
		wantErr      string
	}{
		{"", "auto", false, ""},
		{good, "think", true, ""},
		{"", "none", false, ""},
		{"", "deepseek", false, "--reasoning-parser"},
		{bad, "auto", false, "compile chat template"},
		{filepath.Join(dir, "missing.jinja"), "auto", false, "--chat-template"},
	} {
		f := workerFlags{chatTmpl: tc.file, reasoning: tc.parser}
		tmpl, parser, err := f.chatOptions()
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("chatOptions(%q, %q) error %v, want one mentioning %q", tc.file, tc.parser, err, tc.wantErr)
			}
		case err != nil || parser != tc.parser || (tmpl != "") != tc.wantTmpl:
			t.Errorf("chatOptions(%q, %q) = %q, %q, %v", tc.file, tc.parser, tmpl, parser, err)
		}
	}
}
