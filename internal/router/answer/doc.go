// Package answer is the router's answer surgery: it reads the answers of
// OpenAI-compatible servers (server-sent event streams and JSON documents)
// and changes the few members the router must change, leaving every other
// byte as the server wrote it.
//
// # Place in the data flow
//
// internal/router reads a decode leg's stream with [Reader], one bounded
// event at a time, and for each event, or a whole non-streamed answer:
//
//   - passes it on byte for byte when there is nothing to change (one
//     sample, no prompt logprobs to splice in);
//   - or applies a [Splice]: the merged answer's id and the sample's choice
//     index when a request's samples are merged (n > 1, a list of prompts),
//     and the prefill leg's prompt logprobs ([PromptLogprobs] reads them
//     from its answer) into the first chunk or the document, with the
//     prompt's entries of the legacy token_logprobs filled from them under
//     echo ([FillEchoLogprobs]);
//   - reads what it needs without changing anything: whether a chunk
//     carries a token ([CarriesToken], for TTFT) or is the usage chunk
//     ([IsUsageChunk]).
//
// At the end of a request whose samples were merged, [MergeDocs] merges
// their whole answers and [UsageChunk] writes a stream's merged usage, both
// counting usage as `tandem serve` does ([MergeUsage]); [Frame] frames an
// event. The router also edits client bodies with [Object] (each sample's
// n, seed and prompt, the prefill leg's body) and workers' /debug/rooms
// documents. internal/loadgen reads its event streams with [Reader] too.
//
// # Invariants
//
//   - [Object] keeps an object's members in source order, each value as
//     its exact bytes; Set, Del and Splice change only the members they
//     name and return a new Object, leaving the one edited as it was. Get
//     reads the last of duplicate keys, as encoding/json does; Set replaces
//     the first in place and drops the others.
//   - [Reader] never holds more than its limit of one event: a longer one
//     is [ErrEventTooLong]. Event.Raw is the event exactly as sent, its
//     blank line included, so a pass-through is byte for byte. A stream
//     that ends inside an event gives io.ErrUnexpectedEOF, without the
//     partial event (an event counts once its blank line came).
//   - Nothing here panics or allocates without bound on a peer's bytes:
//     every parse returns an error (FuzzSSEReader and FuzzParseObject check
//     it, seeds in testdata/fuzz).
//
// The package does no I/O beyond reading the io.Reader it is given, keeps
// no state between calls, and imports of Tandem only internal/api/openai
// (Usage).
package answer
