package main

import (
	"os"
	"strings"
	"testing"
)

// TestUpTokenFile: the token up keeps is readable only by the user, found
// by `tandem inspect` from the router's URL (with or without a trailing
// path), and not found for another port.
func TestUpTokenFile(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	p, err := writeUpToken("127.0.0.1", "8123", "tok")
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	if got := upTokenFor("http://127.0.0.1:8123/"); got != p {
		t.Errorf("upTokenFor = %q, want %q", got, p)
	}
	if got := upTokenFor("http://localhost:8123"); got != p {
		t.Errorf("upTokenFor localhost = %q, want %q (up binds 127.0.0.1; the README says localhost)", got, p)
	}
	if got := upTokenFor("http://127.0.0.1:8124"); got != "" {
		t.Errorf("upTokenFor another port = %q, want none", got)
	}
	if b, _ := os.ReadFile(p); strings.TrimSpace(string(b)) != "tok" {
		t.Errorf("file holds %q", b)
	}
}

func TestSplitThreads(t *testing.T) {
	for _, c := range []struct{ cores, n, want int }{{2, 2, 1}, {2, 4, 1}, {8, 2, 4}, {16, 3, 5}, {1, 1, 1}} {
		if got := splitThreads(c.cores, c.n); got != c.want {
			t.Errorf("splitThreads(%d, %d) = %d, want %d", c.cores, c.n, got, c.want)
		}
	}
}

func TestVersionString(t *testing.T) {
	v := versionString()
	if !strings.Contains(v, "go1.") || !strings.Contains(v, "/") {
		t.Errorf("versionString() = %q, want the Go version and the platform", v)
	}
}
