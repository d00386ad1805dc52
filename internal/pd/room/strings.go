package room

import "strconv"

// Names of the enums, indexed by value. Index 0 is the zero value (invalid
// for everything but Reason and State's "none" in a creation Transition).
var (
	roleNames   = [...]string{"", "prefill", "decode"}
	stateNames  = [...]string{"none", "bootstrapping", "waiting_for_input", "transferring", "succeeded", "failed"}
	phaseNames  = [...]string{"none", "awaiting_hello", "awaiting_request", "awaiting_alloc", "computing", "sending", "handshake", "admission", "awaiting_kv", "receiving", "done"}
	reasonNames = [...]string{
		"none", "client_abort", "peer_abort", "peer_failed", "peer_lost", "peer_unreachable",
		"hello_timeout", "request_timeout", "alloc_timeout", "handshake_timeout", "admission_timeout",
		"prefill_timeout", "progress_timeout", "checksum", "protocol", "incompatible", "unknown_room",
		"engine", "shutdown", "deadline", "duplicate_room", "overloaded", "bad_request", "send_failed",
	}
	eventNames = [...]string{
		"", "request", "client_abort", "hello", "hello_ack", "admitted", "alloc", "compute_started",
		"kv_sent", "compute_done", "kv_received", "first_token", "done", "done_ack", "abort", "failed",
		"checksum_error", "engine_error", "peer_lost", "shutdown", "tick", "watchdog", "send_failed", "peer_alive",
	}
	frameNames   = [...]string{"", "hello", "hello_ack", "alloc", "first_token", "done", "done_ack", "abort", "failed"}
	effectNames  = [...]string{"", "send", "start_compute", "cancel_compute", "admit", "resume", "cancel_request", "reject", "release", "reply_done", "free_pages"}
	outcomeNames = [...]string{"", "applied", "parked", "answered", "late", "rejected"}
)

// Compile-time checks that each name table covers its enum.
var (
	_ = [1]int{}[len(reasonNames)-int(reasonCount)]
	_ = [1]int{}[len(eventNames)-int(eventKindCount)]
	_ = [1]int{}[len(effectNames)-int(effectKindCount)]
	_ = [1]int{}[len(stateNames)-int(StateFailed)-1]
	_ = [1]int{}[len(phaseNames)-int(PhaseDone)-1]
	_ = [1]int{}[len(frameNames)-int(FrameFailed)-1]
	_ = [1]int{}[len(outcomeNames)-int(OutcomeRejected)-1]
	_ = [1]int{}[len(roleNames)-int(RoleDecode)-1]
)

// name returns table[i], or kind(i) when i is out of range or unnamed.
func name(table []string, kind string, i int) string {
	if i >= 0 && i < len(table) && table[i] != "" {
		return table[i]
	}
	return kind + "(" + strconv.Itoa(i) + ")"
}

// String returns "prefill" or "decode".
func (r Role) String() string { return name(roleNames[:], "role", int(r)) }

// String returns the state's snake_case name ("waiting_for_input").
func (s State) String() string { return name(stateNames[:], "state", int(s)) }

// String returns the phase's snake_case name ("awaiting_hello").
func (p Phase) String() string { return name(phaseNames[:], "phase", int(p)) }

// String returns the reason's metrics label ("client_abort", "peer_lost").
func (r Reason) String() string { return name(reasonNames[:], "reason", int(r)) }

// String returns the event's snake_case name ("hello_ack").
func (k EventKind) String() string { return name(eventNames[:], "event", int(k)) }

// String returns the frame's snake_case name ("done_ack").
func (f FrameKind) String() string { return name(frameNames[:], "frame", int(f)) }

// String returns the effect's snake_case name ("start_compute").
func (k EffectKind) String() string { return name(effectNames[:], "effect", int(k)) }

// String returns the outcome's name ("applied", "late").
func (o Outcome) String() string { return name(outcomeNames[:], "outcome", int(o)) }

// Terminal reports whether s is Succeeded or Failed.
func (s State) Terminal() bool { return s == StateSucceeded || s == StateFailed }

// String formats d in the largest unit that keeps it exact: "5ms", "250us",
// "7ns", "0s".
func (d Duration) String() string { return formatNanos(int64(d)) }

// String formats the instant as its Duration since the clock's zero.
func (t Instant) String() string { return formatNanos(int64(t)) }

func formatNanos(n int64) string {
	switch {
	case n == 0:
		return "0s"
	case n%1e9 == 0:
		return strconv.FormatInt(n/1e9, 10) + "s"
	case n%1e6 == 0:
		return strconv.FormatInt(n/1e6, 10) + "ms"
	case n%1e3 == 0:
		return strconv.FormatInt(n/1e3, 10) + "us"
	}
	return strconv.FormatInt(n, 10) + "ns"
}

// enumerate returns first..last as a fresh slice.
func enumerate[T ~uint8](first, last T) []T {
	out := make([]T, 0, int(last-first)+1)
	for v := first; v <= last; v++ {
		out = append(out, v)
	}
	return out
}

// Roles returns every Role, for tables and metrics.
func Roles() []Role { return enumerate(RolePrefill, RoleDecode) }

// States returns every State.
func States() []State { return enumerate(StateBootstrapping, StateFailed) }

// Phases returns every Phase.
func Phases() []Phase { return enumerate(PhaseAwaitingHello, PhaseDone) }

// Reasons returns every Reason except ReasonNone.
func Reasons() []Reason { return enumerate(ReasonClientAbort, reasonCount-1) }

// EventKinds returns every EventKind.
func EventKinds() []EventKind { return enumerate(EventRequest, eventKindCount-1) }

// FrameKinds returns every FrameKind.
func FrameKinds() []FrameKind { return enumerate(FrameHello, FrameFailed) }

// EffectKinds returns every EffectKind.
func EffectKinds() []EffectKind { return enumerate(EffectSend, effectKindCount-1) }

// Outcomes returns every Outcome.
func Outcomes() []Outcome { return enumerate(OutcomeApplied, OutcomeRejected) }
