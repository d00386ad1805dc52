package testenv

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// SharedDir returns the shared data folder, or "" when it cannot be found.
func SharedDir() string {
	if d := os.Getenv("TANDEM_SHARED"); d != "" {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return d
		}
		return ""
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return ""
	}
	// file is <root>/internal/testenv/testenv.go
	root := filepath.Dir(filepath.Dir(filepath.Dir(file)))
	d := filepath.Join(root, "..", "shared")
	if st, err := os.Stat(d); err == nil && st.IsDir() {
		return d
	}
	return ""
}

// Shared returns the path of rel inside the shared data folder, skipping the
// test with a message that says what is missing when the folder or the file
// is absent.
func Shared(t testing.TB, rel string) string {
	t.Helper()
	d := SharedDir()
	if d == "" {
		t.Skipf("shared data folder not found (set TANDEM_SHARED or place it at ../shared); needed for %s", rel)
	}
	p := filepath.Join(d, rel)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared file %s not found: %v", p, err)
	}
	return p
}
