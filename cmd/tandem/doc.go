// Command tandem serves large language models with prefill and decode split
// across workers. One binary plays every role:
//
//	tandem up        routers and N prefill + M decode workers on this machine
//	tandem route     the OpenAI-compatible router in front of workers
//	tandem prefill   a prefill worker: runs prompts, pushes KV pages to decode
//	tandem decode    a decode worker: receives KV pages, generates in its batch
//	tandem serve     one colocated worker (prefill and decode together)
//	tandem inspect   a cluster's rooms, flagging any past its deadline
//	tandem generate  one prompt on the engine, streamed to stdout
//	tandem model     inspect (info) and synthesize (synth) GGUF models
//	tandem bench     engine speed, or load on any OpenAI endpoint
//
// main.go only builds the command tree; each command's file parses its
// flags and wires internal packages together. drain.go holds what every
// serving command (serve, prefill, decode, route) shares about stopping:
// the first SIGINT, SIGTERM or SIGHUP cancels the command's context and
// the command drains (internal/api/drain, --drain-settle, --drain-timeout);
// a second one ends the drain's settle window.
package main
