package worker

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	apileg "tandem/internal/api/leg"
	"tandem/internal/engine"
	"tandem/internal/pd/room"
	"tandem/internal/server"
	"tandem/internal/telemetry"
)

// Observing a room: its trace context, its phases as spans, its log line,
// and a decode room's stream.
//
// A leg's trace context is the traceparent the router signed (package
// leg). When its stream ends (the HTTP handler cancels every stream it
// followed, however it ended) the worker writes one log line for the
// room ("room done": request id, trace id, role, phase timings, tokens,
// outcome and reason) and, when tracing is on, its spans, made after the
// fact from the times the leg recorded: a SERVER span for the room
// (tandem.prefill or tandem.decode) under the router's leg span, and its
// phases: on a prefill worker tandem.queue (leg received to the prompt
// admitted), tandem.prefill.compute (admitted to the first token, each
// engine step of the prompt an event) and tandem.kv_transfer (first token
// to decode's acknowledgement); on a decode worker tandem.kv_wait (leg
// received to the KV in and the sequence resumed), tandem.first_decode
// (resumed to the first token out) and tandem.decoding (to the stream's
// end). Every span has the room, the request id, the path and the outcome
// with its reason. Local legs get one tandem.local span.
//
// A decode room's core state is succeeded once its KV arrived; its
// request is still generating. The worker keeps the legs of recent rooms
// (views) so /debug/rooms shows such a room as state "decoding" (live)
// until its stream ends, then succeeded, or failed with the stream's
// reason (client_abort, engine).

// viewsMax bounds the legs kept for /debug/rooms (oldest dropped first).
const viewsMax = 1024

// chunksMax bounds the prefill chunk events a leg records.
const chunksMax = 256

// StateDecoding is a decode room's state in /debug/rooms while its
// request generates after the KV arrived (not terminal).
const StateDecoding = "decoding"

// chunk is one engine step of a prefill leg's prompt.
type chunk struct {
	at       time.Time
	computed int
}

// traceContext returns ctx with li's signed trace context.
func traceContext(ctx context.Context, li apileg.Info) context.Context {
	if li.TraceParent == "" {
		return ctx
	}
	h := http.Header{}
	h.Set(telemetry.HeaderTraceParent, li.TraceParent)
	if li.TraceState != "" {
		h.Set(telemetry.HeaderTraceState, li.TraceState)
	}
	return telemetry.Extract(ctx, h)
}

// addView keeps l for /debug/rooms. Callers hold w.mu.
func (w *Worker) addView(l *leg) {
	if w.views == nil {
		w.views = map[room.ID]*leg{}
	}
	w.views[l.id] = l
	w.viewOrder = append(w.viewOrder, l.id)
	for len(w.viewOrder) > viewsMax {
		delete(w.views, w.viewOrder[0])
		w.viewOrder = w.viewOrder[1:]
	}
}

// streamEnded records the end of l's HTTP stream (the handler cancelled
// it): the outcome of its request on this worker. sawDone and fin are
// what the stream returned last (decode); ctxDone: the router's request
// had gone. It then logs the room and emits its spans, once.
func (w *Worker) streamEnded(l *leg) {
	w.mu.Lock()
	if l.ended {
		w.mu.Unlock()
		return
	}
	l.ended, l.endedAt, l.endedIn = true, time.Now(), w.now()
	switch {
	case l.err != nil:
		l.outcome, l.reason = telemetry.OutcomeFailed, l.err.Reason.String()
		if l.err.Reason == room.ReasonClientAbort {
			l.outcome = telemetry.OutcomeCancelled
		}
	case l.doneFinish == engine.FinishError:
		l.outcome, l.reason = telemetry.OutcomeFailed, "engine"
	case l.doneFinish != "":
		l.outcome = telemetry.OutcomeOK
	case w.role == room.RolePrefill && !l.ackedAt.IsZero():
		l.outcome = telemetry.OutcomeOK
	case l.ctx != nil && l.ctx.Err() != nil:
		l.outcome, l.reason = telemetry.OutcomeCancelled, room.ReasonClientAbort.String()
	default:
		l.outcome = telemetry.OutcomeOK // the server ended it (a stop string)
	}
	r := l.report()
	w.mu.Unlock()
	w.emit(r)
}

// roomReport is a copy of a leg's record, made under w.mu, to log and
// trace outside it.
type roomReport struct {
	role                                  room.Role
	id                                    room.ID
	requestID, traceID, peer              string
	parent                                trace.SpanContext
	outcome, reason, finish               string
	prompt, output                        int
	received, computeAt, firstAt, ackedAt time.Time
	admitted                              time.Time
	resumedAt, firstOutAt, endedAt        time.Time
	chunks                                []chunk
}

