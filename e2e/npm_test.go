package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// nodePackage is one npm package at a pinned version.
type nodePackage struct{ name, version string }

// installNodePackages returns a node_modules folder holding pkgs, installed
// on first use under the user cache folder (tandem-e2e/KEY) through a fresh
// folder renamed into place, so that concurrent test runs never see half
// an install. env is added to npm's environment.
func installNodePackages(t *testing.T, npm, key string, pkgs []nodePackage, env ...string) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	root := filepath.Join(cache, "tandem-e2e")
	final := filepath.Join(root, key)
	modules := filepath.Join(final, "node_modules")
	installed := func(m string) bool {
		for _, p := range pkgs {
			b, err := os.ReadFile(filepath.Join(m, filepath.FromSlash(p.name), "package.json"))
			var pj struct{ Version string }
			if err != nil || json.Unmarshal(b, &pj) != nil || pj.Version != p.version {
				return false
			}
		}
		return true
	}
	if installed(modules) {
		return modules
	}
	var deps, what []string
	for _, p := range pkgs {
		deps = append(deps, fmt.Sprintf("%q:%q", p.name, p.version))
		what = append(what, p.name+"@"+p.version)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatalf("make npm cache folder: %v", err)
	}
	tmp, err := os.MkdirTemp(root, "install-")
	if err != nil {
		t.Fatalf("make npm install folder: %v", err)
	}
	defer os.RemoveAll(tmp)
	pkg := fmt.Sprintf(`{"name":"tandem-e2e-install","private":true,"dependencies":{%s}}`, strings.Join(deps, ","))
	if err := os.WriteFile(filepath.Join(tmp, "package.json"), []byte(pkg), 0o644); err != nil {
		t.Fatalf("write package.json: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install %s (needs the npm registry or a warm npm cache): %v\n%s", strings.Join(what, " "), err, out)
	}
	if !installed(filepath.Join(tmp, "node_modules")) {
		t.Fatalf("npm install %s did not install those versions", strings.Join(what, " "))
	}
	os.RemoveAll(final) // a broken earlier install
	if err := os.Rename(tmp, final); err != nil && !installed(modules) {
		t.Fatalf("move the npm install into the cache: %v", err)
	}
	return modules
}
