package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's fixed facts, which the check (build_test.go) and the Helm chart
// (podSecurityContext.runAsUser) rely on.
const (
	BinaryPath = "/usr/local/bin/tandem"
	CAPath     = "/etc/ssl/certs/ca-certificates.crt"
	UID        = 65532
	User       = "65532:65532"
	Home       = "/home/nonroot"
)

// epoch is every timestamp in the image (layer entries, config), so that
// the same binary gives the same digest.
var epoch = time.Unix(0, 0).UTC()

// Options say what to build.
type Options struct {
	Binary   string // the static tandem binary
	Out      string // the OCI layout folder
	CABundle string // PEM CA bundle; "" for none
	RefName  string // org.opencontainers.image.ref.name in the layout's index
	Arch     string // GOARCH of the binary
	Version  string // org.opencontainers.image.version; "" for none
}

// Build writes the image to o.Out as an OCI layout and returns its manifest
// digest.
func Build(o Options) (v1.Hash, error) {
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("read the binary: %w", err)
	}
	if err := checkStatic(o.Binary); err != nil {
		return v1.Hash{}, err
	}
	var ca []byte
	if o.CABundle != "" {
		if ca, err = os.ReadFile(o.CABundle); err != nil {
			return v1.Hash{}, fmt.Errorf("read the CA bundle (give -ca '' to build without one; the hub client then cannot verify TLS): %w", err)
		}
	}
	layerTar, err := rootfs(bin, ca)
	if err != nil {
		return v1.Hash{}, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return v1.Hash{}, fmt.Errorf("make the layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: epoch}, CreatedBy: "tandem tools/image", Comment: "tandem binary, CA bundle, passwd"}})
	if err != nil {
		return v1.Hash{}, fmt.Errorf("add the layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return v1.Hash{}, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", o.Arch
	cf.Created = v1.Time{Time: epoch}
	labels := map[string]string{
		"org.opencontainers.image.title":       "tandem",
		"org.opencontainers.image.description": "Disaggregated (prefill/decode) LLM serving with a pure Go engine",
	}
	if o.Version != "" {
		labels["org.opencontainers.image.version"] = o.Version
	}
	cf.Config = v1.Config{
		User:       User,
		Entrypoint: []string{BinaryPath},
		Cmd:        []string{"--help"},
		WorkingDir: Home,
		Env: []string{
			"PATH=/usr/local/bin:/usr/bin:/bin",
			"HOME=" + Home,
			"SSL_CERT_FILE=" + CAPath,
		},
		Labels: labels,
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return v1.Hash{}, fmt.Errorf("set the config: %w", err)
	}
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	if err := replaceLayout(o.Out); err != nil {
		return v1.Hash{}, err
	}
	p, err := layout.Write(o.Out, empty.Index)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("write the layout: %w", err)
	}
	var opts []layout.Option
	if o.RefName != "" {
		opts = append(opts, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": o.RefName}))
	}
	if err := p.AppendImage(img, opts...); err != nil {
		return v1.Hash{}, fmt.Errorf("write the image to the layout: %w", err)
	}
	return digest, nil
}

// checkStatic refuses a dynamically linked binary: the image has no libc.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("the binary is not an ELF file: %w", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("the binary is dynamically linked (it has an ELF interpreter): build it with CGO_ENABLED=0")
		}
	}
	return nil
}

// replaceLayout empties out so a new layout can be written there; it refuses
// a non-empty folder that is not an OCI layout, so a wrong -out removes
// nothing else.
func replaceLayout(out string) error {
	ents, err := os.ReadDir(out)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(ents) == 0) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(out, "oci-layout")); err != nil {
		return fmt.Errorf("%s is not empty and holds no OCI layout: refusing to replace it", out)
	}
	return os.RemoveAll(out)
}

// rootfs returns the layer's tar: the folders, /etc/passwd and /etc/group
// for the non-root user, the CA bundle (when given) and the binary.
func rootfs(bin, ca []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64, uid int) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, Uid: uid, Gid: uid, ModTime: epoch, Format: tar.FormatPAX})
	}
	file := func(name string, mode int64, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(b)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:%s:/sbin/nologin\n", UID, UID, Home)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", UID)
	steps := []func() error{
		func() error { return dir("etc/", 0o755, 0) },
		func() error { return file("etc/passwd", 0o644, []byte(passwd)) },
		func() error { return file("etc/group", 0o644, []byte(group)) },
		func() error { return dir("home/", 0o755, 0) },
		func() error { return dir("home/nonroot/", 0o700, UID) },
		func() error { return dir("tmp/", 0o1777, 0) },
		func() error { return dir("usr/", 0o755, 0) },
		func() error { return dir("usr/local/", 0o755, 0) },
		func() error { return dir("usr/local/bin/", 0o755, 0) },
		func() error { return file(BinaryPath[1:], 0o755, bin) },
	}
	if ca != nil {
		steps = append(steps,
			func() error { return dir("etc/ssl/", 0o755, 0) },
			func() error { return dir("etc/ssl/certs/", 0o755, 0) },
			func() error { return file(CAPath[1:], 0o644, ca) })
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return nil, fmt.Errorf("write the layer: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
