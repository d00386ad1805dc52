package server

import (
	"context"

	"tandem/internal/api/leg"
	"tandem/internal/engine"
	"tandem/internal/engine/model"
	"tandem/internal/engine/tokenizer"
)

// Stream is one generating sequence as the handlers see it.
//
// Next blocks until the sequence has new tokens or has ended and returns
// everything since the previous call; after the update with Done it returns
// io.EOF. A done ctx makes Next return ctx.Err() promptly. Cancel ends the
// sequence and frees what it holds; it is idempotent and safe to call
// concurrently with Next. The handlers call Cancel on every exit path.
type Stream interface {
	Next(ctx context.Context) (engine.Update, error)
	Cancel()
}

// Backend is the engine the handlers serve: the local one (EngineBackend),
// or a test's fake. Submit starts one sequence of a request that is not a
// router's leg (legs go to Options.Legs); Stats feeds /metrics;
// ModelConfig's Context is the longest sequence (prompt plus generated
// tokens) it accepts, which the handlers check requests against, and its
// Name the default model name; Tokenizer encodes prompts and decodes
// tokens. Its methods must be safe for concurrent use.
//
// An error from Submit is answered (see submitError) by what it is: a
// StatusError with its own status; else, by errors.Is,
// engine.ErrQueueFull 429, engine.ErrTooLong and engine.ErrBadRequest 400
// (naming the prompt), engine.ErrClosed 503; anything else 500. An error
// a Stream ends with (engine.Update.Err) is answered alike, without the
// 429 and 400 cases (see streamError).
type Backend interface {
	Submit(ctx context.Context, req engine.Request) (Stream, error)
	Stats() engine.Stats
	ModelConfig() model.Config
	Tokenizer() *tokenizer.Tokenizer
}

// Legs serves the router's legs on a prefill or decode worker (package
// worker implements it): the handlers hand it each request whose leg
// signature Options.LegKeys verified, with what the signed headers say
// (leg.Info: the room, the request id, the leg's kind and, for a decode
// leg, the prefill worker's address). The request has passed every check
// a colocated one does, and is one sequence (a leg serves one room).
// SubmitLeg returns the leg's stream, which the handlers read and cancel
// as a Backend's; its errors are answered as Backend.Submit's (a
// StatusError chooses its status). It must be safe for concurrent use.
type Legs interface {
	SubmitLeg(ctx context.Context, li leg.Info, req engine.Request) (Stream, error)
}

// StatusError is an error that chooses the HTTP status it is answered
// with: a Backend, Legs or Stream that returns one (or an error wrapping
// one, found with errors.As) gets that status, Error() as the message, and
// type invalid_request_error for a 4xx status, server_error otherwise. A
// PD worker's leg errors are StatusErrors (409 for a room id in use, 504
// for a transfer past its deadline, ...).
type StatusError interface {
	error
	HTTPStatus() int
}

// EngineBackend adapts a local engine to Backend. Its ModelConfig reports
// the engine's usable context (engine.MaxContext, which the KV arena may make
// shorter than the model's training context).
func EngineBackend(e *engine.Engine) Backend {
	cfg := e.Model().Config
	cfg.Context = e.MaxContext()
	return &engineBackend{e: e, cfg: cfg}
}

type engineBackend struct {
	e   *engine.Engine
	cfg model.Config
}

func (b *engineBackend) Submit(ctx context.Context, req engine.Request) (Stream, error) {
	h, err := b.e.Submit(ctx, req)
	if err != nil {
		return nil, err // not a nil *Handle in a non-nil interface
	}
	return &stepStream{Stream: h}, nil // one token per Next: one chunk per engine step
}

func (b *engineBackend) Stats() engine.Stats             { return b.e.Stats() }
func (b *engineBackend) ModelConfig() model.Config       { return b.cfg }
func (b *engineBackend) Tokenizer() *tokenizer.Tokenizer { return b.e.Model().Tokenizer }
