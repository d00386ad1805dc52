// Package leg is the contract between the router and the prefill and decode
// workers for a leg of a disaggregated request: the X-Tandem-* headers, the
// HMAC signature that proves a leg comes from the router, and the bearer
// credential that guards the workers' and the router's /pd/* and /debug/*
// endpoints. Both keys are derived from the cluster token with HKDF-SHA256
// under their own labels, so neither is the token itself nor the transfer
// port's key.
//
// A signed leg carries X-Tandem-Expires (unix milliseconds, the signer's
// clock plus Lifetime) and X-Tandem-Signature (hex HMAC-SHA256 over
// Canonical's string: method, path, room, leg kind, prefill address,
// request id, expiry and the SHA-256 of the body; and, when the leg
// carries a W3C trace context, its traceparent and tracestate, so a trace
// context cannot be added to, changed on or taken off a signed leg). A
// verifier accepts it
// while its clock is before the expiry and the expiry is at most
// Lifetime+MaxSkew ahead of it: the router's and the worker's clocks must
// agree within MaxSkew.
//
// # Keys
//
//	cluster token ─HKDF-SHA256 "tandem leg v1"──► leg key ── Sign (router) / Verify (worker)
//	              └HKDF-SHA256 "tandem debug v1"► credential ── Transport (router, inspect)
//	                                                             RequireCredential (worker, router)
//
// NewKeys(token) needs at least TokenMin (16) bytes. A nil *Keys signs and
// guards nothing. Credential, CheckCredential, RequireCredential, Guard and
// Transport handle the bearer credential; CheckBearer any bearer key (the API
// key); Unauthorized and WriteUnauthorized write OpenAI-shaped 401s. The trust
// model is docs/security.md.
//
// # Leg kinds
//
// X-Tandem-Leg is prefill (KindPrefill) or decode (KindDecode), the two halves
// of a disaggregated request (a decode leg also carries X-Tandem-Prefill, the
// prefill worker's transfer address), or local (KindLocal): the router's
// selective disaggregation asks a decode worker to run the whole request
// itself, prefill included. A local leg carries a room id and a request id
// like the others and no prefill address. Info, FromHeader and Info.Set read
// and write the four leg headers. A verified leg reaches the worker as an
// argument (server.Legs.SubmitLeg).
//
// # Signature
//
// The canonical string is "tandem-leg-v1\n" then "len:field\n" for method,
// path, room, leg kind, prefill address, request id, expiry and the hex
// SHA-256 of the body: injective, so no two legs share a signature. A leg
// carrying a W3C trace context (traceparent, tracestate, which the router
// sets from its leg span) signs "tandem-leg-v2\n" and the same fields plus
// those two. Verify
// checks the MAC (constant time) before the clock and returns the leg's Info
// or an error wrapping ErrMissing, ErrMalformed, ErrExpired, ErrSkew or
// ErrBadMAC. Lifetime and MaxSkew are 60 s each; an expiry has at most 16
// digits and a signature exactly 64 hex digits. There is no replay cache: a
// replayed leg is refused by the worker's room table (room ids are single-use,
// 409).
//
// # Timings
//
// HeaderTiming (X-Tandem-Timing) carries a worker's durations of its part of a
// leg, on its own clock, as name=milliseconds pairs: a prefill worker's answer
// header queue_ms, prefill_ms, transfer_ms; a decode worker's first_decode_ms
// in an SSE comment before [DONE] (TimingComment, TimingFromComment), or a
// whole answer's header. Timing.String writes it, ParseTiming reads it
// (unknown names skipped; malformed, negative or non-finite values and values
// over 256 bytes refused). The router splits a disaggregated request's TTFT
// with it and never forwards it.
package leg
