// Package invariant is the one place Tandem panics: a broken invariant (a
// bug in Tandem, such as accounting that no longer adds up or a kernel
// called with shapes its caller promised it would not pass) stops the
// process loudly instead of corrupting state. Input from a peer, a client or
// a model file never reaches here: it gets an error.
//
// Checks are always on, in production too; they are cheap by design.
package invariant

import "fmt"

// Error is the value Failf panics with, so a recover can tell a broken
// invariant from other panics.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

// Failf panics with a broken-invariant Error. pkg names the package whose
// invariant broke.
func Failf(pkg, format string, args ...any) {
	panic(&Error{Msg: pkg + ": broken invariant: " + fmt.Sprintf(format, args...)})
}

// Check calls Failf when cond is false.
func Check(cond bool, pkg, format string, args ...any) {
	if !cond {
		Failf(pkg, format, args...)
	}
}
