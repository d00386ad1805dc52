package room

import "errors"

// The sentinel errors a failure reason maps to, for callers that test with
// errors.Is; errors.As with *ReasonError gives the exact Reason.
var (
	ErrAborted  = errors.New("room: aborted")                 // client_abort, peer_abort, shutdown
	ErrTimeout  = errors.New("room: timed out")               // every *_timeout, deadline
	ErrPeer     = errors.New("room: peer failed")             // peer_failed, peer_lost, peer_unreachable, incompatible, unknown_room
	ErrTransfer = errors.New("room: transfer broke protocol") // checksum, protocol
	ErrEngine   = errors.New("room: engine failed")           // engine, send_failed
	ErrRejected = errors.New("room: request rejected")        // duplicate_room, overloaded, bad_request
)

// ReasonError is the error for a room that failed (or a request rejected)
// with Reason. It unwraps to the Reason's sentinel.
type ReasonError struct{ Reason Reason }

// Error returns the sentinel's text and the reason, for example
// "room: timed out: hello_timeout".
func (e *ReasonError) Error() string { return e.Unwrap().Error() + ": " + e.Reason.String() }

// Unwrap returns the sentinel for the reason.
func (e *ReasonError) Unwrap() error {
	switch e.Reason {
	case ReasonClientAbort, ReasonPeerAbort, ReasonShutdown:
		return ErrAborted
	case ReasonHelloTimeout, ReasonRequestTimeout, ReasonAllocTimeout, ReasonHandshakeTimeout,
		ReasonAdmissionTimeout, ReasonPrefillTimeout, ReasonProgressTimeout, ReasonDeadline:
		return ErrTimeout
	case ReasonChecksum, ReasonProtocol:
		return ErrTransfer
	case ReasonEngine, ReasonSendFailed:
		return ErrEngine
	case ReasonDuplicate, ReasonOverloaded, ReasonBadRequest:
		return ErrRejected
	}
	return ErrPeer
}

// Err returns the error for a failure with reason r, or nil for ReasonNone.
func (r Reason) Err() error {
	if r == ReasonNone {
		return nil
	}
	return &ReasonError{Reason: r}
}
