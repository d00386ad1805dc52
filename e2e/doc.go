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
//   - TestOpenAINodeClientThroughRouter runs the same client against
//     `tandem up` (router, one prefill and one decode worker).
//   - TestPDMatchesServe checks that greedy output through `tandem up`
//     equals `tandem serve`'s, token for token with logprobs and
//     top_logprobs, streaming and not, for a synthesized Q8_0 model and
//     stories260K, with prompts over a KV page and over a prefill chunk;
//     TestPromptLogprobsThroughRouter and TestEchoLogprobsThroughRouter do
//     the same for prompt logprobs and echo with logprobs.
//   - TestBenchServeAgainstServe runs `tandem bench serve` against the
//     server and checks that every request completed.
//   - TestChaosSoak runs 2 prefill + 2 decode workers and the router
//     (internal/cluster) under random load with client disconnects, kills a
//     worker with SIGKILL mid-load and restarts it, then checks through
//     /debug/cluster and each worker's /metrics that no room is pinned, no
//     KV page or sequence leaked, the watchdog never fired, and every
//     request got exactly one outcome. Its size is set by -chaos.* flags
//     (300 requests by default; scripts/chaos.sh runs 3000).
//   - TestRollingRestart drains and restarts every process of a fleet of
//     2 prefill and 2 decode workers behind 2 routers, one at a time, under an open loop
//     at 60% of its measured capacity: every request completes, nothing is
//     pinned or leaked. TestRouterKill SIGKILLs one of the two routers under
//     the same load: only requests it carried fail. TestDrainDeadlineServe
//     and TestDrainDeadlineDecode end a stream at a drain's deadline.
//   - TestStructuredOutputsNode (and its 128k Llama 3 vocabulary variant)
//     runs the official client's zod helpers for structured outputs and tool
//     calls against `tandem serve` and `tandem up`; TestListPromptMatchesServe,
//     TestSelectiveDisaggregation and TestUpModelFromHub cover prompt lists,
//     selective disaggregation and `--model hf.co/...`. README.md lists the
//     rest.
//
// The package has no code of its own; everything is in the _test files. The
// tests are slow (a build, a model load, an npm install on first use): `go
// test -short` skips them all.
package e2e
