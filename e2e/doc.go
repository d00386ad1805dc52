// Package e2e holds end-to-end tests of the tandem binary: real processes,
// real sockets, real HTTP, driven as outside clients drive them. The
// package has no code of its own; everything is in the _test files.
//
// # Harness
//
// TestMain builds the binary from this checkout (go build ./cmd/tandem)
// and synthesizes the tiny Q8_0 model with `tandem model synth` into a
// work folder it removes at the end; tests that need other models make
// them there too, and stories260K and the shared vocabularies come from
// internal/testenv. startServer and startProcess
// run `tandem serve`, a worker or a router on a free local port
// (cluster.FreePort) and wait for /ready; startUp runs `tandem up`;
// startCluster starts a deployment through internal/cluster (its ports
// held by the cluster while it starts), and startFleet and startLoadedFleet
// a 2 prefill + 2 decode fleet behind 2 routers sharing one port. Waits
// for a state go through testenv.WaitFor, a bound for a hung test and not a
// timing assertion. A child still running at the end of a test gets
// SIGINT (again once nothing routes to it, so no settle window holds it)
// and SIGKILL after stopTimeout.
//
// # Inputs
//
// The checkout, a Go toolchain, and optionally node and npm (the official
// openai npm package and zod, pinned and installed once into the user cache
// directory; the tests that need them skip without them), the shared
// folder, root and ip for the network-namespace test. -chaos.* flags size
// the soak: -chaos.requests (300), -chaos.concurrency (16), -chaos.seed
// (0: from the clock, logged), -chaos.disconnect (0.10), -chaos.kill
// (true), -chaos.pause (300 ms), -chaos.timeout (60 s), -chaos.kv-pages
// (128).
//
// # Limits
//
// e2e_test.go: buildTimeout 10 min, healthTimeout 2 min from start to a
// ready /ready, stopTimeout 15 s from SIGINT to exit before SIGKILL. The
// tests are slow (a build, model loads, an npm install on first use):
// go test -short skips them all. README.md lists what each test checks.
package e2e
