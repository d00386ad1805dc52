package router

import (
	"sync"
	"time"
)

// Refusal logs (a 401 for a missing or wrong API key) cost the router
// nothing to trigger, so they are bounded: each line carries at most
// refusalPathBytes of the path (and its length), and at most
// refusalLogBurst lines are written per refusalLogEvery; the first line
// written after some were held back says how many.
const (
	refusalPathBytes = 128
	refusalLogBurst  = 10
	refusalLogEvery  = 10 * time.Second
)

// logLimit lets at most burst lines through per interval (fixed windows)
// and counts those it holds back. Hand-written instead of
// golang.org/x/time/rate: a token bucket would be a new dependency and
// still not count what it drops, which is the part the log needs.
type logLimit struct {
	burst int
	every time.Duration

	mu     sync.Mutex
	window time.Time // start of the current window
	n      int       // lines let through in it
	held   int       // lines held back since the last one let through
}

// allow reports whether a line may be written now and, when it may, how
// many were held back since the last one written.
func (l *logLimit) allow() (ok bool, held int) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.window) >= l.every {
		l.window, l.n = now, 0
	}
	if l.n >= l.burst {
		l.held++
		return false, 0
	}
	l.n++
	held, l.held = l.held, 0
	return true, held
}
