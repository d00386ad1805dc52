package transfer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"tandem/internal/pd/kvwire"
	"tandem/internal/pd/shm"
)

// Limits and defaults. Every queue and map of the transport is bounded by
// one of these or by a Config field.
const (
	// peersMax bounds the peers one transport tracks (connected or in
	// their reconnect grace). Past it, Send fails with ErrTooManyPeers and
	// handshakes are refused with kvwire.RejectBusy.
	peersMax = 1024
	// handshakesMax bounds the accepted connections still in their
	// handshake (not yet authenticated). A new connection past it evicts
	// the oldest pre-auth connection of the source host holding the most
	// slots (counted handshakes_evicted), so a flood of idle connections
	// can hold neither memory nor goroutines, and cannot lock out a peer
	// that dials during the flood: the newest connection always gets a
	// slot, and a real peer finishes its handshake in one round trip.
	handshakesMax = 64
	// handshakesPerHostMax bounds the pre-auth connections from one source
	// IP; past it the host's own oldest is evicted, so one flooding host
	// cannot push out the handshakes of others.
	handshakesPerHostMax = 16
	// clusterTokenBytesMin is the shortest accepted cluster token.
	clusterTokenBytesMin = 16
	// sendQueueMaxLimit bounds Config.SendQueueMax.
	sendQueueMaxLimit = 1 << 16
	// heartbeatIntervalMin bounds Config.HeartbeatInterval from below.
	heartbeatIntervalMin = time.Millisecond
	// acceptBackoffMax bounds the wait after a failed Accept.
	acceptBackoffMax = time.Second

	defaultHeartbeatInterval = time.Second
	defaultDialTimeout       = 5 * time.Second
	defaultHandshakeTimeout  = 2 * time.Second
	defaultWriteTimeout      = 10 * time.Second
	defaultSendQueueMax      = 64
)

// Config configures a Transport. ListenAddr (or Listener, or DialOnly),
// ClusterToken and Shape are required; zero durations and counts take the
// defaults named on each field.
type Config struct {
	// ListenAddr is the TCP address to listen on ("127.0.0.1:0" picks a
	// port; Addr reports the real one).
	ListenAddr string
	// AdvertiseAddr is this node's identity: sent in AUTH_HELLO and
	// AUTH_CHALLENGE and used by peers as the key for this node. A node
	// that listens must advertise the address peers dial (a dialer checks
	// that the listener calls itself what it dialed). A DialOnly node is
	// never dialed: its identity is only the name its listeners know it
	// by (PeerStatus.Addr, Handler calls), so any stable host:port-shaped
	// name unique in the cluster will do; the worker's HTTP address is a
	// good one. Default: Addr(), or for DialOnly a random name
	// "dial-only.<16 hex digits>:0" that changes with every process (a
	// restarted node then shows up as a new peer, and its listeners lose
	// the old one after the peer timeout instead of at the reconnect).
	AdvertiseAddr string
	// DialOnly makes the transport never listen: decode workers set it,
	// since only they dial and a listener there would be pure pre-auth
	// attack surface. ListenAddr and Listener must then be empty and
	// AcceptOnly false; Addr is "", and Serve only waits for its context
	// (or Close).
	DialOnly bool
	// ClusterToken is the shared secret both sides of every connection
	// prove with HMAC-SHA256 (at least 16 bytes; `tandem up` generates
	// one).
	ClusterToken []byte
	// Shape is this node's model and page layout. A peer with another
	// shape is refused at the handshake; the dialer's Send fails with an
	// error wrapping ErrIncompatible that names every differing field.
	Shape kvwire.Shape
	// HeartbeatInterval is how often a heartbeat goes to every connected
	// peer (default 1s, at least 1ms). PeerTimeout is twice it.
	HeartbeatInterval time.Duration
	// DialTimeout bounds a dial plus its handshake (default 5s).
	DialTimeout time.Duration
	// HandshakeTimeout bounds the whole handshake of an accepted
	// connection, from accept to authenticated (default 2s): one absolute
	// deadline, so a peer trickling bytes does not extend it. It is what
	// a stranger can hold a pre-auth slot for; a real peer needs one
	// round trip.
	HandshakeTimeout time.Duration
	// WriteTimeout bounds the write of one frame (default 10s). A write
	// past it closes the connection.
	WriteTimeout time.Duration
	// SendQueueMax is how many senders may hold or wait for one
	// connection's write lock (default 64). Past it Send fails at once
	// with ErrSendQueueFull instead of queueing without bound.
	SendQueueMax int
	// Logger receives connection events and rate-limited rejections
	// (default: discard).
	Logger *slog.Logger
	// Load fills outgoing heartbeats (Seq is set by the transport). It is
	// called from peer goroutines and must be safe for concurrent use.
	// Default: zero load.
	Load func() kvwire.Heartbeat
	// AcceptOnly makes Send never dial: prefill workers set it, since
	// decode workers dial them. Send to a peer without a connection then
	// waits for the peer to redial (while it is within PeerTimeout) or
	// fails with ErrNotConnected.
	AcceptOnly bool
	// Listener, when set, is used instead of listening on ListenAddr; the
	// transport closes it. Tests use in-memory listeners.
	Listener net.Listener
	// Dial, when set, replaces a net.Dialer for outgoing connections.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// Faults injects failures for tests. nil in production; it can only
	// be set from code. See Faults.
	Faults Faults
	// KVTransport says how KV data bytes travel (see KVTransport and
	// shm.go): KVAuto (the zero value) uses shared memory with peers on
	// this host when it can be set up, else TCP.
	KVTransport KVTransport
	// ShmRegionBytes is the size of the shared-memory region this node
	// creates per connection to receive KV data into, and the largest
	// region of a peer it maps (default 64 MiB; whole 4 KiB pages, 1 MiB
	// to 1 GiB). A KV frame larger than the region goes over TCP.
	ShmRegionBytes int
	// ShmSource, when set (a prefill worker whose KV cache lives in it),
	// is offered to every peer whose shared-memory region this node maps
	// (SHM_SOURCE); SendKVHeld frames whose data lies in it then go to
	// that peer as KV_SRC frames, which the peer copies straight out of
	// this memory: one copy a page instead of two. The caller owns it and
	// closes it after the Transport.
	ShmSource *shm.Source
}

