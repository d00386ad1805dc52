package server

import (
	"context"

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

// Backend generates tokens for the handlers: the local engine, or later a
// router in front of remote workers.
//
// Submit's errors map to statuses with errors.Is: engine.ErrQueueFull → 429,
// engine.ErrTooLong and engine.ErrBadRequest → 400, engine.ErrClosed → 503,
// anything else → 500. ModelConfig's Context is the longest sequence (prompt
// plus generated tokens) the backend accepts, which the handlers check
// requests against.
type Backend interface {
	Submit(ctx context.Context, req engine.Request) (Stream, error)
	Stats() engine.Stats
	ModelConfig() model.Config
	Tokenizer() *tokenizer.Tokenizer
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
