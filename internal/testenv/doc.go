// Package testenv is the tests' environment: it locates the files that
// tests share with the rest of the team (real models, llama.cpp test
// vectors and reference outputs) and skips a test, saying why, when they
// are absent; and it has the one poll-until helper, WaitFor, which bounds a
// hung test (not a timing assertion).
//
// The shared folder is $TANDEM_SHARED when set, else ../shared relative to
// the repository root. Its files are never copied into the repository.
//
// # Inputs and outputs
//
// SharedDir() string: the shared folder, $TANDEM_SHARED when set, else
// ../shared relative to the repository root (found from this source file's
// path), or "" when neither is a directory. Shared(t, rel) string: the path of
// rel inside it.
//
// # Invariants
//
// A missing folder or file skips the test (t.Skipf) with a message naming what
// is missing and how to provide it; it never fails the test. When
// $TANDEM_SHARED is set but is not a directory, there is no fallback to
// ../shared. The shared files are never copied into the repository.
//
// WaitFor(t, limit, what, cond) polls cond every few milliseconds and fails
// the test naming what it waited for once limit has passed; inside a
// testing/synctest bubble it sleeps on the bubble's clock.
//
// # Limits
//
// None of its own; SharedDir and Shared only stat paths.
package testenv
