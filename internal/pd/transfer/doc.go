// Package transfer carries PD frames between prefill and decode workers
// over TCP: connections, the authenticated handshake, heartbeats, peer
// liveness and the multiplexing of every room between two workers onto
// one connection. It is the transport edge: it owns goroutines and
// sockets; the frame format is internal/pd/kvwire and the protocol's rules
// are the room core's.
//
// # Place in the data flow
//
// Decode workers dial prefill workers: a decode worker's first Send to a
// prefill address (its HELLO for a room) dials, authenticates and checks
// compatibility; the prefill worker answers on the same connection
// (Config.AcceptOnly: it never dials). A decode worker needs no listener
// (Config.DialOnly: it never listens, so it offers strangers no port). One connection per (decode,
// prefill) pair carries the frames of all their rooms in both directions.
// The worker edge implements Handler: control frames arrive in Frame, KV
// data is read straight into the page KVDest names (no copy) and
// confirmed by KVDone with its checksum verdict, PeerUp carries each
// heartbeat's load report, and PeerLost tells the edge to fail the rooms
// of a peer that is gone (room.EventPeerLost). SendKV seals page memory
// from the caller's slice record by record into a small send buffer.
//
// # Shared memory
//
// Between two nodes on one host (Config.KVTransport), KV data bytes go
// through a shared-memory ring (internal/pd/shm) that the receiver
// creates and offers inside the sealed session (SHM_OFFER, SHM_REPLY);
// a KV frame becomes a sealed KV_SHM frame naming its slot, in order
// with every other frame, and the Handler sees the same KVDest/KVDone
// calls. A sender whose KV cache lives in a source region
// (Config.ShmSource: a prefill worker's) also offers that region
// (SHM_SOURCE), which the receiver maps read-only; a page sent with
// SendKVHeld from inside it then goes as KV_SRC, a data-less ring slot
// naming where the bytes lie, and the receiver copies them once, straight
// into the KVDest page. The sender keeps the page unchanged (the
// caller's release is not called) until the receiver released the slot;
// if the connection ends first it revokes the ring before releasing, so
// a copy still in progress fails (KVDone false) instead of taking bytes
// of a page reused meanwhile. shm.go has the details; the README the
// design.
//
// # Security
//
// The handshake proves the cluster token both ways (HMAC-SHA256 over the
// whole transcript) and derives per-connection, per-direction AES-256-GCM
// keys from the token and both fresh nonces (HKDF-SHA256). Every frame
// after it is sealed (seal.go, kvwire.SealedBytes): confidential, and a
// changed, replayed, dropped or reordered frame fails to open and closes
// the connection (rejected_auth_tag). Before authentication a stranger
// is bounded: any non-auth frame is refused at its header (nothing large
// is allocated; auth payloads are at most kvwire.AuthPayloadBytesMax),
// the whole handshake must end within HandshakeTimeout (2s) of accept,
// and handshakesMax (64) pre-auth slots are shared by eviction (the
// oldest of the source IP holding the most, with handshakesPerHostMax 16
// per IP), so a flood cannot lock out a peer that dials during it.
// Header fields (type, room id, length) and frame timing stay visible on
// the wire; there is no forward secrecy (a token holder who recorded a
// handshake can derive its keys).
//
// # Liveness
//
// Both sides send a heartbeat every HeartbeatInterval. A peer is lost when
// nothing (no frame, no KV data chunk) has been heard from it for the
// peer timeout, twice the longer of the two sides' intervals (they
// exchange them in the handshake): on a live connection that is silence;
// after a dropped connection it means the dialer's redials (immediate,
// then every quarter interval) or the peer's own redial did not succeed
// in time. A reconnect that finds a new incarnation of the peer (a
// restarted process at the same address) reports the old one lost
// (ErrPeerRestarted) before PeerUp for the new one. After PeerLost the
// peer is forgotten; the next Send dials afresh.
//
// # Invariants
//
//   - Foreign or malformed traffic (bad magic, version, type, length,
//     checksum, a frame before authentication, a bad MAC, a bad payload,
//     a sealed frame that fails to open) is counted (Counters), logged at
//     most logLimiterBurst times a second, and closes its connection; it
//     never panics, never allocates beyond kvwire.AuthPayloadBytesMax
//     before authentication (nor beyond the type's payload limit after),
//     and never affects other connections (beyond evicting the oldest
//     pre-auth connection when the slots are full).
//   - Frames sent one after another to a peer arrive in that order; each
//     connection has one reader, which calls the Handler in arrival order.
//   - Once PeerLost is called for a connection's peer, no KV data from that
//     connection lands in a KVDest slice, so failed rooms' pages can be
//     reused.
//   - Every goroutine (accept loop in Serve, one per handshake, one per
//     peer, one reader per connection) is owned by the Transport and has
//     exited when Close (or Serve) returns; Close interrupts dials and
//     handshakes in progress.
//   - Memory is bounded: peersMax peers, handshakesMax pre-auth
//     handshakes, SendQueueMax waiting senders per connection, and per
//     connection one control payload buffer (≤ 64 KiB + a tag), one KV
//     record buffer (4 records of 64 KiB + a tag, read at once) and one
//     send buffer (≤ about 128 KiB).
//   - No GCM nonce repeats under a key: each direction's nonce is its
//     record counter, keys are fresh per connection, and a direction that
//     reaches kvwire.SealRecordsMax records closes its connection.
//
// Writes are done by the sending goroutine under a per-connection lock
// with a per-write deadline, not by a writer goroutine: see conn.
//
// # Fault injection
//
// Config.Faults (nil in production, set only from code) is consulted
// before every frame written and after every header read: drop, delay or
// stall, corrupt, cut the connection mid-frame, or fail a page write.
//
// # Tests
//
// e2e_test.go runs two transports on 127.0.0.1: the handshake, a wrong
// token refused and counted on both sides, a shape mismatch naming the
// field, a whole HELLO/ALLOC/KV/FIRST_TOKEN/DONE/DONE_ACK flow landing
// KV bytes in the KVDest pages, a corrupt KV frame closing the connection,
// PeerLost after either side closes, foreign and malformed bytes from raw
// connections, reconnection after the listener restarts on the same
// address, and per-room order with many concurrent rooms. preauth_test.go
// checks what a stranger can do before authenticating (allocation, the
// handshake budget, slot floods from one or many hosts), DialOnly and
// ErrFrame; wire_test.go puts a proxy on the path (nothing readable;
// replayed, reordered and tampered frames refused) and refuses version 1
// peers; seal_test.go checks nonces and the record layer. synctest_test.go
// checks the timer-driven behaviour exactly on net.Pipe inside synctest
// bubbles: PeerLost at exactly the timeout of silence and within two
// intervals of a close, heartbeats both ways, redial within the grace,
// restart detection, the send queue bound, Close interrupting a stalled
// handshake, the handshake timeout, and the fault actions;
// source_synctest_test.go the same for KV_SRC's release after decode's
// copy and its revoke before release. Run them with -race.
package transfer
