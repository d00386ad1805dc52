package router_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tandem/internal/discovery"
	"tandem/internal/pd/debugdoc"
	"tandem/internal/router"
	"tandem/internal/testenv"
)

// endpointFile writes an llm-d endpoint list of the fakes to path.
func endpointFile(t *testing.T, path string, fakes ...*fake) {
	t.Helper()
	var b strings.Builder
	b.WriteString("endpoints:\n")
	for _, f := range fakes {
		host, port, _ := strings.Cut(strings.TrimPrefix(f.url(), "http://"), ":")
		fmt.Fprintf(&b, "- name: %s-%s\n  address: %s\n  port: %q\n  labels: {llm-d.ai/role: %s}\n", f.role, port, host, port, f.role)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil { // a save by rename, as editors and ConfigMaps do
		t.Fatal(err)
	}
}

// TestFileDiscoveryScales: a router whose workers come from an endpoint
// file follows it while it runs: a decode worker added to the file takes
// legs within a second of the write (file poll plus one probe, not the
// next health round), one removed gets no new leg, and /debug/rooms shows
// each worker's source, name and readiness and the source's status.
func TestFileDiscoveryScales(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d1 := newFake(t, "decode", stream(strings.SplitAfter(chatStream, "\n\n")...))
	d2 := newFake(t, "decode", stream(strings.SplitAfter(chatStream, "\n\n")...))
	path := filepath.Join(t.TempDir(), "workers.yaml")
	endpointFile(t, path, p, d1)
	src, err := discovery.NewFile(discovery.FileOptions{Common: discovery.Common{Logger: slog.New(slog.DiscardHandler)}, Path: path, Interval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, nil, nil, func(o *router.Options) {
		o.Source = src
		o.HealthInterval = time.Hour // only the join probe may put a worker in
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.rt.RunDiscovery(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunDiscovery: %v", err)
		}
	})
	select {
	case <-c.rt.Synced():
	case <-time.After(10 * time.Second):
		t.Fatal("the router did not sync with the endpoint file")
	}
	body := `{"messages":[{"role":"user","content":"hi"}],"stream":true,"max_tokens":5}`
	served := func(f *fake) bool {
		select {
		case <-f.got:
			return true
		default:
			return false
		}
	}
	testenv.WaitFor(t, 10*time.Second, "the first workers in", func() bool {
		st, b := c.post(t, "/v1/chat/completions", body)
		if st != http.StatusOK {
			t.Logf("%d %s", st, b)
		}
		return st == http.StatusOK
	})
	for served(d1) || served(p) {
	}

	// Scale out: d2 joins; d1 leaves.
	wrote := time.Now()
	endpointFile(t, path, p, d1, d2)
	var took time.Duration
	testenv.WaitFor(t, 10*time.Second, "d2 to take a leg", func() bool {
		if st, b := c.post(t, "/v1/chat/completions", body); st != http.StatusOK {
			t.Fatalf("a request while d2 joins: %d %s", st, b)
		}
		if served(d2) {
			took = time.Since(wrote)
			return true
		}
		return false
	})
	t.Logf("d2 took its first leg %s after the file listed it", took)
	if took > time.Second {
		t.Errorf("d2 took its first leg %s after it was listed, want within 1s", took)
	}
	endpointFile(t, path, p, d2)
	testenv.WaitFor(t, 10*time.Second, "d1 to leave", func() bool {
		_, raw := c.get(t, "/debug/rooms")
		var doc debugdoc.Rooms
		json.Unmarshal([]byte(raw), &doc)
		for _, w := range doc.Workers {
			if w.URL == d1.url() {
				return false
			}
		}
		return len(doc.Workers) == 2
	})
	for served(d1) {
	}
	for range 6 {
		if st, b := c.post(t, "/v1/chat/completions", body); st != http.StatusOK {
			t.Fatalf("a request after d1 left: %d %s", st, b)
		}
	}
	if served(d1) {
		t.Error("d1 got a leg after it left the file")
	}

	_, raw := c.get(t, "/debug/rooms")
	var doc debugdoc.Rooms
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		t.Fatal(err)
	}
	if m := doc.Membership; m == nil || m.Source != "file" || !m.Synced || m.Changes < 4 {
		t.Errorf("/debug/rooms membership %+v, want file, synced, 4 changes at least", doc.Membership)
	}
	for _, w := range doc.Workers {
		if w.Source != "file" || !w.Listed || w.Since == "" || w.Name == "" || w.URL == d1.url() {
			t.Errorf("/debug/rooms worker %+v: want a listed file worker with name and since, d1 gone", w)
		}
	}
}
