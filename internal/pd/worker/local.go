package worker

import (
	"context"
	"fmt"
	"sync"
	"time"

	apileg "tandem/internal/api/leg"
	"tandem/internal/engine"
	"tandem/internal/pd/room"
	"tandem/internal/server"

	"go.opentelemetry.io/otel/trace"
)

// Local legs: the router's selective disaggregation sends a request whose
// prompt is short to a decode worker as one signed leg of kind "local"
// (apileg.KindLocal: X-Tandem-Leg: local, a room id and a request id, no
// prefill address) with the ordinary request body. The decode worker runs
// it whole in its own continuous batch, prefill included, exactly as
// `tandem serve` would: the same engine request, the same streamed (or
// not) OpenAI response from the server's handlers, the same finish
// reasons. Its prefill chunks are scheduled like every other prompt
// (shortest remaining first with aging) and sized by the engine's
// ITLTarget (`--itl-target`) so they do not stall the worker's decodes.
//
// No room, no transfer: the router aborts a local leg by closing the HTTP
// request, which cancels the engine sequence. Room ids stay single-use:
// a local leg whose room id this worker has seen within the signature
// lifetime is refused with 409, as a replayed disaggregated leg is.

// Local-leg replay window: a signed leg is valid for at most
// leg.Lifetime+leg.MaxSkew on this worker's clock, so remembering ids that
// long refuses every replay. localSeenMax bounds the memory; beyond it the
// oldest ids are forgotten early (only at more than 500 local legs a
// second).
const (
	localSeenTTL = apileg.Lifetime + apileg.MaxSkew
	localSeenMax = 1 << 16
)

// localLegs remembers the room ids of recent local legs.
type localLegs struct {
	mu    sync.Mutex
	seen  map[room.ID]time.Time
	order []room.ID // ids in the order they came, for expiry
}

// claim records id and reports whether it is new.
func (l *localLegs) claim(id room.ID, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[room.ID]time.Time{}
	}
	for len(l.order) > 0 {
		old := l.order[0]
		if now.Sub(l.seen[old]) < localSeenTTL && len(l.order) < localSeenMax {
			break
		}
		delete(l.seen, old)
		l.order = l.order[1:]
	}
	if _, dup := l.seen[id]; dup {
		return false
	}
	l.seen[id] = now
	l.order = append(l.order, id)
	return true
}

// submitLocal serves a local leg (see the top of this file): on a decode
// worker, as the colocated engine backend serves any request.
func (w *Worker) submitLocal(ctx context.Context, id room.ID, li apileg.Info, req engine.Request) (server.Stream, error) {
	if w.role != room.RoleDecode {
		return nil, refusal(room.ReasonBadRequest, fmt.Sprintf("this is a %s worker; a %q leg (the whole request) goes to a decode worker",
			w.role.String(), apileg.KindLocal))
	}
	if li.Prefill != "" {
		return nil, refusal(room.ReasonBadRequest, fmt.Sprintf("a %q leg runs on this worker alone and carries no %s header",
			apileg.KindLocal, apileg.HeaderPrefill))
	}
	if !w.local.claim(id, time.Now()) {
		return nil, refusal(room.ReasonDuplicate, fmt.Sprintf("room %s was already used on this worker; room ids are single-use", id))
	}
	w.log.Debug("local leg: prefill and decode on this worker", "room", id, "request", li.RequestID, "prompt_tokens", len(req.Prompt))
	received := time.Now()
	st, err := w.colocated.Submit(ctx, req)
	if err != nil {
		return nil, err
	}
	tctx := traceContext(ctx, li)
	return &localStream{Stream: st, w: w, id: id, li: li, ctx: tctx, parent: trace.SpanContextFromContext(tctx),
		prompt: len(req.Prompt), received: received}, nil
}
