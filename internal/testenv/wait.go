package testenv

import (
	"testing"
	"time"
)

// WaitFor polls cond every few milliseconds until it holds, and fails the
// test naming what it waited for once limit has passed. The limit bounds a
// hung test; it is not a timing assertion, so give it room (a loaded CI
// machine is slow). Inside a testing/synctest bubble the polls sleep on
// the bubble's clock.
func WaitFor(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for: %s", limit, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
