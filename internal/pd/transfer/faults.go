package transfer

import (
	"time"

	"tandem/internal/pd/kvwire"
)

// Faults injects failures into a Transport's connections for tests of the
// failure paths (the simulator and the worker edge's end-to-end tests).
// It is the Config.Faults field: nil in production, and settable only
// from code; there is no flag or environment variable that reaches it.
//
// The hooks are consulted for every frame after the handshake, heartbeats
// included (the handshake itself is not hooked). They run on the
// connection's goroutines and must be safe for concurrent use.
type Faults interface {
	// BeforeWrite is called with the header of each frame about to be
	// written to peer, before anything of it is written, while the
	// connection's write lock is held (a Delay stalls every writer of
	// that connection).
	BeforeWrite(peer string, h kvwire.Header) Fault
	// BeforeRead is called with the header of each frame read from peer,
	// before its payload is read.
	BeforeRead(peer string, h kvwire.Header) Fault
}

// FaultAction is what a Fault does to one frame.
type FaultAction uint8

// The actions.
const (
	// FaultNone lets the frame through (after Delay).
	FaultNone FaultAction = iota
	// FaultDrop loses the frame. On write nothing is sealed or written
	// (no record number is used, so the stream stays valid) and the send
	// reports success; on read the payload is read, opened and discarded
	// without any Handler call (a KV frame's data is not written into
	// any page and KVDone is not called).
	FaultDrop
	// FaultCorrupt flips one byte of the sealed frame: on write a byte
	// in the middle of the sealed bytes (in the connection's send buffer;
	// the caller's data is never changed); on read the first byte of the
	// payload's first record (a KV frame's first data record) before it
	// is opened. The receiver then fails to open it (rejected_auth_tag)
	// and closes the connection; a KV frame reaches KVDone with
	// checksumOK false first.
	FaultCorrupt
	// FaultCut closes the connection in the middle of the frame: on
	// write, after half its bytes; on read, before its payload.
	FaultCut
	// FaultFail fails a write without writing anything (a page write
	// that fails); the send returns an error wrapping ErrInjected and the
	// connection stays up. On read it acts as FaultCut.
	FaultFail
)

// Fault is a hook's verdict on one frame.
type Fault struct {
	Action FaultAction
	// Delay is waited before the action: a delay or, when long, a stall.
	// The connection's deadlines keep running, so a stall longer than the
	// peer timeout makes the peer be lost. Closing the connection or the
	// transport ends the wait.
	Delay time.Duration
}
