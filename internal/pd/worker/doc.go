// Package worker is the edge of a disaggregated worker: it drives the
// pure room core (package room) with real inputs — the router's HTTP legs,
// frames from the transport, the engine's progress, a timer — and carries
// out the core's effects: frames to send, engine requests to start, resume
// or cancel, HTTP legs to answer, resources to free.
//
// # Data flow
//
// A prefill worker gets the router's leg (server → Worker.SubmitLeg, the
// server.Legs), waits for decode's HELLO and ALLOC, and runs the prompt in
// its engine with a KV sink that, as each layer of a step is computed,
// hands that layer's finished pages to the driver as KV frames whose data
// is the cache's own page memory: the sink takes a reference on each page
// (engine.ReleasePage gives it back) until both of its frames are
// released, once written, or once decode copied them out of this worker's
// memory (KV_SRC, package transfer). It then sends FIRST_TOKEN and DONE
// and answers the leg when DONE_ACK arrives.
//
// A decode worker gets the router's leg with the prefill worker's transfer
// address, says HELLO, asks its engine for pages (engine.Import), sends ALLOC,
// receives KV frames straight into those pages, and on DONE resumes the
// sequence in its continuous batch with the first token; the leg then streams
// like any colocated request.
//
// A decode worker also serves local legs (local.go): the router sends a
// short prompt whole, and the worker runs prefill and decode in its own
// continuous batch, as a colocated server would.
//
// # HTTP answers
//
// The room core and the driver speak in room.Reason; this package is the
// one place a reason becomes the HTTP status the router's leg is answered
// with (*Error, whose status httpStatus picks by the room's error
// classes): a deadline 504, a duplicate room id 409, a worker full or
// stopping 503, a request without what its role needs 400, the client
// gone 499, any other failure 502; a request for a room that already
// failed here 504 after a deadline, else 502.
//
// # Concurrency
//
// Everything that decides lives in package driver, which is deterministic
// and not safe for concurrent use; one mutex (Worker.mu) serializes every
// call into it from HTTP handlers, transport readers, engine callbacks, the
// lane goroutines, the timer and the watchdog. The driver hands frames to
// one goroutine per peer and lane (control, KV) through a channel of
// capacity one (it keeps at most one frame outstanding per lane), and each
// goroutine reports the frame back with Driver.Sent once the transport wrote
// it. KV pages on the decode side are written by the transport's reader
// goroutine only while the room accepts KV; a room that fails while a write
// is in flight releases its pages only after that write completes ("pages
// of an aborted transfer are not reused until the writer stopped").
package worker
