// Package faults turns a fault specification into a transfer.Faults that
// drops, delays, stalls, corrupts, cuts or fails KV-transfer frames at
// random, for failure tests of real worker processes.
//
// It is reachable from the tandem binary only when that binary is built
// with the `tandemfaults` build tag (see cmd/tandem/faults_on.go), which
// adds the --inject-faults flag; a normal build has neither the flag nor
// any way to turn faults on, so production cannot enable them by accident.
//
// A spec is a comma-separated list of name=value:
//
//	drop=P         lose a frame with probability P (0..1)
//	corrupt=P      flip a sealed payload byte: the frame fails to open, the connection closes and decode redials
//	cut=P          close the connection in the middle of a frame
//	fail=P         fail a frame write (a page write that fails)
//	delay=P:D      delay a frame by D (a Go duration) with probability P
//	stall=P:D      the same, meant for long D (a stalled transfer goroutine)
//	kvonly=true    touch KV frames only (default: every frame after the handshake)
//	seed=N         seed of the random choices (default 1)
//
// Parse reads a spec (unknown names, a missing "=" or a malformed P:D are
// errors that name the part; each probability is in 0..1, drop+corrupt+
// cut+fail must not exceed 1, durations are non-negative); New gives the
// Injector, whose Counts says how many frames each fault touched.
//
// # Invariants
//
//   - Faults are injected on the write side only (BeforeRead never
//     injects), so each frame is judged once.
//   - At most one action per frame: drop, corrupt, cut and fail share one
//     draw; a stall or a delay (stall checked first) can come with it.
//   - All choices come from one math/rand/v2 PCG seeded by seed, behind a
//     mutex: an Injector is safe for concurrent use.
package faults
