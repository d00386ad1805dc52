// Package invariant is how Tandem stops on a broken invariant: a bug in
// Tandem, such as accounting that no longer adds up, a caller breaking an
// interface's contract, or a kernel called with shapes its caller promised
// it would not pass. Failf panics with an *Error, which nothing recovers
// (the HTTP server's recovery of handler panics passes it on), so the
// process stops loudly instead of going on with corrupt state. Input from
// a peer, a client or a model file never reaches here: it gets an error.
//
// Failf is the one way Tandem code panics of its own accord; the only
// other panics re-raise one caught elsewhere (a kernel worker's, on its
// caller's goroutine; net/http's ErrAbortHandler, which the HTTP server
// passes on).
//
// Checks are always on, in production too; they are cheap by design.
package invariant
