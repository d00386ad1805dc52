package discovery

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// recorder keeps every snapshot a source delivers.
type recorder struct {
	mu    sync.Mutex
	snaps []Snapshot
}

func (r *recorder) update(s Snapshot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.snaps = append(r.snaps, s)
}

// count is how many snapshots were delivered.
func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.snaps)
}

// last is the latest snapshot; the test fails when there is none.
func (r *recorder) last(t *testing.T) Snapshot {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.snaps) == 0 {
		t.Fatal("no snapshot delivered")
	}
	return r.snaps[len(r.snaps)-1]
}

// run starts src.Run under a context that stop cancels; stop returns
// Run's error.
func run(t *testing.T, src Source) (rec *recorder, stop func() error) {
	t.Helper()
	rec = &recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, rec.update) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { stop() })
	return rec, stop
}

// logRecorder is a slog handler that keeps every record's message and
// attributes as one line.
type logRecorder struct {
	mu    *sync.Mutex
	lines *[]string
	attrs []slog.Attr
}

func newLogRecorder() *logRecorder { return &logRecorder{mu: &sync.Mutex{}, lines: &[]string{}} }

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	for _, a := range l.attrs {
		b.WriteString(" " + a.String())
	}
	r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
	l.mu.Lock()
	defer l.mu.Unlock()
	*l.lines = append(*l.lines, b.String())
	return nil
}

func (l *logRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	return &logRecorder{mu: l.mu, lines: l.lines, attrs: append(slices.Clone(l.attrs), as...)}
}

func (l *logRecorder) WithGroup(string) slog.Handler { return l }

// matching returns the lines that contain every one of subs.
func (l *logRecorder) matching(subs ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range *l.lines {
		ok := true
		for _, s := range subs {
			ok = ok && strings.Contains(line, s)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

// testCommon returns a Common with a fresh registry and a log recorder.
func testCommon() (Common, *prometheus.Registry, *logRecorder) {
	reg := prometheus.NewPedanticRegistry()
	lr := newLogRecorder()
	return Common{Logger: slog.New(lr), Registerer: reg}, reg, lr
}

// counter reads one series of a source's metrics.
func counter(t *testing.T, s Source, metric string, labels ...string) float64 {
	t.Helper()
	var c *core
	switch s := s.(type) {
	case *k8sSource:
		c = s.core
	case *dnsSource:
		c = s.core
	case *fileSource:
		c = s.core
	case *staticSource:
		c = s.core
	default:
		t.Fatalf("unknown source %T", s)
	}
	labels = append([]string{c.kind}, labels...)
	switch metric {
	case "changes":
		return testutil.ToFloat64(c.met.changes.WithLabelValues(labels...))
	case "errors":
		return testutil.ToFloat64(c.met.errors.WithLabelValues(labels...))
	case "ignored":
		return testutil.ToFloat64(c.met.ignored.WithLabelValues(labels...))
	case "members":
		return testutil.ToFloat64(c.met.members.WithLabelValues(labels...))
	}
	t.Fatalf("unknown metric %s", metric)
	return 0
}

// brief renders members as "name url role ready reason" lines, for
// comparisons that fail readably.
func brief(ms []Member) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		s := m.Name + " " + m.URL + " " + string(m.Role)
		if m.Ready {
			s += " ready"
		} else {
			s += " unready(" + m.Reason + ")"
		}
		out = append(out, s)
	}
	return out
}

// wantMembers fails the test unless ms, rendered by brief, are want.
func wantMembers(t *testing.T, what string, ms []Member, want ...string) {
	t.Helper()
	got := brief(ms)
	if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
		t.Fatalf("%s:\ngot  %q\nwant %q", what, got, want)
	}
}