// KVTransport chooses the path of KV data bytes between two workers.
// Control frames (and the handshake) always travel over TCP.
type KVTransport uint8

// The transports.
const (
	// KVAuto offers shared memory to peers whose TCP address is this
	// host's (loopback, or the connection's own local address), accepts
	// the offers of any peer, and uses TCP when setup fails.
	KVAuto KVTransport = iota
	// KVTCP never offers shared memory and declines offers.
	KVTCP
	// KVShm offers shared memory to every peer and requires it for
	// sending: SendKV to a peer without a region fails (ErrIncompatible)
	// instead of falling back to TCP (a frame larger than the region
	// still goes over TCP).
	KVShm
)

// String returns "auto", "tcp" or "shm".
func (k KVTransport) String() string {
	switch k {
	case KVAuto:
		return "auto"
	case KVTCP:
		return "tcp"
	case KVShm:
		return "shm"
	}
	return fmt.Sprintf("kv-transport(%d)", uint8(k))
}

// ParseKVTransport parses "auto", "tcp" or "shm".
func ParseKVTransport(s string) (KVTransport, error) {
	for k := KVAuto; k <= KVShm; k++ {
		if s == k.String() {
			return k, nil
		}
	}
	return 0, fmt.Errorf("kv transport %q: use auto, tcp or shm", s)
}

// withDefaults checks cfg and fills its defaults.
func (cfg Config) withDefaults() (Config, error) {
	var errs []error
	switch {
	case cfg.DialOnly && (cfg.ListenAddr != "" || cfg.Listener != nil):
		errs = append(errs, fmt.Errorf("DialOnly with ListenAddr %q or a Listener: a dial-only transport does not listen; leave both empty", cfg.ListenAddr))
	case cfg.DialOnly && cfg.AcceptOnly:
		errs = append(errs, errors.New("DialOnly and AcceptOnly both set: a transport that neither dials nor listens cannot reach anyone"))
	case !cfg.DialOnly && cfg.ListenAddr == "" && cfg.Listener == nil:
		errs = append(errs, errors.New("ListenAddr is empty (set DialOnly for a transport that only dials)"))
	}
	if len(cfg.ClusterToken) < clusterTokenBytesMin {
		errs = append(errs, fmt.Errorf("ClusterToken has %d bytes, need at least %d (generate one with `tandem up`)", len(cfg.ClusterToken), clusterTokenBytesMin))
	}
	if err := cfg.Shape.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(cfg.AdvertiseAddr) > kvwire.NodeAddrBytesMax {
		errs = append(errs, fmt.Errorf("AdvertiseAddr has %d bytes, limit %d", len(cfg.AdvertiseAddr), kvwire.NodeAddrBytesMax))
	}
	if cfg.HeartbeatInterval < 0 || cfg.DialTimeout < 0 || cfg.WriteTimeout < 0 || cfg.HandshakeTimeout < 0 {
		errs = append(errs, errors.New("durations must not be negative"))
	}
	if cfg.HeartbeatInterval != 0 && cfg.HeartbeatInterval < heartbeatIntervalMin {
		errs = append(errs, fmt.Errorf("HeartbeatInterval %v below %v", cfg.HeartbeatInterval, heartbeatIntervalMin))
	}
	if cfg.SendQueueMax < 0 || cfg.SendQueueMax > sendQueueMaxLimit {
		errs = append(errs, fmt.Errorf("SendQueueMax %d outside 0..%d", cfg.SendQueueMax, sendQueueMaxLimit))
	}
	if cfg.KVTransport > KVShm {
		errs = append(errs, fmt.Errorf("KVTransport %d unknown", cfg.KVTransport))
	}
	if n := cfg.ShmRegionBytes; n != 0 && (n < kvwire.ShmRegionBytesMin || n > kvwire.ShmRegionBytesMax || n%kvwire.ShmPageBytes != 0) {
		errs = append(errs, fmt.Errorf("ShmRegionBytes %d: want whole %d-byte pages within %d..%d", n, kvwire.ShmPageBytes, kvwire.ShmRegionBytesMin, kvwire.ShmRegionBytesMax))
	}
	if err := errors.Join(errs...); err != nil {
		return cfg, fmt.Errorf("transfer config: %w", err)
	}
	cfg.ClusterToken = append([]byte(nil), cfg.ClusterToken...)
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = defaultHeartbeatInterval
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = defaultDialTimeout
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = defaultHandshakeTimeout
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = defaultWriteTimeout
	}
	if cfg.SendQueueMax == 0 {
		cfg.SendQueueMax = defaultSendQueueMax
	}
	if cfg.ShmRegionBytes == 0 {
		cfg.ShmRegionBytes = shm.DefaultBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = discardLogger()
	}
	if cfg.Load == nil {
		cfg.Load = func() kvwire.Heartbeat { return kvwire.Heartbeat{} }
	}
	if cfg.Dial == nil {
		d := &net.Dialer{KeepAlive: -1} // heartbeats do liveness
		cfg.Dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	return cfg, nil
}
