package transfer

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"tandem/internal/pd/kvwire"
)

// counter indexes Transport.counters.
type counter uint8

// The counters. Their names (counterNames) are stable: the worker edge
// exports them as metric labels.
const (
	cConnsAccepted counter = iota
	cConnsDialed
	cDialErrors
	cHandshakesOK
	cHandshakesEvicted
	cHandshakeTimeouts
	cHandshakesFailed
	cAuthRejectedByPeer
	cRejectedBadMagic
	cRejectedBadVersion
	cRejectedUnknownType
	cRejectedOversize
	cRejectedMalformed
	cRejectedChecksum
	cRejectedAuthTag
	cRejectedUnauthenticated
	cRejectedBadMAC
	cRejectedShape
	cRejectedIdentity
	cRejectedUnexpected
	cRejectedBusy
	cReadTimeouts
	cWriteErrors
	cFramesIn
	cFramesOut
	cBytesIn
	cBytesOut
	cHeartbeatsIn
	cHeartbeatsOut
	cHeartbeatsSkipped
	cKVDiscardedFrames
	cKVDiscardedBytes
	cKVDestShort
	cPeersLost
	cPeerRestarts
	cSendQueueFull
	cFaultsInjected
	cShmOffered
	cShmAccepted
	cShmRefused
	cShmUnavailable
	cShmFramesOut
	cShmBytesOut
	cShmFramesIn
	cShmBytesIn
	cShmRingFull
	cShmDoorbells
	cRejectedShm
	cShmSourceOffered
	cShmSourceMapped
	cShmSourceFailed
	cShmSrcFramesOut
	cShmSrcBytesOut
	cShmSrcFramesIn
	cShmSrcBytesIn
	cShmSrcRevoked
	counterEnd
)

var counterNames = [counterEnd]string{
	cConnsAccepted:           "conns_accepted",           // TCP connections accepted
	cConnsDialed:             "conns_dialed",             // connections dialed (first dials and redials)
	cDialErrors:              "dial_errors",              // dials that failed before the handshake
	cHandshakesOK:            "handshakes_ok",            // handshakes completed, either side
	cHandshakesEvicted:       "handshakes_evicted",       // pre-auth connections closed to make room for a newer one (slots full)
	cHandshakeTimeouts:       "handshake_timeouts",       // accepted connections that did not finish the handshake within HandshakeTimeout
	cHandshakesFailed:        "handshakes_failed",        // accepted handshakes that ended otherwise uncounted (peer closed, reset)
	cAuthRejectedByPeer:      "auth_rejected_by_peer",    // this node's handshake was refused by the peer (AUTH_REJECT)
	cRejectedBadMagic:        "rejected_bad_magic",       // a header without "TDKV": not this protocol
	cRejectedBadVersion:      "rejected_bad_version",     // another protocol version (header or AUTH_HELLO)
	cRejectedUnknownType:     "rejected_unknown_type",    // a frame type this version does not define
	cRejectedOversize:        "rejected_oversize",        // a payload length above its type's limit
	cRejectedMalformed:       "rejected_malformed",       // a header or payload that breaks the format
	cRejectedChecksum:        "rejected_checksum",        // a handshake frame whose payload fails its CRC
	cRejectedAuthTag:         "rejected_auth_tag",        // a sealed frame that fails to open: tampered, replayed, reordered, corrupted (the connection closes)
	cRejectedUnauthenticated: "rejected_unauthenticated", // a frame before the handshake finished
	cRejectedBadMAC:          "rejected_bad_mac",         // a handshake MAC that does not verify: another cluster token
	cRejectedShape:           "rejected_shape",           // a handshake whose shape differs from this node's
	cRejectedIdentity:        "rejected_identity",        // a bad, own, or unexpected node address in the handshake
	cRejectedUnexpected:      "rejected_unexpected",      // a valid frame in the wrong place (auth frame after the handshake)
	cRejectedBusy:            "rejected_busy",            // a handshake refused because peersMax peers are tracked
	cReadTimeouts:            "read_timeouts",            // peers lost because nothing arrived on their connection for the peer timeout
	cWriteErrors:             "write_errors",             // writes that failed (the connection is closed)
	cFramesIn:                "frames_in",                // frames read after the handshake
	cFramesOut:               "frames_out",               // frames written after the handshake
	cBytesIn:                 "bytes_in",                 // bytes of those frames, headers included
	cBytesOut:                "bytes_out",                //
	cHeartbeatsIn:            "heartbeats_in",            //
	cHeartbeatsOut:           "heartbeats_out",           //
	cHeartbeatsSkipped:       "heartbeats_skipped",       // heartbeats not sent because another frame was being written
	cKVDiscardedFrames:       "kv_discarded_frames",      // KV frames whose data had no destination
	cKVDiscardedBytes:        "kv_discarded_bytes",       //
	cKVDestShort:             "kv_dest_short",            // KVDest returned a slice shorter than the data (discarded)
	cPeersLost:               "peers_lost",               // PeerLost calls
	cPeerRestarts:            "peer_restarts",            // reconnections that found a new peer incarnation
	cSendQueueFull:           "send_queue_full",          // sends refused with ErrSendQueueFull
	cFaultsInjected:          "faults_injected",          // frames a Faults hook changed
	cShmOffered:              "shm_offered",              // shared-memory regions this node offered (one per connection to a same-host peer)
	cShmAccepted:             "shm_accepted",             // regions set up: this node's offer accepted, or a peer's offer mapped
	cShmRefused:              "shm_refused",              // offers that ended on TCP: declined or failed, either side (the log says why)
	cShmUnavailable:          "shm_unavailable",          // regions this node could not create (no offer made)
	cShmFramesOut:            "shm_kv_frames_out",        // KV frames sent through shared memory (also counted in frames_out)
	cShmBytesOut:             "shm_kv_bytes_out",         // their data bytes (not in bytes_out, which counts the wire)
	cShmFramesIn:             "shm_kv_frames_in",         //
	cShmBytesIn:              "shm_kv_bytes_in",          //
	cShmRingFull:             "shm_ring_full",            // KV sends that waited for the peer to free ring space (or for in-flight bytes to drop under shm.InflightBytesMax)
	cShmDoorbells:            "shm_doorbells",            // writes of batched KV_SHM frames alone (KV_SHM frames written with another frame are not counted)
	cRejectedShm:             "rejected_shm",             // a shared-memory frame or ring state that breaks the protocol, or a slot overwritten (the connection closes)
	cShmSourceOffered:        "shm_source_offered",       // SHM_SOURCE frames sent: this node's KV memory offered to a peer that took its region
	cShmSourceMapped:         "shm_source_mapped",        // peers' source regions mapped (KV_SRC frames may come)
	cShmSourceFailed:         "shm_source_failed",        // peers' source regions that could not be mapped (their KV keeps coming through the ring)
	cShmSrcFramesOut:         "shm_src_kv_frames_out",    // KV frames sent as KV_SRC: the peer copies them out of this node's memory (also counted in frames_out, not in shm_kv_frames_out)
	cShmSrcBytesOut:          "shm_src_kv_bytes_out",     // their data bytes
	cShmSrcFramesIn:          "shm_src_kv_frames_in",     //
	cShmSrcBytesIn:           "shm_src_kv_bytes_in",      //
	cShmSrcRevoked:           "shm_src_revoked",          // KV_SRC frames whose memory was taken back unreleased because their connection ended
}

