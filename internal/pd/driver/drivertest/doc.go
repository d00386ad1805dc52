// Package drivertest is the conformance suite of package driver's
// interfaces: Engine, Wire, Legs and Pages, checked against the contracts
// package driver states (api.go). One suite per interface (TestEngine,
// TestWire, TestLegs, TestPages) runs against every implementation: the
// worker's adapters (internal/pd/worker) and the simulator's fakes
// (internal/pd/sim) both run all four.
//
// The suite stands in for the driver. Each implementation reports back
// through a driver.Reports, which its host points at a Recorder instead of
// its *driver.Driver; the suite calls the implementation as the driver
// would (under the host's lock, Host.Do), lets the host run (Host.Wait:
// the simulator's virtual clock, the worker's goroutines) and checks what
// was reported: that a call into the implementation never calls back
// synchronously, that each report comes the number of times the contract
// says, for the right room and leg, in the right order, and that what the
// implementation holds comes back.
//
// The suites take a testing.TB, so that they can be run against a
// recording stand-in (Failures): a test of the suite itself wraps an
// implementation in a decorator that breaches its contract and checks that
// the suite reports the breach, and nothing without it (CheckBreach).
//
// Test support only: nothing in the binaries imports it.
package drivertest