// report copies l for emit. Callers hold w.mu.
func (l *leg) report() roomReport {
	r := roomReport{role: l.w.role, id: l.id, requestID: l.requestID, traceID: l.traceID, peer: l.peer, parent: l.parent,
		outcome: l.outcome, reason: l.reason, finish: string(l.doneFinish), prompt: len(l.req.Prompt), output: l.outTokens,
		received: l.received, computeAt: l.computeAt, firstAt: l.firstAt, ackedAt: l.ackedAt,
		resumedAt: l.resumedAt, firstOutAt: l.firstOutAt, endedAt: l.endedAt, chunks: l.chunks}
	if !l.computeAt.IsZero() {
		r.admitted = l.computeAt.Add(l.first.QueueTime)
	}
	return r
}

func msSince(a, b time.Time) float64 {
	if a.IsZero() || b.IsZero() {
		return -1
	}
	return float64(b.Sub(a).Microseconds()) / 1000
}

// unsampled reports whether the router decided not to record the trace
// of a leg with parent sc: its spans would be dropped (the sampler is
// parent-based), so building them is skipped.
func unsampled(sc trace.SpanContext) bool { return sc.IsValid() && !sc.IsSampled() }

// emit writes r's log line and, with tracing on, its spans.
func (w *Worker) emit(r roomReport) {
	if w.log.Enabled(context.Background(), slog.LevelInfo) {
		args := []any{"room", r.id.String(), "request", r.requestID, "trace_id", r.traceID, "path", "disaggregated",
			"outcome", r.outcome, "prompt_tokens", r.prompt}
		add := func(k string, v float64) {
			if v >= 0 {
				args = append(args, k, v)
			}
		}
		if r.role == room.RolePrefill {
			add("queue_ms", msSince(r.received, r.admitted))
			add("prefill_ms", msSince(r.admitted, r.firstAt))
			add("transfer_ms", msSince(r.firstAt, r.ackedAt))
		} else {
			add("kv_wait_ms", msSince(r.received, r.resumedAt))
			add("first_decode_ms", msSince(r.resumedAt, r.firstOutAt))
			add("decode_ms", msSince(r.firstOutAt, r.endedAt))
			args = append(args, "output_tokens", r.output, "finish", r.finish)
		}
		add("total_ms", msSince(r.received, r.endedAt))
		if r.reason != "" {
			args = append(args, "reason", r.reason)
		}
		w.log.Info("room done", args...)
	}
	if !w.tracing.Enabled() || unsampled(r.parent) {
		return
	}
	tr := w.tracing.Tracer()
	common := []attribute.KeyValue{attribute.String(telemetry.AttrRoom, r.id.String()), attribute.String(telemetry.AttrRequestID, r.requestID),
		attribute.String(telemetry.AttrPath, "disaggregated"), attribute.String(telemetry.AttrOutcome, r.outcome)}
	if r.reason != "" {
		common = append(common, attribute.String(telemetry.AttrReason, r.reason))
	}
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), r.parent)
	name := telemetry.SpanPrefillRoom
	if r.role == room.RoleDecode {
		name = telemetry.SpanDecodeRoom
	}
	attrs := append([]attribute.KeyValue{attribute.String(telemetry.AttrLeg, r.role.String()), attribute.String(telemetry.AttrPeer, r.peer),
		attribute.Int(telemetry.AttrInputTokens, r.prompt)}, common...)
	if r.role == room.RoleDecode {
		attrs = append(attrs, attribute.Int(telemetry.AttrOutputTokens, r.output))
		if r.finish != "" {
			attrs = append(attrs, attribute.StringSlice(telemetry.AttrFinishReasons, []string{r.finish}))
		}
	}
	rctx, rs := tr.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(r.received), trace.WithAttributes(attrs...))
	phase := func(name string, from, to time.Time, events func(trace.Span)) {
		if from.IsZero() {
			return
		}
		ok := !to.IsZero()
		if !ok {
			to = r.endedAt // the phase was under way when the room ended
		}
		_, sp := tr.Start(rctx, name, trace.WithTimestamp(from), trace.WithAttributes(common...))
		if events != nil {
			events(sp)
		}
		if !ok && r.outcome != telemetry.OutcomeOK {
			sp.SetStatus(codes.Error, r.reason)
		}
		sp.End(trace.WithTimestamp(to))
	}
	if r.role == room.RolePrefill {
		phase(telemetry.SpanQueue, r.received, r.admitted, nil)
		phase(telemetry.SpanCompute, r.admitted, r.firstAt, func(sp trace.Span) {
			for _, c := range r.chunks {
				sp.AddEvent(telemetry.EventPrefillChunk, trace.WithTimestamp(c.at),
					trace.WithAttributes(attribute.Int(telemetry.AttrComputedTokens, c.computed)))
			}
		})
		phase(telemetry.SpanTransfer, r.firstAt, r.ackedAt, nil)
	} else {
		phase(telemetry.SpanKVWait, r.received, r.resumedAt, nil)
		phase(telemetry.SpanFirstDecode, r.resumedAt, r.firstOutAt, nil)
		phase(telemetry.SpanDecode, r.firstOutAt, r.endedAt, nil)
	}
	if r.outcome == telemetry.OutcomeFailed {
		rs.SetStatus(codes.Error, r.reason)
	}
	rs.End(trace.WithTimestamp(r.endedAt))
}

