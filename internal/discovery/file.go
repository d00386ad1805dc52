package discovery

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"os"
	"strconv"
	"time"

	"sigs.k8s.io/yaml"
)

// The file defaults and limits.
const (
	DefaultFileInterval = 500 * time.Millisecond
	// MaxFileBytes bounds the endpoint file, as llm-d's file discovery does.
	MaxFileBytes = 1 << 20
	// fullReadEvery: every this many polls the file is read even when its
	// size, modification time and identity look unchanged (a rewrite in
	// place within the file system's time granularity keeps all three).
	fullReadEvery = 10
)

// FileOptions configures a file source.
type FileOptions struct {
	Common
	// Path of the endpoint file (its format is in the package doc), checked every
	// Interval (default DefaultFileInterval).
	Path     string
	Interval time.Duration
}

// fileSource polls an endpoint file.
//
// It polls instead of using inotify (fsnotify): an editor that saves by
// rename, a tool that deletes and recreates, and a Kubernetes ConfigMap
// volume (a symlink to a directory that is swapped atomically) each
// replace the inode a watch is bound to, so a watch must follow the
// directory and re-arm, and network and overlay file systems may deliver
// no events at all. One stat per Interval (500 ms by default, well within
// the second a new worker may wait) sees all of these, needs no
// dependency, and runs on the clock that tests control.
type fileSource struct {
	*core
	o FileOptions

	// Only Run's goroutine touches these.
	last  os.FileInfo // the file as last read; nil: read at the next poll
	hash  [32]byte    // of the content last parsed (good or bad)
	polls int
}

// NewFile returns a source of the endpoints in the file at o.Path.
func NewFile(o FileOptions) (Source, error) {
	if o.Path == "" {
		return nil, errors.New("discovery file: no path given")
	}
	if o.Interval == 0 {
		o.Interval = DefaultFileInterval
	}
	if o.Interval < 0 {
		return nil, errors.New("discovery file: negative --discovery-interval")
	}
	met, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	return &fileSource{core: newCore(KindFile, "file "+o.Path, o.Logger, met), o: o}, nil
}

// Status returns what the source sees now.
func (f *fileSource) Status() Status { return f.status() }

// Run loads the file, then checks it every Interval until ctx ends. A
// file that cannot be loaded at first is an error; later, a file that is
// gone, unreadable, too large or invalid keeps the last good membership.
func (f *fileSource) Run(ctx context.Context, update func(Snapshot)) error {
	if err := f.start(); err != nil {
		return err
	}
	if kind, err := f.check(update); err != nil {
		f.note(kind, err, false)
		return fmt.Errorf("discovery file: %w", err)
	}
	t := time.NewTicker(f.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if kind, err := f.check(update); err != nil {
			f.fail(kind, fmt.Errorf("%w; the last good membership stays", err))
		}
	}
}

// check reads the file when it may have changed and publishes what it
// holds. On failure it returns the error and its kind.
func (f *fileSource) check(update func(Snapshot)) (kind string, err error) {
	f.polls++
	fi, err := os.Stat(f.o.Path)
	if err != nil {
		f.last, f.hash = nil, [32]byte{}
		return errRead, fmt.Errorf("read %s: %w", f.o.Path, err)
	}
	if f.last != nil && os.SameFile(f.last, fi) && f.last.Size() == fi.Size() &&
		f.last.ModTime().Equal(fi.ModTime()) && f.polls%fullReadEvery != 0 {
		return "", nil
	}
	data, kind, err := readFile(f.o.Path)
	if err != nil {
		f.last, f.hash = nil, [32]byte{}
		return kind, err
	}
	f.last = fi
	h := sha256.Sum256(data)
	if h == f.hash {
		return "", nil // unchanged since the last read: published, or its parse error counted
	}
	f.hash = h
	ms, ignored, err := parseEndpoints(data)
	if err != nil {
		return errParse, fmt.Errorf("parse %s: %w", f.o.Path, err)
	}
	f.recovered("")
	f.publish(ms, ignored, update)
	return "", nil
}

