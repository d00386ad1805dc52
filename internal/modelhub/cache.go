package modelhub

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Entry is one pulled reference: a manifest in the cache that maps the
// reference to a blob.
type Entry struct {
	// Reference is the canonical reference (Ref.String) the manifest is
	// stored under.
	Reference string `json:"reference"`
	// Repo, Revision and File say where the blob came from.
	Repo     string `json:"repo"`
	Revision string `json:"revision"`
	File     string `json:"file"`
	// Size is the blob's length in bytes and SHA256 its lower-case hex digest.
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// PulledAt is when the blob was last pulled or confirmed.
	PulledAt time.Time `json:"pulled_at"`
	// Path is the blob's path on this machine (not stored in the manifest).
	Path string `json:"-"`
}

// maxManifestBytes bounds a manifest file read from the cache.
const maxManifestBytes = 64 << 10

// DefaultDir returns the cache folder: $TANDEM_HOME when set, else tandem
// under the user cache folder (~/.cache/tandem on Linux).
func DefaultDir() (string, error) {
	if d := os.Getenv("TANDEM_HOME"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find the cache folder (set TANDEM_HOME to choose one): %w", err)
	}
	return filepath.Join(d, "tandem"), nil
}

func (h *Hub) blobPath(sha string) string {
	return filepath.Join(h.Dir, "blobs", "sha256-"+sha)
}

func (h *Hub) partialPath(key string) string {
	return filepath.Join(h.Dir, "partial", key+".partial")
}

func (h *Hub) manifestPath(ref string) string {
	return filepath.Join(h.Dir, "manifests", escapeName(ref)+".json")
}

// escapeName turns a reference into one file name: letters, digits, '.',
// '-' and '_' stay, every other byte becomes %XX.
func escapeName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isAlnum(c) || c == '.' || c == '-' || c == '_' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// Lookup returns the cached entry of a reference, or ok false when the
// reference was never pulled or its blob is gone. It makes no network request.
func (h *Hub) Lookup(ref string) (e Entry, ok bool, err error) {
	r, err := ParseRef(ref)
	if err != nil {
		return Entry{}, false, err
	}
	e, err = h.readManifest(h.manifestPath(r.String()))
	if errors.Is(err, fs.ErrNotExist) {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, err
	}
	st, err := os.Stat(e.Path)
	if err != nil || st.Size() != e.Size {
		return Entry{}, false, nil
	}
	return e, true, nil
}

func (h *Hub) readManifest(p string) (Entry, error) {
	f, err := os.Open(p)
	if err != nil {
		return Entry{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxManifestBytes+1))
	if err != nil {
		return Entry{}, fmt.Errorf("read manifest %s: %w", p, err)
	}
	if len(b) > maxManifestBytes {
		return Entry{}, fmt.Errorf("manifest %s is over %d bytes: delete it and pull again", p, maxManifestBytes)
	}
	var e Entry
	if err := json.Unmarshal(b, &e); err != nil {
		return Entry{}, fmt.Errorf("manifest %s is not valid JSON (%w): delete it and pull again", p, err)
	}
	if !isHex(e.SHA256, 64) {
		return Entry{}, fmt.Errorf("manifest %s has no valid sha256: delete it and pull again", p)
	}
	e.Path = h.blobPath(e.SHA256)
	return e, nil
}

func (h *Hub) writeManifest(e Entry) error {
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return err
	}
	p := h.manifestPath(e.Reference)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("make the manifest folder: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".manifest-*")
	if err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write manifest: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	return nil
}

// List returns every cached entry, sorted by reference. Manifests whose blob
// is missing are left out; an unreadable manifest is an error that names it.
func (h *Hub) List() ([]Entry, error) {
	dir := filepath.Join(h.Dir, "manifests")
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list the model cache: %w", err)
	}
	var out []Entry
	for _, de := range des {
		if de.IsDir() || !strings.HasSuffix(de.Name(), ".json") || strings.HasPrefix(de.Name(), ".") {
			continue
		}
		e, err := h.readManifest(filepath.Join(dir, de.Name()))
		if err != nil {
			return nil, err
		}
		if st, err := os.Stat(e.Path); err != nil || st.Size() != e.Size {
			continue
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Reference, b.Reference) })
	return out, nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Remove deletes the manifest of ref and, unless another manifest names the
// same content, its blob; it returns the entry removed and whether the blob
// was deleted. A reference that was never pulled is an error naming
// `tandem models`. It makes no network request.
func (h *Hub) Remove(ref string) (Entry, bool, error) {
	r, err := ParseRef(ref)
	if err != nil {
		return Entry{}, false, err
	}
	p := h.manifestPath(r.String())
	e, err := h.readManifest(p)
	if errors.Is(err, fs.ErrNotExist) {
		return Entry{}, false, fmt.Errorf("%s is not in the model cache %s: `tandem models` lists what is", r, h.Dir)
	}
	if err != nil {
		return Entry{}, false, err
	}
	if err := os.Remove(p); err != nil {
		return Entry{}, false, fmt.Errorf("remove manifest: %w", err)
	}
	others, err := h.List()
	if err != nil {
		return e, false, err
	}
	for _, o := range others {
		if o.SHA256 == e.SHA256 {
			return e, false, nil // still named by another reference
		}
	}
	if err := os.Remove(e.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return e, false, fmt.Errorf("remove blob: %w", err)
	}
	return e, true, nil
}
