// Package inspect is the `tandem inspect` client: it fetches a router's
// GET /debug/cluster document (the router's request records and every
// worker's /debug/rooms) and prints it as one table per process, or as
// indented JSON, and reports rooms that are past their deadline.
//
// The schema is package debugdoc's; the router's entry also lists workers that
// are out, draining or whose circuit breaker is not closed. The tables have
// one row per room (room, request, state and phase, age, peer, bytes, FLAG).
// Inspect returns an error wrapping ErrOverdue when a room that has not ended is
// past its deadline by more than the worker watchdog's grace (1 s), so tandem
// inspect exits 1. A document with one odd process still prints the others.
//
// With a request id (tandem inspect URL REQUEST_ID; a room id or trace id
// works too) InspectRequest follows that one request: its trace id, the
// router's records of it (one per attempt) and its rooms on the workers,
// each with state, phases and history; a decode room still generating reads
// decoding/generating. No room of it anywhere is an error wrapping
// ErrNotFound.
package inspect