// localStream is a local leg's stream: the engine's, with the leg's
// token counts and finish reason for the router (server.LegTimer), its
// log line and its span.
type localStream struct {
	server.Stream
	w         *Worker
	id        room.ID
	li        apileg.Info
	ctx       context.Context
	parent    trace.SpanContext
	prompt    int
	received  time.Time
	firstOut  time.Time
	out       int
	finish    string
	endedOnce bool
}

func (s *localStream) Next(ctx context.Context) (engine.Update, error) {
	u, err := s.Stream.Next(ctx)
	if err == nil {
		if len(u.Tokens) > 0 && s.firstOut.IsZero() {
			s.firstOut = time.Now()
		}
		s.out += len(u.Tokens)
		if u.Done {
			s.finish = string(u.Finish)
		}
	}
	return u, err
}

// LegTiming reports the tokens and finish reason (server.LegTimer).
func (s *localStream) LegTiming() string {
	p, o := s.prompt, s.out
	return apileg.Timing{PromptTokens: &p, OutputTokens: &o, Finish: s.finish}.String()
}

func (s *localStream) Cancel() {
	s.Stream.Cancel()
	if s.endedOnce {
		return
	}
	s.endedOnce = true
	end := time.Now()
	outcome, reason := telemetry.OutcomeOK, ""
	switch {
	case s.finish == string(engine.FinishError):
		outcome, reason = telemetry.OutcomeFailed, "engine"
	case s.finish == "" && s.ctx.Err() != nil:
		outcome, reason = telemetry.OutcomeCancelled, room.ReasonClientAbort.String()
	}
	w := s.w
	if w.log.Enabled(context.Background(), slog.LevelInfo) {
		args := []any{"room", s.id.String(), "request", s.li.RequestID, "trace_id", telemetry.TraceID(s.ctx), "path", "local",
			"outcome", outcome, "prompt_tokens", s.prompt, "output_tokens", s.out, "finish", s.finish,
			"ttft_ms", msSince(s.received, s.firstOut), "total_ms", msSince(s.received, end)}
		if reason != "" {
			args = append(args, "reason", reason)
		}
		w.log.Info("room done", args...)
	}
	if !w.tracing.Enabled() || unsampled(s.parent) {
		return
	}
	attrs := []attribute.KeyValue{attribute.String(telemetry.AttrRoom, s.id.String()), attribute.String(telemetry.AttrRequestID, s.li.RequestID),
		attribute.String(telemetry.AttrPath, "local"), attribute.String(telemetry.AttrOutcome, outcome),
		attribute.Int(telemetry.AttrInputTokens, s.prompt), attribute.Int(telemetry.AttrOutputTokens, s.out)}
	if s.finish != "" {
		attrs = append(attrs, attribute.StringSlice(telemetry.AttrFinishReasons, []string{s.finish}))
	}
	if reason != "" {
		attrs = append(attrs, attribute.String(telemetry.AttrReason, reason))
	}
	tr := w.tracing.Tracer()
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), s.parent)
	rctx, sp := tr.Start(ctx, telemetry.SpanLocalRoom, trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(s.received), trace.WithAttributes(attrs...))
	if !s.firstOut.IsZero() {
		_, fs := tr.Start(rctx, telemetry.SpanFirstDecode, trace.WithTimestamp(s.received), trace.WithAttributes(attrs...))
		fs.End(trace.WithTimestamp(s.firstOut))
	}
	if outcome == telemetry.OutcomeFailed {
		sp.SetStatus(codes.Error, reason)
	}
	sp.End(trace.WithTimestamp(end))
}
