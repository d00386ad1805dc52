package drivertest

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Failures runs suite (one of the suites above, bound to its host) against
// a stand-in for t that records what the suite reports instead of failing
// t, and returns those reports in order: each Error and Fatal, a Fatal
// ending the suite there as it ends a test. A Skip is recorded too (a
// skipped suite has checked nothing). Everything else (Helper, Cleanup,
// Logf, TempDir) goes to t.
//
// It is for tests of the suite itself: an implementation wrapped in a
// decorator that breaches its contract must make the suite report the
// breach, and the same run without the decorator must report nothing.
func Failures(t testing.TB, suite func(testing.TB)) []string {
	t.Helper()
	r := &recordingTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		suite(r)
	}()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.failures...)
}

// recordingTB is a testing.TB whose failures are recorded, not reported.
type recordingTB struct {
	testing.TB
	mu       sync.Mutex
	failures []string
}

func (r *recordingTB) record(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, s)
}

func (r *recordingTB) Error(args ...any)                 { r.record(fmt.Sprint(args...)) }
func (r *recordingTB) Errorf(format string, args ...any) { r.record(fmt.Sprintf(format, args...)) }
func (r *recordingTB) Fail()                             { r.record("Fail") }
func (r *recordingTB) Fatal(args ...any)                 { r.record(fmt.Sprint(args...)); runtime.Goexit() }
func (r *recordingTB) FailNow()                          { r.record("FailNow"); runtime.Goexit() }
func (r *recordingTB) Skip(args ...any) {
	r.record("skipped: " + fmt.Sprint(args...))
	runtime.Goexit()
}
func (r *recordingTB) SkipNow() { r.record("skipped"); runtime.Goexit() }

func (r *recordingTB) Fatalf(format string, args ...any) {
	r.record(fmt.Sprintf(format, args...))
	runtime.Goexit()
}

func (r *recordingTB) Skipf(format string, args ...any) {
	r.record("skipped: " + fmt.Sprintf(format, args...))
	runtime.Goexit()
}

func (r *recordingTB) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.failures) > 0
}

func (r *recordingTB) Skipped() bool { return false }

// CheckBreach is a test of the suite itself, as subtest name of t: run
// runs a suite against tb, against an implementation wrapped in a
// decorator that breaches its contract when breach is set. Run without
// the breach (the control), the suite must report nothing; with it, at
// least one of its failures must contain want.
func CheckBreach(t *testing.T, name, want string, run func(t *testing.T, tb testing.TB, breach bool)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		if got := Failures(t, func(tb testing.TB) { run(t, tb, false) }); len(got) != 0 {
			t.Fatalf("control (no breach): the suite reported %q, want nothing", got)
		}
		got := Failures(t, func(tb testing.TB) { run(t, tb, true) })
		if !slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, want) }) {
			t.Fatalf("breach %q: the suite reported %q, want a failure containing %q", name, got, want)
		}
		t.Logf("breach %q: the suite reported %d failures, the first %q", name, len(got), got[0])
	})
}
