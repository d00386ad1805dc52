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
// State frames (kvwire.KindState: a hybrid model's recurrent state after
// a room's pages) are KV frames like any other here, on every path: TCP,
// KV_SHM and, were their data in the source region, KV_SRC.
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
// of a page reused meanwhile.
//
// The design, point by point (shm.go has the code's view):
//
//   - Who creates the region: the KV receiver, on each new connection before
//     its reader starts, when it wants shared memory with the peer
//     (Config.KVTransport auto: the peer's TCP address is loopback or the
//     connection's own local address; shm: any peer; tcp: never). An
//     AcceptOnly node, a prefill worker, never receives KV and never offers.
//     The region (shm.Create, Config.ShmRegionBytes) is offered with SHM_OFFER
//     as a sealed frame: only a peer that proved the cluster token learns it.
//   - How the other maps it: its reader opens and checks it (shm.Open),
//     refuses regions above its own ShmRegionBytes, writes the ack value,
//     installs the producer and writes SHM_REPLY{accepted} under one hold of
//     the write lock (no KV_SHM can precede the answer). Declined (tcp) or
//     failed (any check, another host, another user, no Linux):
//     SHM_REPLY{declined|failed, why}, and KV stays on TCP. The offerer checks
//     the ack (else the connection closes) and closes its descriptor, so after
//     setup neither process holds one: only the two mappings.
//   - Data: SendKV takes a ring slot (waiting while the ring is full or
//     shm.InflightBytesMax is reached: back-pressure, bounded by ctx and
//     WriteTimeout, after which the connection closes), copies the page into
//     it (the one copy on this side) and seals a KV_SHM{KV sub-header, seq,
//     offset, length} frame into the connection's send buffer, in order with
//     every other frame. The receiver's reader checks each KV_SHM (next
//     sequence number, aligned, inside the data area), copies the slot into
//     the KVDest slice under the same lock as TCP data (nothing lands after
//     PeerLost), releases it, checks the slot's stamp still names the frame
//     and calls KVDone (false when it does not). A frame larger than the
//     region goes over TCP.
//   - Doorbells: a KV_SHM frame is the doorbell that tells the consumer a slot
//     is ready, and one write per page cost several times the copy of a 16 KiB
//     page (54% of the benchmark's CPU in system calls). So a KV_SHM frame is
//     written at once only when the consumer is idle (it released every slot
//     it was told about) and no doorbell was written in the last 200 µs;
//     otherwise it waits in the send buffer for the first of: the next frame
//     of any kind on the connection (which carries the pending ones ahead of
//     itself in the same write, so a DONE after the pages is never delayed), a
//     SendKV that finds the ring full, 64 pending frames, or a 200 µs timer
//     (stopped and waited for when the connection ends). Sealing stays in
//     write order. A flusher goroutine woken per frame was tried before and
//     stalled transfers for a cause never found; nothing here wakes per frame.
//   - One copy from a source region (KV_SRC): the ring costs two copies a
//     page, and two concurrent copy streams take about 1.9x the time of one,
//     so it tops out near half of memcpy. A prefill worker therefore keeps its
//     KV cache in a source region (Config.ShmSource; tandem does it for every
//     prefill worker not on --kv-transport tcp) and, right after its accepting
//     SHM_REPLY and under the same hold of the write lock, sends SHM_SOURCE
//     with a fresh ack value per connection. Decode maps it read-only
//     (shm.OpenSource) and writes the ack into its own ring's header; a source
//     it cannot map is logged and counted, and KV keeps coming through the
//     ring. Once prefill reads the ack, SendKVHeld of data inside the source
//     takes a data-less ring slot and seals a KV_SRC{KV sub-header, seq, slot,
//     offset, length}, batched like KV_SHM. Decode checks the slot and the
//     range (in uint64), copies the bytes straight into the KVDest slice, then
//     checks the ring was not revoked and releases the slot. Prefill holds the
//     page until it reads that release (Producer.Collect, on each later
//     SendKVHeld and every 1 ms while frames are held) and closes the
//     connection when the oldest held frame waits past WriteTimeout (a stuck
//     consumer cannot keep its pages). If the connection ends first it revokes
//     the ring before it calls the releases, and decode, which reads the
//     revoked word after each copy, fails a copy it had not finished (KVDone
//     false, the connection closes). A KV_SRC frame that finds the ring
//     already revoked is dropped unseen (no KVDest, counted as discarded) and
//     the stream goes on, so the ABORT a stopping prefill sent behind its
//     frames still arrives. Data outside the source, or sent with SendKV, goes
//     through the ring and is released before SendKVHeld returns.
//   - The Handler's view is identical: the same KVDest/KVDone per KV frame, in
//     the same order; Sent and progress are counted when SendKV returns (the
//     page is in the ring and its sealed frame handed to the connection, to be
//     written within 200 µs or with the next frame; the caller may reuse the
//     page memory at once).
//   - One-sided writes: the producer writes only into the ring, never into
//     decode's pages, which the receiver fills by its own copy inside the
//     KVDest/KVDone bracket, so the driver's page quarantine applies
//     unchanged. The one memory each side must not reuse early is its own
//     (prefill's held source pages, released or revoked as above). The regions
//     live as long as their connection.
//   - Integrity: no checksum over the data (CRC-32C measured 0.28x memcpy at 4
//     MiB, against a goal of 0.5x): the bytes never cross a network, only
//     processes of the same user can open the memfd (and those can read the
//     token from /proc/PID/environ anyway), and the sequence stamps catch a
//     slot overwritten too early.
//   - Hostile peer: a KV_SHM or KV_SRC out of sequence or bounds, a slot that
//     does not hold its frame, a released number that goes backwards or past
//     what was sent are counted (rejected_shm) and close the connection; never
//     an out-of-bounds read, never an allocation sized by the peer. A second
//     SHM_OFFER, an SHM_REPLY without an offer, a KV_SHM without an accepted
//     region: rejected_unexpected.
//   - Strict mode (KVTransport shm) offers to every peer and makes SendKV fail
//     (ErrIncompatible, naming why) when the peer's region is not there,
//     instead of using TCP. The setup frames are not shown to Faults; a KV_SHM
//     frame shows the hook the KV frame it stands for, and the fault actions
//     act as on TCP.
//   - Counters: shm_offered, shm_accepted, shm_refused, shm_unavailable,
//     shm_kv_frames_in/out, shm_kv_bytes_in/out, shm_ring_full, shm_doorbells,
//     rejected_shm, shm_source_offered, shm_source_mapped, shm_source_failed,
//     shm_src_kv_frames_in/out, shm_src_kv_bytes_in/out, shm_src_revoked;
//     PeerStatus.KVOut and KVIn say shm-src, shm or tcp.
//   - Linux only (package shm fails with ErrUnsupported elsewhere, so other
//     systems use TCP). The five frame types are additive to protocol version
//     2: every node of a cluster must run a build that has them (an older node
//     refuses SHM_OFFER as an unknown type).
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
// The handshake (protocol version 3): AUTH_HELLO (dialer: version, own
// address, shape, nonce, incarnation, heartbeat interval), AUTH_CHALLENGE
// (listener: nonce, own address), AUTH_RESPONSE (the dialer's HMAC over the
// transcript of both payloads), then AUTH_OK (the listener's shape,
// incarnation, interval and its HMAC over the transcript including AUTH_OK) or
// AUTH_REJECT (code and message). Authentication comes before the shape check;
// a shape mismatch fails the dialer's Send with ErrIncompatible and
// Shape.Diff's text ("page_tokens 16 vs 32"). An older dialer (version 1 or 2) gets an
// AUTH_REJECT of its version naming both versions. A sealed KV frame is a record
// for its sub-header, then its data in 64 KiB records, read four at a time
// into a small buffer and each opened from there straight into the destination
// page.
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
// # Limits and errors
//
// config.go: peersMax (1024) peers, handshakesMax (64) pre-auth handshakes,
// handshakesPerHostMax (16) per source IP, HandshakeTimeout (2s), SendQueueMax
// (default 64) waiting senders per connection, a token of at least 16 bytes, a
// heartbeat interval of at least 1 ms (a peer may announce at most 60 s), per-
// connection buffers as above plus at most about 5 KiB of pending KV_SHM
// frames, kvwire.SealRecordsMax records per direction (then the connection
// closes and the redial gets fresh keys). Shared memory: one region per
// connection a node receives on (ShmRegionBytes, 1 MiB..1 GiB in whole pages;
// a peer's region is mapped only up to this node's own ShmRegionBytes), at
// most shm.SlotsMax outstanding slots, a 64 KiB read buffer on a receiving
// connection.
//
// ErrFrame marks Send and SendKV errors about the frame alone (with the kvwire
// cause): fail that room, not the peer. Every other error concerns the peer or
// the connection.
//
// # Fault injection
//
// Config.Faults (nil in production, set only from code) is consulted
// before every frame written and after every header read: drop, delay or
// stall, corrupt, cut the connection mid-frame, or fail a page write.
package transfer
