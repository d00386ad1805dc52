// Package driver is the deterministic edge of a disaggregated worker: the
// part between the pure room core (package room) and the I/O (package
// worker in the binaries, package sim on a virtual clock). It is to the worker what etcd raft's RawNode is to its
// node goroutine: everything that decides, none of what waits.
//
// A Driver owns a room.Machine and carries out the core's Ready itself:
// it turns frames into events (decoding payloads), effects into frames
// (encoding payloads), accounts for KV frames (coordinates, duplicates, the
// byte counts DONE is checked against), quarantines decode pages while a KV
// write into them is in flight, keeps the per-peer send lanes with their
// byte budget, and keeps the bookkeeping of each room's HTTP leg. It has no
// goroutines, no clock and no sockets: every input carries the time
// (room.Instant, as room.Machine.Step does) and every output goes through
// one of three small interfaces the adapter implements (Engine, Wire,
// Legs); a decode room's KV lands in the Pages the engine admitted it with.
// Driver, Config, Engine and Legs take the adapter's leg record as a type
// parameter, which the driver only stores, compares and hands back.
//
// # What calls in
//
// The adapter (the production worker, or the simulator) calls:
//
//   - Request and ClientAbort for the router's HTTP legs;
//   - Frame, KVDest and KVDone for what the transport received;
//   - PeerAlive for each heartbeat and PeerLost when the transport lost a
//     peer;
//   - Admitted, KVReady, ComputeDone and EngineError for the engine's
//     progress;
//   - Sent when a frame handed to Wire.Send has been written (or failed);
//   - Tick when NextDeadline passed, Watchdog periodically (it fails rooms
//     more than room.WatchdogGrace past their deadline), Shutdown once;
//   - the read-only queries (Live, Room, Rooms, Counters, Peers, ...).
//
// # What it calls out
//
//   - Engine: start a prompt (prefill), reserve pages (decode), resume a
//     sequence, cancel one. Calls return quickly: the engine only queues.
//   - Wire: hand one frame to a peer's lane (control or KV); exactly one
//     Sent call reports its end later. The driver keeps at most one frame
//     outstanding per peer and lane, so the adapter needs no queue of its
//     own; PeerIdle says the driver holds nothing more for a peer.
//   - Legs: answer (prefill success) or fail a room's HTTP leg.
//
// Out-calls are made while the caller's call into the driver runs, so they
// must not call back into the driver (the driver is not re-entrant): hand
// the work to a goroutine, or record it and act after the call returns.
//
// A call that breaks its contract is a bug in the adapter, not bad input,
// and fails loudly (invariant.Failf): a Sent for a lane with no frame
// outstanding, a KVDone for a frame no KVDest buffer is out for.
// CheckAccounting checks the driver's own state (lanes, byte accounting,
// peers, records) and CheckInvariants that and the room core's; the
// simulator runs them after every call and at every sweep.
//
// # Locking
//
// A Driver is not safe for concurrent use. The worker serializes every call
// with one mutex (the one its engine callbacks, transport handlers, timer,
// watchdog and HTTP legs all take); the simulator calls it from its single
// event loop. KVDest returns a slice the transport fills after the lock is
// released; the page stays quarantined (never reused or freed) until the
// matching KVDone.
//
// # Progress is counted on the wire
//
// KV frames a prefill engine produced (KVReady) wait in their room's KV
// queue; the room's progress (room.EventKVSent) is reported when Sent says a
// frame is on the wire, not when it is queued, so a transfer that keeps
// moving never hits ProgressTimeout however slow the link. The engine's end
// (ComputeDone) is held back until the room's last KV frame is on the wire,
// and only then stepped, so the core's DONE carries every byte and goes out
// after them (see room.EventComputeDone). Written is not yet received:
// while a prefill room waits for DONE_ACK, PeerAlive (each heartbeat from
// the peer) extends its deadline, up to room.DoneAckWaitMax progress
// timeouts after DONE.
//
// # Send lanes
//
// Each peer has one control lane (FIFO: a room's control frames keep their
// order) and one KV lane, which serves the rooms' KV queues in turn. A
// control frame never waits behind KV (only behind the one frame of another
// room being written). KV queued for a room that has ended is dropped, not
// sent. Every queued byte counts against one worker-wide budget
// (Limits.QueueBytesMax) and a per-peer share derived from it; a room whose
// frame would pass either fails with room.ReasonSendFailed, as does a room
// whose frame the wire refused locally (IsLocal); any other send error
// means the peer is unreachable: its rooms fail and its queues are
// dropped. A KV frame's Release is called exactly once: by the driver for
// every frame it drops, by the Wire for a frame handed to Send. A peer's
// state is removed as soon as it has no room, nothing queued and nothing
// outstanding (Wire.PeerIdle).
//
// # Limits
//
// LimitsFor derives both byte limits from one budget (each peer gets
// budget/PeerShare; DefaultLimits uses DefaultQueueBytesMax) and refuses a
// budget in which a peer could not hold one largest frame (QueueBytesMin).
//
// # Decode pages
//
// An ended decode room's pages go back to the engine (Engine.Cancel) only
// after its last in-flight KV write (KVDone), and its record stays until
// then.
//
// # Recurrent state
//
// For a model with recurrent state (Config.StateBytes > 0, the shape's
// StateBytes) the prefill engine hands the prompt's final state to KVReady
// after the prompt's last page, as KV frames of kind kvwire.KindState
// (layer 0, ordinal i, PageBytes each, the last one the rest): they wait in
// the same KV queue, count as progress when written, hold ComputeDone back
// like pages, and their bytes count towards DONE's Bytes; DONE adds their
// total (StateBytes) and the CRC-32C of the state in order (StateSum). The
// decode engine admits a room with its pages and a state buffer of
// StateBytes (Admitted; another size breaks the contract); KVDest points a
// state frame at its piece of that buffer, with the same coordinate,
// duplicate and size checks and the same quarantine as a page, and DONE's
// checksum is checked against the buffer once every piece is stored
// (room.Event.StateBad). The room core decides: decode resumes only on the
// whole state, prefill fails a compute that ended without it.
package driver
