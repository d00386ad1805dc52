package modelhub

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
)

// DefaultRevision is the revision a repository reference without one means.
const DefaultRevision = "main"

// Ref is a parsed hub reference: a repository with an optional quantization
// tag (hf.co/ORG/REPO[:QUANT]), or one file at one revision
// (https://huggingface.co/ORG/REPO/resolve/REV/FILE).
type Ref struct {
	// Repo is "ORG/REPO".
	Repo string
	// Quant is the quantization tag, upper-cased; empty when none was given
	// or when File is set.
	Quant string
	// Revision is the branch, tag or commit; DefaultRevision unless the
	// reference was a file URL naming another.
	Revision string
	// File is the file's path inside the repository when the reference named
	// one; empty when it is picked from the repository's file list.
	File string
	// Origin is "scheme://host[:port]" when the reference was a URL on a
	// host other than the hub's own names (hf.co, huggingface.co); it must
	// then be the configured endpoint's. Empty otherwise.
	Origin string
}

// hubHosts are the host names that mean the Hugging Face hub itself; a
// reference on one of them is fetched from the configured endpoint.
var hubHosts = map[string]bool{"hf.co": true, "huggingface.co": true, "www.huggingface.co": true}

var (
	namePart = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$`)
	quantTag = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
)

// IsRef reports whether s looks like a hub reference rather than a file path:
// it starts with hf.co/, huggingface.co/ or an http(s) scheme, or it is the
// short form ORG/REPO[:QUANT] (IsShortRef). A short reference reads as a
// relative path too: callers that take either look for a file first (a path
// that exists wins).
func IsRef(s string) bool {
	l := strings.ToLower(s)
	for _, p := range []string{"hf.co/", "huggingface.co/", "www.huggingface.co/", "https://", "http://"} {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return IsShortRef(s)
}

// IsShortRef reports whether s is ORG/REPO[:QUANT] with no host: exactly one
// slash between two valid names (the first not a hub host such as hf.co),
// the repository name not ending in .gguf
// (that is a file), and a valid tag after the colon when there is one. A
// path such as ./x/y, /x/y, x/y/z or models/m.gguf is not one.
func IsShortRef(s string) bool {
	org, rest, ok := strings.Cut(s, "/")
	if !ok || strings.Contains(rest, "/") || hubHosts[strings.ToLower(org)] {
		return false
	}
	name, quant, hasQuant := strings.Cut(rest, ":")
	if hasQuant && !quantTag.MatchString(quant) {
		return false
	}
	for _, p := range []string{org, name} {
		if !namePart.MatchString(p) || strings.Contains(p, "..") {
			return false
		}
	}
	return !strings.HasSuffix(strings.ToLower(name), ".gguf")
}

// ParseRef parses a hub reference: hf.co/ORG/REPO[:QUANT],
// huggingface.co/ORG/REPO[:QUANT] (also with an https:// prefix) or the short
// ORG/REPO[:QUANT] (meaning hf.co/ORG/REPO[:QUANT]), or a file
// URL https://HOST/ORG/REPO/resolve/REV/FILE (a /blob/ page URL is taken as
// its /resolve/ twin; the scheme may be left out for hf.co and
// huggingface.co).
func ParseRef(s string) (Ref, error) {
	if !IsRef(s) {
		return Ref{}, fmt.Errorf("%q is not a hub reference: use ORG/REPO[:QUANT], hf.co/ORG/REPO[:QUANT] or https://huggingface.co/ORG/REPO/resolve/REV/FILE.gguf", s)
	}
	raw := s
	if IsShortRef(s) {
		raw = "https://hf.co/" + s
	} else if !strings.Contains(s, "://") {
		raw = "https://" + s
	}
	u, err := url.Parse(raw)
	if err != nil {
		return Ref{}, fmt.Errorf("parse hub reference %q: %w", s, err)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return Ref{}, fmt.Errorf("hub reference %q: a query, fragment or user name is not allowed", s)
	}
	var r Ref
	host := strings.ToLower(u.Host)
	if !hubHosts[host] {
		r.Origin = u.Scheme + "://" + u.Host
	} else if strings.Contains(s, "://") && u.Scheme != "https" {
		return Ref{}, fmt.Errorf("hub reference %q: use https for %s", s, host)
	}
	segs, err := splitPath(u.EscapedPath())
	if err != nil {
		return Ref{}, fmt.Errorf("hub reference %q: %w", s, err)
	}
	switch {
	case len(segs) == 2:
		if r.Origin != "" {
			return Ref{}, fmt.Errorf("hub reference %q: a URL must name a file (…/ORG/REPO/resolve/REV/FILE.gguf); or write hf.co/ORG/REPO[:QUANT]", s)
		}
		name, quant, hasQuant := strings.Cut(segs[1], ":")
		if hasQuant {
			if !quantTag.MatchString(quant) {
				return Ref{}, fmt.Errorf("hub reference %q: %q is not a quantization tag (e.g. Q4_K_M)", s, quant)
			}
			r.Quant = strings.ToUpper(quant)
		}
		segs[1] = name
	case len(segs) >= 5 && (segs[2] == "resolve" || segs[2] == "blob"):
		r.Revision = segs[3]
		r.File = path.Join(segs[4:]...)
		if r.File != strings.Join(segs[4:], "/") {
			return Ref{}, fmt.Errorf("hub reference %q: the file path is not clean", s)
		}
		segs = segs[:2]
	default:
		return Ref{}, fmt.Errorf("hub reference %q: want hf.co/ORG/REPO[:QUANT] or …/ORG/REPO/resolve/REV/FILE.gguf", s)
	}
	for _, p := range segs {
		if !namePart.MatchString(p) || strings.Contains(p, "..") {
			return Ref{}, fmt.Errorf("hub reference %q: %q is not a valid organization or repository name", s, p)
		}
	}
	r.Repo = segs[0] + "/" + segs[1]
	if r.Revision == "" {
		r.Revision = DefaultRevision
	}
	return r, nil
}

// splitPath splits an escaped URL path into unescaped segments, refusing
// empty, "." and ".." segments.
func splitPath(escaped string) ([]string, error) {
	escaped = strings.TrimPrefix(escaped, "/")
	var segs []string
	for _, e := range strings.Split(escaped, "/") {
		p, err := url.PathUnescape(e)
		if err != nil {
			return nil, err
		}
		if p == "" || p == "." || p == ".." {
			return nil, errors.New("empty, . or .. path segment")
		}
		segs = append(segs, p)
	}
	return segs, nil
}

// String returns the reference's canonical form, the key of its manifest in
// the cache: hf.co/ORG/REPO[:QUANT] for repository references (a file URL on
// the hub becomes hf.co/ORG/REPO/resolve/REV/FILE) and the URL itself for
// other hosts.
func (r Ref) String() string {
	if r.File == "" {
		if r.Quant == "" {
			return "hf.co/" + r.Repo
		}
		return "hf.co/" + r.Repo + ":" + r.Quant
	}
	p := r.Repo + "/resolve/" + url.PathEscape(r.Revision) + "/" + escapeFile(r.File)
	if r.Origin != "" {
		return r.Origin + "/" + p
	}
	return "hf.co/" + p
}

// escapeFile escapes each segment of a repository file path for a URL.
func escapeFile(f string) string {
	segs := strings.Split(f, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}