// readFile reads at most MaxFileBytes of path.
func readFile(path string) ([]byte, string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, errRead, fmt.Errorf("read %s: %w", path, err)
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, MaxFileBytes+1))
	if err != nil {
		return nil, errRead, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > MaxFileBytes {
		return nil, errTooLarge, fmt.Errorf("%s is over %d bytes", path, MaxFileBytes)
	}
	return data, "", nil
}

// endpointFile is llm-d's file-discovery document.
type endpointFile struct {
	Endpoints *[]endpoint `json:"endpoints"`
}

// endpoint is one entry of it.
type endpoint struct {
	Name      string            `json:"name"`
	Namespace string            `json:"namespace"`
	Address   string            `json:"address"`
	Port      portValue         `json:"port"`
	Labels    map[string]string `json:"labels"`
}

// portValue is a port given as a number or as a string of digits.
type portValue int

func (p *portValue) UnmarshalJSON(b []byte) error {
	var n json.Number
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		n = json.Number(s)
	} else if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("port %s is not a number", b)
	}
	v, err := strconv.Atoi(string(n))
	if err != nil || v < 1 || v > 65535 {
		return fmt.Errorf("port %s is not 1-65535", b)
	}
	*p = portValue(v)
	return nil
}

// parseEndpoints reads an endpoint file, YAML or JSON, in llm-d's
// file-discovery shape:
//
//	endpoints:
//	- name: decode-0          # optional; default address:port
//	  namespace: tandem       # optional; the member is then namespace/name
//	  address: 10.0.0.7       # an IP address or a host name
//	  port: "8200"            # a number or a string of digits
//	  labels: {llm-d.ai/role: decode}
//
// An endpoint whose RoleLabel is not prefill or decode is not a worker: it
// is returned in ignored. A document without an endpoints list (an empty
// file: a write caught half way), with an endpoint lacking an address or
// a port, or with a member name or URL twice is an error; "endpoints: []"
// is a valid empty list.
func parseEndpoints(data []byte) (members []Member, ignored map[string]ignore, err error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil, errors.New("the file is empty (no endpoints list)")
	}
	var doc endpointFile
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, nil, err
	}
	if doc.Endpoints == nil {
		return nil, nil, errors.New(`no "endpoints" list (write "endpoints: []" for none)`)
	}
	ignored = map[string]ignore{}
	names, urls := map[string]bool{}, map[string]bool{}
	for i, e := range *doc.Endpoints {
		host, err := endpointHost(e.Address)
		if err != nil {
			return nil, nil, fmt.Errorf("endpoint %d (%q): %w", i, e.Name, err)
		}
		if e.Port == 0 {
			return nil, nil, fmt.Errorf("endpoint %d (%q): no port", i, e.Name)
		}
		hp := net.JoinHostPort(host, strconv.Itoa(int(e.Port)))
		name := e.Name
		if name == "" {
			name = hp
		}
		if e.Namespace != "" {
			name = e.Namespace + "/" + name
		}
		if names[name] {
			return nil, nil, fmt.Errorf("endpoint %d: name %q given twice", i, name)
		}
		names[name] = true
		role, ok := roleOf(e.Labels[RoleLabel])
		if !ok {
			ignored[name] = ignore{ignoredRole, fmt.Sprintf("label %s is %q, not prefill or decode", RoleLabel, e.Labels[RoleLabel])}
			continue
		}
		url := "http://" + hp
		if urls[url] {
			return nil, nil, fmt.Errorf("endpoint %d (%q): %s given twice", i, name, hp)
		}
		urls[url] = true
		members = append(members, Member{Name: name, URL: url, Role: role, Ready: true, Labels: maps.Clone(e.Labels)})
	}
	return members, ignored, nil
}

// endpointHost checks an endpoint's address: an IP address (returned in
// its canonical form) or a DNS host name.
func endpointHost(a string) (string, error) {
	if a == "" {
		return "", errors.New("no address")
	}
	if ip, err := netip.ParseAddr(a); err == nil {
		if ip.Zone() != "" {
			return "", fmt.Errorf("address %q has a zone", a)
		}
		return ip.Unmap().String(), nil
	}
	if !validDNSName(a) {
		return "", fmt.Errorf("address %q is neither an IP address nor a host name", a)
	}
	return a, nil
}
