package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// buildTandem builds the static tandem binary from the checkout this module
// lies in ($TANDEM_BINARY instead, when set: a binary scripts/image.sh built).
func buildTandem(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("TANDEM_BINARY"); p != "" {
		return p
	}
	out := filepath.Join(t.TempDir(), "tandem")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/tandem")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/tandem: %v\n%s", err, b)
	}
	return out
}

// TestImageLayout builds the image and reads the layout back: one OCI
// manifest, a config that runs the binary as a numeric non-root user on this
// architecture, and one layer holding exactly the binary that was built,
// which runs when extracted, beside the CA bundle and /etc/passwd.
func TestImageLayout(t *testing.T) {
	bin := buildTandem(t)
	want, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	ca := "/etc/ssl/certs/ca-certificates.crt"
	if _, err := os.Stat(ca); err != nil {
		t.Logf("no CA bundle on this machine (%v): checking an image without one", err)
		ca = ""
	}
	out := filepath.Join(t.TempDir(), "layout")
	digest, err := Build(Options{Binary: bin, Out: out, CABundle: ca, RefName: "tandem:test", Arch: runtime.GOARCH})
	if err != nil {
		t.Fatal(err)
	}

	p, err := layout.FromPath(out)
	if err != nil {
		t.Fatalf("read the layout: %v", err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("the layout's index has %d manifests, want 1", len(im.Manifests))
	}
	desc := im.Manifests[0]
	if desc.MediaType != types.OCIManifestSchema1 || desc.Digest != digest {
		t.Errorf("index entry %s %s, want %s %s", desc.MediaType, desc.Digest, types.OCIManifestSchema1, digest)
	}
	if got := desc.Annotations["org.opencontainers.image.ref.name"]; got != "tandem:test" {
		t.Errorf("ref name %q, want tandem:test", got)
	}
	img, err := idx.Image(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.MediaType != types.OCIConfigJSON || len(m.Layers) != 1 || m.Layers[0].MediaType != types.OCILayer {
		t.Fatalf("manifest: config %s, layers %+v; want an OCI config and one OCI gzip layer", m.Config.MediaType, m.Layers)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}
	if cf.Config.User != User || strings.HasPrefix(cf.Config.User, "0") {
		t.Errorf("user %q, want the numeric non-root %q", cf.Config.User, User)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{BinaryPath}) {
		t.Errorf("entrypoint %v, want [%s]", cf.Config.Entrypoint, BinaryPath)
	}
	if len(cf.RootFS.DiffIDs) != 1 {
		t.Fatalf("rootfs has %d diff ids, want 1", len(cf.RootFS.DiffIDs))
	}

	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string][]byte{}
	modes := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("read the layer: %v", err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files["/"+h.Name], modes["/"+h.Name] = b, h
	}
	got, ok := files[BinaryPath]
	if !ok {
		t.Fatalf("the layer has no %s (it has %d entries)", BinaryPath, len(files))
	}
	if sha256.Sum256(got) != sha256.Sum256(want) {
		t.Fatalf("%s in the layer is not the binary that was built", BinaryPath)
	}
	if modes[BinaryPath].Mode&0o111 == 0 {
		t.Errorf("%s has mode %o: not executable", BinaryPath, modes[BinaryPath].Mode)
	}
	if ca != "" {
		wantCA, err := os.ReadFile(ca)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(files[CAPath], wantCA) {
			t.Errorf("%s in the layer differs from %s", CAPath, ca)
		}
	}
	if !strings.Contains(string(files["/etc/passwd"]), ":65532:65532:") {
		t.Errorf("/etc/passwd names no user 65532: %q", files["/etc/passwd"])
	}
	if h := modes["/tmp/"]; h == nil || h.Mode&0o1777 != 0o1777 {
		t.Errorf("/tmp is missing or not world-writable with the sticky bit: %+v", h)
	}

	// The extracted binary runs.
	x := filepath.Join(t.TempDir(), "tandem")
	if err := os.WriteFile(x, got, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	help, err := exec.CommandContext(ctx, x, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(help), "Disaggregated LLM serving") {
		t.Errorf("the extracted binary's --help: %v\n%s", err, help)
	}

	// The same inputs give the same image.
	again, err := Build(Options{Binary: bin, Out: out, CABundle: ca, RefName: "tandem:test", Arch: runtime.GOARCH})
	if err != nil {
		t.Fatal(err)
	}
	if again != digest {
		t.Errorf("a second build gave %s, the first %s: the image is not reproducible", again, digest)
	}
}

// TestBuildRefuses checks the builder's refusals: a dynamically linked
// binary, and an output folder that holds something other than a layout.
func TestBuildRefuses(t *testing.T) {
	dyn := ""
	for _, p := range []string{"/bin/sh", "/usr/bin/env"} {
		if _, err := os.Stat(p); err == nil {
			dyn = p
			break
		}
	}
	if dyn != "" && checkStatic(dyn) == nil {
		t.Logf("%s is static here; not checked", dyn)
	} else if dyn != "" {
		if _, err := Build(Options{Binary: dyn, Out: t.TempDir(), Arch: runtime.GOARCH}); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
			t.Errorf("building from the dynamic %s: got %v, want a refusal naming CGO_ENABLED=0", dyn, err)
		}
	}
	out := t.TempDir()
	keep := filepath.Join(out, "precious")
	if err := os.WriteFile(keep, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := replaceLayout(out); err == nil {
		t.Errorf("replaceLayout emptied a folder that holds no OCI layout")
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("the file in the refused folder is gone: %v", err)
	}
}
