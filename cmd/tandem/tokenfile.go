package main

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// upTokenPath is where `tandem up` keeps the token of the cluster whose
// router listens on host:port, so that `tandem inspect URL` finds it with
// no flag: a file only the user can read, in a folder only the user can
// open, under $XDG_RUNTIME_DIR when set (a per-user tmpfs), else the user
// cache folder.
func upTokenPath(host, port string) (string, error) {
	dir := os.Getenv("XDG_RUNTIME_DIR")
	if dir == "" {
		var err error
		if dir, err = os.UserCacheDir(); err != nil {
			return "", fmt.Errorf("find a folder for the cluster token: %w", err)
		}
	}
	name := strings.NewReplacer(":", "_", "/", "_", "[", "", "]", "").Replace(net.JoinHostPort(host, port))
	return filepath.Join(dir, "tandem", "clusters", name+".token"), nil
}

// writeUpToken writes tok to upTokenPath(host, port), readable only by
// the user, replacing any earlier file atomically, and returns the path.
func writeUpToken(host, port, tok string) (string, error) {
	p, err := upTokenPath(host, port)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return "", fmt.Errorf("make the cluster token folder: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".token-*")
	if err != nil {
		return "", fmt.Errorf("write the cluster token: %w", err)
	}
	defer os.Remove(f.Name()) // after the rename, a no-op
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return "", fmt.Errorf("write the cluster token: %w", err)
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		f.Close()
		return "", fmt.Errorf("write the cluster token: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("write the cluster token: %w", err)
	}
	if err := os.Rename(f.Name(), p); err != nil {
		return "", fmt.Errorf("write the cluster token: %w", err)
	}
	return p, nil
}

// upTokenFor returns the token file `tandem up` wrote for the router at
// rawURL, or "" when there is none.
func upTokenFor(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	for _, host := range sameHost(u.Hostname()) {
		p, err := upTokenPath(host, port)
		if err != nil {
			return ""
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// sameHost lists the names under which `tandem up` may have filed the
// token of a router reached as host: the name itself and, for a loopback
// name or address (the README says localhost, up binds 127.0.0.1), the
// other loopback spellings.
func sameHost(host string) []string {
	loop := []string{"127.0.0.1", "localhost", "::1"}
	if host == "localhost" || slices.Contains(loop, host) {
		return append([]string{host}, slices.DeleteFunc(loop, func(h string) bool { return h == host })...)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return append([]string{host}, loop...)
	}
	return []string{host}
}
