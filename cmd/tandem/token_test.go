package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClusterTokenFilePermissions: a token file its group or others can
// read or write is refused with a message that says to chmod 600 it, as
// ssh refuses such a private key; mode 0600 (and 0400) is read.
func TestClusterTokenFilePermissions(t *testing.T) {
	const tok = "0123456789abcdef0123456789abcdef"
	dir := t.TempDir()
	for _, tc := range []struct {
		mode os.FileMode
		ok   bool
	}{
		{0o600, true}, {0o400, true},
		{0o644, false}, {0o640, false}, {0o604, false}, {0o620, false}, {0o666, false},
	} {
		p := filepath.Join(dir, "token-"+tc.mode.String())
		if err := os.WriteFile(p, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, tc.mode); err != nil {
			t.Fatal(err)
		}
		got, err := clusterToken(p)
		switch {
		case tc.ok && (err != nil || string(got) != tok):
			t.Errorf("clusterToken(file of mode %v) = %q, %v; want the token", tc.mode, got, err)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), "chmod 600 "+p)):
			t.Errorf("clusterToken(file of mode %v) = %q, %v; want an error saying chmod 600 %s", tc.mode, got, err, p)
		}
	}
	// A link to a file of mode 0644 is refused too: the mode is the file's.
	link := filepath.Join(dir, "link")
	if err := os.Symlink(filepath.Join(dir, "token-"+os.FileMode(0o644).String()), link); err != nil {
		t.Fatal(err)
	}
	if _, err := clusterToken(link); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("clusterToken(link to a 0644 file) = %v; want it refused", err)
	}
}