func (t *Transport) inc(c counter)           { t.counters[c].Add(1) }
func (t *Transport) add(c counter, n uint64) { t.counters[c].Add(n) }

// Counters returns every counter by name (zeros included), for metrics.
// The names are stable.
func (t *Transport) Counters() map[string]uint64 {
	m := make(map[string]uint64, counterEnd)
	for c := range counterEnd {
		m[counterNames[c]] = t.counters[c].Load()
	}
	return m
}

// rejectCounter classifies a frame-reading error from kvwire.
func rejectCounter(err error) (counter, bool) {
	switch {
	case errors.Is(err, kvwire.ErrMagic):
		return cRejectedBadMagic, true
	case errors.Is(err, kvwire.ErrVersion):
		return cRejectedBadVersion, true
	case errors.Is(err, kvwire.ErrType):
		return cRejectedUnknownType, true
	case errors.Is(err, kvwire.ErrTooLarge):
		return cRejectedOversize, true
	case errors.Is(err, kvwire.ErrMalformed):
		return cRejectedMalformed, true
	case errors.Is(err, kvwire.ErrChecksum):
		return cRejectedChecksum, true
	}
	return 0, false
}

// reject counts rejected traffic and logs it, rate-limited.
func (t *Transport) reject(c counter, remote string, err error) {
	t.inc(c)
	if n, ok := t.logLimit.allow(time.Now()); ok {
		t.log.Warn("transfer: rejected traffic, closing the connection", "kind", counterNames[c], "remote", remote, "err", err, "suppressed", n)
	}
}

// logLimiterBurst is how many rejections are logged per second; the rest
// are only counted, and the next logged one says how many were skipped.
const logLimiterBurst = 10

// logLimiter allows logLimiterBurst log lines per one-second window.
type logLimiter struct {
	mu         sync.Mutex
	window     time.Time
	n          int
	suppressed int
}

// allow reports whether to log now, and how many lines were suppressed
// since the last one allowed.
func (l *logLimiter) allow(now time.Time) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.window) >= time.Second {
		l.window, l.n = now, 0
	}
	if l.n >= logLimiterBurst {
		l.suppressed++
		return 0, false
	}
	l.n++
	s := l.suppressed
	l.suppressed = 0
	return s, true
}

// discardLogger is used when Config.Logger is nil.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// atomicCounters is the counter storage.
type atomicCounters = [counterEnd]atomic.Uint64
