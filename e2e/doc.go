// Package e2e holds end-to-end tests of the tandem binary. They build it
// from this checkout (go build ./cmd/tandem), synthesize a tiny random-weight
// model with `tandem model synth`, start `tandem serve` on a free local port
// as a child process, and drive it as outside clients do:
//
//   - TestOpenAINodeClient runs the official `openai` npm package (pinned
//     version, installed once into the user cache directory) against the
//     server: completions and chat, each streaming and not, checking that
//     greedy streaming text equals the non-streaming text, that finish
//     reasons and usage are set. It skips when node or npm is absent.
//   - TestBenchServeAgainstServe runs `tandem bench serve` against the
//     server and checks that every request completed.
//
// The package has no code of its own; everything is in the _test files. The
// tests are slow (a build, a model load, an npm install on first use): `go
// test -short` skips them all.
package e2e
