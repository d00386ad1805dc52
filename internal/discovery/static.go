package discovery

import (
	"context"
	"fmt"
	"net/url"
	"strings"
)

// StaticOptions configures a static source: today's --prefill and
// --decode lists.
type StaticOptions struct {
	Common
	// Prefill and Decode are worker base URLs ("http://host:port"; a bare
	// "host:port" means http). At least one of each; no URL twice.
	Prefill, Decode []string
}

// staticSource delivers its lists once; they never change.
type staticSource struct {
	*core
	members []Member
}

// NewStatic returns a source of fixed workers, every one Ready (the
// router's health checks decide whether it takes work).
func NewStatic(o StaticOptions) (Source, error) {
	seen := map[string]string{}
	var ms []Member
	for _, r := range []struct {
		flag string
		role Role
		urls []string
	}{{"--prefill", RolePrefill, o.Prefill}, {"--decode", RoleDecode, o.Decode}} {
		if len(r.urls) == 0 {
			return nil, fmt.Errorf("discovery static: no %s worker given; give at least one URL (or another --discovery)", r.flag)
		}
		for _, raw := range r.urls {
			u, err := baseURL(raw)
			if err != nil {
				return nil, fmt.Errorf("discovery static: %s %q: %w", r.flag, raw, err)
			}
			if was, ok := seen[u]; ok {
				return nil, fmt.Errorf("discovery static: %s is given twice (%s and %s)", u, was, r.flag)
			}
			seen[u] = r.flag
			ms = append(ms, Member{Name: u, URL: u, Role: r.role, Ready: true})
		}
	}
	met, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	spec := fmt.Sprintf("static prefill=%d decode=%d", len(o.Prefill), len(o.Decode))
	return &staticSource{core: newCore(KindStatic, spec, o.Logger, met), members: ms}, nil
}

// Run delivers the lists, then waits for ctx.
func (s *staticSource) Run(ctx context.Context, update func(Snapshot)) error {
	if err := s.start(); err != nil {
		return err
	}
	s.publish(s.members, nil, update)
	<-ctx.Done()
	return nil
}

// Status returns the lists.
func (s *staticSource) Status() Status { return s.status() }

// baseURL normalizes a worker base URL as the router always has: a bare
// host:port gets http://, a trailing slash goes; anything but
// http(s)://host[:port][/path] is an error.
func baseURL(raw string) (string, error) {
	s := strings.TrimSpace(raw)
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("not a URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("not an http(s)://host:port base URL")
	}
	return strings.TrimRight(u.String(), "/"), nil
}
