package transfer

import "errors"

// Sentinel errors. Errors from Send, SendKV and the Handler's PeerLost wrap
// one of them (or a kvwire sentinel, a context error, or a net error for a
// failed dial), so the worker edge can map them to a room.Reason with
// errors.Is: ErrAuth and ErrIncompatible to ReasonIncompatible, a dial
// failure to ReasonPeerUnreachable, ErrPeerLost and ErrPeerRestarted to
// ReasonPeerLost.
//
// ErrFrame separates the two kinds of Send/SendKV failure: an error
// wrapping it concerns only the frame handed in (refused before anything
// was written: over a limit, an unknown type, a payload the codec
// refuses), and the connection and the peer are fine, so the edge should
// fail only the room that frame belongs to. Every other error (dial,
// handshake, peer lost, queue full, closed) concerns the peer or the
// connection.
var (
	// ErrFrame: Send or SendKV refused the frame itself before writing
	// anything. The error also wraps the kvwire cause (kvwire.ErrTooLarge,
	// kvwire.ErrType or kvwire.ErrMalformed).
	ErrFrame = errors.New("transfer: frame refused")
	// ErrClosed: the transport was closed.
	ErrClosed = errors.New("transfer: transport closed")
	// ErrNotConnected: Config.AcceptOnly is set and the peer has no
	// connection (prefill workers answer connections, they never dial).
	ErrNotConnected = errors.New("transfer: peer not connected")
	// ErrAuth: one side could not prove the cluster token: the tokens differ.
	ErrAuth = errors.New("transfer: authentication failed")
	// ErrIncompatible: the peers' shapes (model, geometry, page layout,
	// dtype) or protocol versions differ; the error names the difference.
	ErrIncompatible = errors.New("transfer: incompatible peer")
	// ErrIdentity: the peer's address is not the one it was dialed at, is
	// empty, or is this node's own.
	ErrIdentity = errors.New("transfer: peer identity mismatch")
	// ErrRejected: the peer refused the connection for another reason
	// (too many peers, a broken handshake).
	ErrRejected = errors.New("transfer: connection refused by peer")
	// ErrProtocol: the peer broke the protocol during the handshake.
	ErrProtocol = errors.New("transfer: protocol error")
	// ErrPeerLost: nothing was heard from the peer for PeerTimeout, or its
	// connection dropped and was not re-established within PeerTimeout.
	ErrPeerLost = errors.New("transfer: peer lost")
	// ErrPeerRestarted: the peer came back as a new process (a new
	// incarnation); whatever it held for this node is gone.
	ErrPeerRestarted = errors.New("transfer: peer restarted")
	// ErrSendQueueFull: SendQueueMax senders already wait on the peer's
	// connection.
	ErrSendQueueFull = errors.New("transfer: send queue full")
	// ErrTooManyPeers: the transport already tracks peersMax peers.
	ErrTooManyPeers = errors.New("transfer: too many peers")
	// ErrInjected: a Faults hook failed the operation.
	ErrInjected = errors.New("transfer: injected fault")
)
