package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	apileg "tandem/internal/api/leg"
	"tandem/internal/engine"
	"tandem/internal/pd/driver"
	"tandem/internal/pd/room"
	"tandem/internal/server"

	"go.opentelemetry.io/otel/trace"
)

// Error is a disaggregation failure as the router's HTTP leg sees it. The
// server answers with Status and an OpenAI-shaped error carrying Msg.
// Status comes from Reason (httpStatus); errors.Is(err, room.ErrTimeout)
// and the other classes of room work on it.
type Error struct {
	Status int
	Reason room.Reason
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

// HTTPStatus returns the status the HTTP leg is answered with.
func (e *Error) HTTPStatus() int { return e.Status }

// Unwrap returns the room error of Reason (room.ReasonError, which
// unwraps to its class), or nil for ReasonNone.
func (e *Error) Unwrap() error { return e.Reason.Err() }

// httpStatus is the one mapping from a room's reason to the HTTP status
// of the router's leg, by the room's error classes: a deadline passed 504;
// a duplicate room id 409; a worker full or stopping 503; a request
// without what its role needs 400; the client went away 499 (nginx's
// "client closed request": nobody is listening any more); any other
// failure (the peer's, the transfer's, the engine's) 502. A request for a
// room that already failed here (failed) gets 504 after a deadline and
// 502 otherwise, whatever the reason: its own client did not go away, and
// the worker refusing it is not what happened.
func httpStatus(r room.Reason, failed bool) int {
	err := r.Err()
	switch {
	case errors.Is(err, room.ErrTimeout):
		return http.StatusGatewayTimeout
	case failed:
		return http.StatusBadGateway
	case r == room.ReasonDuplicate:
		return http.StatusConflict
	case r == room.ReasonOverloaded || r == room.ReasonShutdown:
		return http.StatusServiceUnavailable
	case r == room.ReasonBadRequest:
		return http.StatusBadRequest
	case r == room.ReasonClientAbort:
		return 499
	}
	return http.StatusBadGateway
}

// legError builds the error a room's failure gives its HTTP leg.
func legError(r room.Reason, detail string) *Error {
	msg := fmt.Sprintf("disaggregated transfer failed: %s", r)
	if detail != "" {
		msg += ": " + detail
	}
	return &Error{Status: httpStatus(r, false), Reason: r, Msg: msg}
}

// refusal builds the error for a leg refused before it became a room:
// reason is one of the refusal reasons (duplicate, overloaded, shutdown,
// bad request), msg says why in words.
func refusal(r room.Reason, msg string) *Error {
	return &Error{Status: httpStatus(r, false), Reason: r, Msg: msg}
}

// rejectError builds the error for a request the driver rejected.
func rejectError(rj *driver.Reject) *Error {
	return &Error{Status: httpStatus(rj.Reason, rj.Failed), Reason: rj.Reason, Msg: rj.Msg}
}

// leg is this worker's record of one room's router HTTP leg and its engine
// sequence; the driver keeps the transfer bookkeeping. Fields are guarded
// by Worker.mu except where noted.
type leg struct {
	w   *Worker
	id  room.ID
	req engine.Request

	h         *engine.Handle
	engCancel context.CancelFunc
	resumed   bool
	// state (decode, models with recurrent state) is the buffer the
	// prompt's final state is received into, allocated at admission
	// with the pages (Worker.stateBytes); it then belongs to the driver's
	// room until Resume hands it to the engine.
	state []byte

	// outcome of the room for the HTTP leg
	once     sync.Once
	started  chan struct{} // closed when h is set or the leg failed (decode)
	finished chan struct{} // closed when the room succeeded or failed
	err      *Error        // set before finished/started close on failure
	first    engine.Update // prefill: the engine's update with the first token

	// When the leg's phases happened, for its leg.HeaderTiming (zero: not
	// yet). received is set at creation; the others with Worker.mu held.
	received, computeAt, firstAt, ackedAt time.Time // prefill
	resumedAt, firstOutAt                 time.Time // decode
	resumedIn                             room.Instant

	// For the room's log line, spans and /debug/rooms view (observe.go),
	// guarded by Worker.mu; the first four are set at creation.
	ctx                context.Context // the leg's HTTP request
	requestID, traceID string
	peer               string
	parent             trace.SpanContext   // the router's leg span
	chunks             []chunk             // prefill: engine steps of the prompt
	outTokens          int                 // decode: tokens the stream returned
	doneFinish         engine.FinishReason // decode: the stream's finish, once Done
	ended              bool                // the HTTP stream ended
	endedAt            time.Time
	endedIn            room.Instant
	outcome, reason    string
}

func newLeg(w *Worker, id room.ID, req engine.Request) *leg {
	return &leg{w: w, id: id, req: req, started: make(chan struct{}), finished: make(chan struct{}), received: time.Now()}
}

// timing returns the leg's leg.HeaderTiming value: a prefill leg's queue,
// prefill and transfer once decode acknowledged the KV, a decode leg's
// first decode step once its first token went out; "" before. Callers
// hold Worker.mu.
func (l *leg) timing() string {
	var t apileg.Timing
	switch {
	case !l.ackedAt.IsZero() && !l.firstAt.IsZero() && !l.computeAt.IsZero():
		admitted := l.computeAt.Add(l.first.QueueTime)
		q, p, x := admitted.Sub(l.received), l.firstAt.Sub(admitted), l.ackedAt.Sub(l.firstAt)
		t.Queue, t.Prefill, t.Transfer = &q, &p, &x
	case !l.resumedAt.IsZero() && !l.firstOutAt.IsZero():
		d := l.firstOutAt.Sub(l.resumedAt)
		p, o := len(l.req.Prompt), l.outTokens
		t.FirstDecode, t.PromptTokens, t.OutputTokens, t.Finish = &d, &p, &o, string(l.doneFinish)
	}
	return t.String()
}

// fail records the failure once and wakes the stream.
func (l *leg) fail(e *Error) {
	l.once.Do(func() {
		l.err = e
		close(l.finished)
		select {
		case <-l.started:
		default:
			close(l.started)
		}
	})
}

// succeed marks the transfer done (prefill: the leg can answer).
func (l *leg) succeed() {
	l.once.Do(func() {
		l.ackedAt = time.Now()
		close(l.finished)
	})
}

func (l *leg) setHandle(h *engine.Handle, cancel context.CancelFunc) {
	l.h, l.engCancel = h, cancel
	select {
	case <-l.started:
	default:
		close(l.started)
	}
}

func (l *leg) cancelEngine() {
	if l.engCancel != nil {
		l.engCancel()
	}
}

// prefillStream is what the prefill worker's HTTP handler reads: nothing
// until the transfer is acknowledged, then the first token and the end.
type prefillStream struct {
	l    *leg
	done bool
}

func (s *prefillStream) Next(ctx context.Context) (engine.Update, error) {
	if s.done {
		return engine.Update{}, io.EOF
	}
	select {
	case <-s.l.finished:
	case <-ctx.Done():
		return engine.Update{}, ctx.Err()
	}
	s.done = true
	s.l.w.mu.Lock()
	u, err := s.l.first, s.l.err
	s.l.w.mu.Unlock()
	if err != nil {
		return engine.Update{Done: true, Finish: engine.FinishError, Err: err}, nil
	}
	u.Done = true
	if u.Finish == "" {
		u.Finish = engine.FinishLength
	}
	return u, nil
}

func (s *prefillStream) Cancel() {
	s.l.w.clientAbort(s.l)
	s.l.w.streamEnded(s.l)
}

// LegTiming reports the prefill leg's queue, prefill and transfer times
// (server.LegTimer).
func (s *prefillStream) LegTiming() string {
	s.l.w.mu.Lock()
	defer s.l.w.mu.Unlock()
	return s.l.timing()
}

// decodeStream is what the decode worker's HTTP handler reads: the engine
// sequence's updates once the K/V has arrived, or the room's failure.
type decodeStream struct {
	l    *leg
	rest []engine.Update // one token each: the rest of an update server.SplitUpdate split
}

// Next returns the sequence's next update: one token per call, so that
// each engine step's token becomes its own chunk (see server.SplitUpdate).
func (s *decodeStream) Next(ctx context.Context) (engine.Update, error) {
	if len(s.rest) > 0 {
		u := s.rest[0]
		s.rest = s.rest[1:]
		return u, nil
	}
	u, err := s.next(ctx)
	if err != nil {
		return u, err
	}
	parts := server.SplitUpdate(u)
	s.rest = parts[1:]
	return parts[0], nil
}

// next returns the engine's next (possibly merged) update.
func (s *decodeStream) next(ctx context.Context) (engine.Update, error) {
	select {
	case <-s.l.started:
	case <-ctx.Done():
		return engine.Update{}, ctx.Err()
	}
	s.l.w.mu.Lock()
	h, lerr := s.l.h, s.l.err
	s.l.w.mu.Unlock()
	if h == nil {
		return engine.Update{Done: true, Finish: engine.FinishError, Err: lerr}, nil
	}
	u, err := h.Next(ctx)
	if err != nil {
		return u, err
	}
	if len(u.Tokens) > 0 || u.Done {
		s.l.w.mu.Lock()
		if len(u.Tokens) > 0 && s.l.firstOutAt.IsZero() {
			s.l.firstOutAt = time.Now()
		}
		s.l.outTokens += len(u.Tokens)
		if u.Done && u.Finish != engine.FinishStop && u.Finish != engine.FinishLength && s.l.err != nil {
			u.Finish, u.Err = engine.FinishError, s.l.err
		}
		if u.Done {
			s.l.doneFinish = u.Finish
		}
		s.l.w.mu.Unlock()
	}
	return u, nil
}

func (s *decodeStream) Cancel() {
	s.l.w.clientAbort(s.l)
	s.l.w.streamEnded(s.l)
}

// LegTiming reports the decode leg's first decode step (server.LegTimer).
func (s *decodeStream) LegTiming() string {
	s.l.w.mu.Lock()
	defer s.l.w.mu.Unlock()
	return s.l.timing()
}

// clientAbort handles the HTTP leg going away: before the room is over it
// is the core's EventClientAbort; after success (decode) it ends the
// sequence (once no KV write into its pages is in flight).
func (w *Worker) clientAbort(l *leg) {
	w.locked(func(now room.Instant) { w.d.ClientAbort(now, l.id, l) })
}
