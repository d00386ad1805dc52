// Package shm is the shared-memory data path for KV bytes between two
// workers on one host: a region (a sealed memfd, mapped by both
// processes) holding a ring of slots that one side (the producer, the
// KV sender) writes and the other (the consumer, the region's creator
// and the KV receiver) reads. The TCP connection between the two still
// carries every frame, sealed: a KV frame over shared memory is a small
// KV_SHM frame (kvwire.KVShm) naming the slot's sequence number, offset
// and length, so frames keep their order with the control frames around
// them and nothing in the region is ever acted on without an
// authenticated frame naming it. internal/pd/transfer drives it.
//
// # Setting a region up
//
// The receiver creates the region (Create): memfd_create with a name
// holding 16 random bytes, sized, sealed against shrinking and growing
// (F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_SEAL: no process can truncate it
// under a mapping, which would fault the other side), mapped, and a
// header written with a random cookie. It offers it inside the
// authenticated, encrypted session (kvwire.ShmOffer: its pid, the fd
// number, the size, the name, the cookie, and an ack value). The other
// side (Open) opens /proc/PID/fd/FD only after readlink says it is that
// memfd ("/memfd:tandem-kv-<hex> (deleted)"), checks the file it got
// (the same name through /proc/self/fd, a regular file of the offered
// size, owned by its own user, with the three seals), maps it, checks
// the header's size and cookie, writes the ack, and closes its
// descriptor. Any failure (another host, another pid or user
// namespace, another user, a changed region) is an error and the
// connection carries KV over TCP. The creator checks the ack when the
// answer comes and then closes its own descriptor, so after setup
// neither process holds a descriptor: only the two mappings, which
// Close removes when the connection ends.
//
// # The ring
//
// Layout: a ShmPageBytes header (magic, size, cookie, ack, at offset 128
// the consumer's released sequence number, an atomic word; for a source,
// at 192 the receiver's ack of it and at 256 the sender's revoked word),
// then the data area. A slot is a 64-byte slot header (its sequence number, written
// first, and its length) and the data rounded up to 64 bytes. The
// producer (Producer.Alloc) places slots in a ring in sequence order:
// after the newest slot when it fits, else at the start when that is
// free, else it reports the ring full (back-pressure; the caller waits
// and retries). When every slot was released it starts again at offset
// 0, and it wraps early, once the space before the oldest outstanding
// slot holds what is in flight plus some slack (1 MiB, or a quarter of the
// data area if less), so the ring spans about what is in flight and keeps
// touching the same cached pages (sweeping 64 MiB made the producer's copy
// of a 16 KiB page 2-3x slower); Producer.Released reads the consumer's
// released number unchecked, as a hint; the bytes
// in flight are bounded (InflightBytesMax, but two slots always). The
// consumer (Consumer.Slot, Consumer.Release) takes slots strictly in
// sequence order, each in bounds and carrying the sequence number and
// length its frame named, and releases each after copying it out by
// publishing its sequence number. The producer trusts nothing it reads
// back: a released number that goes backwards or past what it sent is
// an error (ErrPeer). At most SlotsMax slots are outstanding.
//
// # One-sided writes
//
// The producer writes only into the ring, never into the consumer's KV
// pages: the consumer copies each slot once into the page its own
// transport chose, inside the KVDest/KVDone bracket, so the page
// quarantine of the TCP path covers it unchanged. A slot is rewritten
// only after the consumer released it; the consumer checks the slot's
// sequence number before and after its copy, so a producer that
// overwrote a slot too early (a bug) makes the frame fail (ErrSlot)
// instead of delivering mixed bytes (best effort on weakly ordered
// CPUs). The data itself carries no checksum: it never crosses a
// network, and only processes of the same user can reach the memfd
// (the same ones that can read the cluster token from the environment).
//
// # Source regions
//
// The ring costs two copies a page. A source region (CreateSource) is
// the KV sender's own memory instead: its KV cache lives in the data
// area, and the receiver maps it read-only (OpenSource: Open's checks,
// opened O_RDONLY, mapped PROT_READ) and copies each page straight out
// of it. Once the sender has mapped it, CreateSource adds
// F_SEAL_FUTURE_WRITE (which OpenSource requires): the sender's own
// mapping keeps writing, but no process can make a new writable mapping
// of it, write(2) to it or punch a hole in it, so a process of the same
// user that reopens /proc/PID/fd/N read-write can no longer change the KV
// bytes other clients' answers are computed from. (A ring must stay
// writable by both sides, so it has only the three seals.) The sender keeps its descriptor, so every new connection can be
// offered it (Source.Offer, with a fresh ack value each time, which the
// receiver writes into its own ring's header: Consumer.AckSource,
// Producer.SourceAcked). A KV_SRC frame still takes a ring slot, without
// data (Producer.Mark; Consumer.Mark and ReleaseMark), so the ring's
// sequence, in-flight bound and release cover it; the sender keeps the
// page unchanged until the slot is released (Producer.Collect). When it
// must take pages back unreleased (the connection ended) it first sets
// the ring's revoked word (Producer.Revoke), which the receiver reads
// after each KV_SRC copy (Consumer.Revoked, a read-modify-write so no
// load of the copy is ordered after it) and fails the frame.
//
// # Invariants
//
// Nothing is read or written outside the region whatever the peer sends or
// writes into the header (offsets and lengths are checked in uint64 before
// any slice is formed); no allocation depends on a peer value; a slot is
// rewritten only after the consumer released it; a slot that does not hold
// its frame fails that frame (ErrSlot). Every setup failure wraps
// ErrRegion, and the transport falls back to TCP.
//
// Everything but Create, Open, CreateSource and OpenSource is portable
// and works on any []byte; those four are Linux only and fail with
// ErrUnsupported elsewhere.
package shm
