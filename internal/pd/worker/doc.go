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
// memory (KV_SRC, package transfer); the driver releases a frame it
// drops. It then sends FIRST_TOKEN and DONE after the last frame is
// written, and answers the leg when DONE_ACK arrives. On models with
// sliding-window layers it ships every page of the global layers and, of
// each windowed layer, only the pages of the prompt's last window (from
// kvcache.Config.FirstNeeded on). On hybrid models (recurrent state in the
// linear-attention layers; KV pages only for the full-attention ones) the
// sink is also the engine's StateSink: the prompt's final state, copied
// once, follows the last page as state frames (kvwire.KindState).
//
// A decode worker gets the router's leg with the prefill worker's transfer
// address, says HELLO, asks its engine for pages (engine.Import: global
// pages for the whole prompt, window pages for its last window), sends
// ALLOC (the prompt's page ordinals; cachePages maps a frame's ordinal to
// its layer group's page and drops a windowed layer's ordinal before the
// window as bad coordinates), receives KV frames straight into those
// pages (on a hybrid model, the state frames into a state buffer allocated
// with the pages), and on DONE resumes the sequence in its continuous batch
// with the first token (and that state: Handle.ResumeState); the leg then streams like any colocated request, one token
// per Next (server.SplitUpdate) so a reader that fell behind still sends
// one chunk per step.
//
// Constrained requests: each leg compiles the grammar from its own copy of
// the body (the server does); the prefill engine samples the first token
// under it (min_tokens clamped to that one token) and the decode engine
// replays that token into its matcher and skips one sampler draw, so greedy
// and seeded output equals colocated token for token.
//
// Both streams implement server.LegTimer: once a room succeeded the
// prefill stream reports queue_ms (leg arrival to the engine admitting the
// prompt), prefill_ms (admission to the first token) and transfer_ms (first
// token to DONE_ACK), the decode stream first_decode_ms (Resume to its first
// token out); the server sends them to the router as X-Tandem-Timing.
//
// A decode worker also serves local legs (local.go): the router sends a
// short prompt whole, and the worker runs prefill and decode in its own
// continuous batch, as a colocated server would. Room ids stay
// single-use there too: one seen within leg.Lifetime+leg.MaxSkew gets 409;
// a prefill worker, or a local leg naming a prefill worker, gets 400.
//
// # Shared memory
//
// Config.Transfer's KVTransport, ShmRegionBytes and ShmSource pass through
// to package transfer: with a peer on the same host, decode copies each KV
// page straight out of prefill's cache (KV_SRC; cmd/tandem puts a prefill
// worker's KV cache in a source region, engine.Config.KVMemory), and the
// driver sees the same frames and KVDest/KVDone calls.
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
//
//   - The driver's out-calls (engine submit, a frame handed to a lane's
//     channel, a leg answered) never block.
//   - A full send queue (transfer.ErrSendQueueFull) or a frame the
//     transport refuses (transfer.ErrFrame) is reported as local
//     (driver.ErrLocal): it fails one room, not the peer.
//   - Lane goroutines exist only while the driver holds rooms or frames for
//     the peer (PeerIdle ends them); Close is idempotent and safe to call
//     concurrently, and returns after they have exited.
//   - /metrics copies only the live rooms' states under the lock and
//     /debug/rooms a flat copy (histories are shared, append-only); both
//     format after releasing it, so a scrape does not hold up the engine's
//     layer callbacks.
//   - A watchdog fails rooms more than room.WatchdogGrace past their
//     deadline every second, with reason deadline; in a healthy worker the
//     timer gets there first and the watchdog never fires.
//
// # Limits
//
// DefaultRoomConfig gives the room deadlines (see its doc for the chained
// worst case) and RoomsMax 4096, TombstonesMax 8192; the send queues are
// driver.DefaultLimits unless Config.Limits says otherwise.
package worker
