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
