// Package httpx is the HTTP plumbing the router and the workers' API share:
// the server's timeouts, a status-remembering ResponseWriter for metrics,
// JSON and OpenAI-error answers, and reading a request body within a size
// and a time limit.
//
// # API and invariants
//
// Server(addr, handler, log) sets the header, idle and header-size limits and
// no overall read or write timeout, so streams are not cut. BodyDeadline(w, r,
// timeout) goes at the top of a handler chain; ReadBody(w, r, maxBytes,
// timeout) reads a body within both limits (413 past the size, 408
// body_timeout past the time). Recorder (Status, StatusOr200) remembers the
// first status written, for metrics and panic handlers; CheckMethod answers
// 405; WriteJSON and WriteError write JSON and OpenAI-error answers. The
// package holds no state and starts nothing.
//
// A body that stalls never holds a connection past its deadline: BodyDeadline
// sets it for every request with a body, and ReadBody lifts it only once the
// whole body is in (a deadline left on the connection would end a long stream;
// one lifted after a failed read would let net/http wait forever to discard
// the rest).
package httpx
