package router

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	apileg "tandem/internal/api/leg"
	"tandem/internal/telemetry"
)

// Tracing and the per-request log line. Every generation request gets a
// SERVER span named as the GenAI conventions name inference spans
// ("chat MODEL", "text_completion MODEL"), a child of the client's
// traceparent when it sent one; under it a tandem.route span (arrival to
// the first leg sent: reading the body, deciding the path, picking the
// pair), one tandem.attempt span per pair tried (retries are more
// attempts, and a "retry" event on the request span), and under each
// attempt one CLIENT span per leg, whose context goes to the worker in
// the leg's signed traceparent. Without an exporter the tracer is the
// no-op one: a client's trace context is still carried to the workers
// (and its trace id logged), nothing is recorded.
//
// When the request ends the router writes one log line for it ("request
// done"): request id, trace id, path, the phases of its time to first
// token, tokens, outcome and reason.

// reqObs follows one generation request for its span and log line. Its
// fields after mu are guarded by mu (samples report concurrently).
type reqObs struct {
	rt      *Router
	span    trace.Span
	traceID string
	t0      time.Time
	req     *clientRequest
	model   string

	mu                sync.Mutex
	routed            bool
	ttft              time.Duration
	haveTTFT          bool
	path, pathReason  string
	attempts, retries int
	timing            apileg.Timing // sample 0's workers' phases
	route             time.Duration // arrival to sample 0's first leg sent
	in, out           int
	finishes          []string
	outcome, reason   string
	status            int
}

// startRequest opens req's span (started at t0, the request's arrival)
// under the client's trace context in r, and returns the context its
// samples run in.
func (rt *Router) startRequest(r *http.Request, t0 time.Time, req *clientRequest) (context.Context, *reqObs) {
	ctx := telemetry.Extract(r.Context(), r.Header)
	op := telemetry.OpCompletion
	if req.ep.chat {
		op = telemetry.OpChat
	}
	model := ""
	if raw, ok := req.obj.Get("model"); ok {
		model = jsonString(raw)
	}
	o := &reqObs{rt: rt, t0: t0, req: req, model: model, outcome: telemetry.OutcomeOK, status: http.StatusOK}
	ctx, o.span = rt.tracer.Start(ctx, telemetry.SpanName(op, model), trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(t0))
	if o.span.IsRecording() { // attributes only for a span that is kept
		o.span.SetAttributes(attribute.String(telemetry.AttrOperation, op), attribute.String(telemetry.AttrModel, model),
			attribute.String(telemetry.AttrRequestID, req.requestID))
	}
	o.traceID = telemetry.TraceID(ctx)
	return ctx, o
}

// sentFirstLeg records the end of the route phase: sample 0's first
// attempt has its pair and sends its legs now.
func (o *reqObs) sentFirstLeg(ctx context.Context, s *sample) {
	if s.i != 0 {
		return
	}
	o.mu.Lock()
	first := !o.routed
	o.routed = true
	now := time.Now()
	if first {
		o.route = now.Sub(o.t0)
	}
	o.mu.Unlock()
	if first && o.span.IsRecording() {
		_, sp := o.rt.tracer.Start(trace.ContextWithSpan(ctx, o.span), telemetry.SpanRoute, trace.WithTimestamp(o.t0),
			trace.WithAttributes(attribute.String(telemetry.AttrRequestID, o.req.requestID)))
		sp.End(trace.WithTimestamp(now))
	}
}

// startAttempt opens the span of one attempt of sample s, naming the
// workers picked for it (prefill "" for a local attempt).
func (o *reqObs) startAttempt(ctx context.Context, s *sample, dec decision, room, prefill, decode string) (context.Context, trace.Span) {
	o.mu.Lock()
	o.attempts++
	if s.i == 0 {
		o.path, o.pathReason = dec.path, dec.reason
	}
	o.mu.Unlock()
	ctx, sp := o.rt.tracer.Start(ctx, telemetry.SpanAttempt)
	if sp.IsRecording() { // endSpan adds more: passing these at Start would save nothing
		sp.SetAttributes(attribute.String(telemetry.AttrRequestID, o.req.requestID), attribute.String(telemetry.AttrRoom, room),
			attribute.String(telemetry.AttrPath, dec.path), attribute.String(telemetry.AttrPathReason, dec.reason),
			attribute.Int(telemetry.AttrAttempt, s.try), attribute.Int(telemetry.AttrSample, s.i),
			attribute.String(telemetry.AttrPrefillWorker, prefill), attribute.String(telemetry.AttrDecodeWorker, decode))
	}
	return ctx, sp
}

// retry notes that sample s goes to another pair.
func (o *reqObs) retry(s *sample, why string) {
	o.mu.Lock()
	o.retries++
	o.mu.Unlock()
	if !o.span.IsRecording() {
		return
	}
	o.span.AddEvent(telemetry.EventRetry, trace.WithAttributes(attribute.Int(telemetry.AttrSample, s.i),
		attribute.Int(telemetry.AttrAttempt, s.try+1), attribute.String(telemetry.AttrReason, why)))
}

// answered records a sample's answered attempt: its workers' phases
// (sample 0's are the request's), tokens and finish reason.
func (o *reqObs) answered(s *sample, t apileg.Timing) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if s.i == 0 {
		o.timing = t
	}
	if t.PromptTokens != nil && (o.req.prompts != nil || s.i == 0) && s.i%o.req.n == 0 {
		o.in += *t.PromptTokens // each prompt's tokens once
	}
	if t.OutputTokens != nil {
		o.out += *t.OutputTokens
	}
	if t.Finish != "" {
		o.finishes = append(o.finishes, t.Finish)
	}
}

// firstToken records the request's time to first token (its first
// sample's).
func (o *reqObs) firstToken(d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.haveTTFT {
		o.ttft, o.haveTTFT = d, true
	}
}

// fail records how the request failed (the first failure stands).
func (o *reqObs) fail(outcome, reason string, status int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.outcome != telemetry.OutcomeOK {
		return
	}
	o.outcome, o.reason, o.status = outcome, reason, status
}

// end closes the request's span and writes its log line.
func (o *reqObs) end() {
	o.mu.Lock()
	defer o.mu.Unlock()
	e2e := time.Since(o.t0)
	if o.span.IsRecording() {
		attrs := make([]attribute.KeyValue, 0, 7)
		attrs = append(attrs, attribute.String(telemetry.AttrPath, o.path), attribute.String(telemetry.AttrOutcome, o.outcome),
			attribute.Int(telemetry.AttrInputTokens, o.in), attribute.Int(telemetry.AttrOutputTokens, o.out))
		if len(o.finishes) > 0 {
			attrs = append(attrs, attribute.StringSlice(telemetry.AttrFinishReasons, o.finishes))
		}
		if o.outcome != telemetry.OutcomeOK {
			attrs = append(attrs, attribute.String(telemetry.AttrReason, o.reason), attribute.String(telemetry.AttrErrorType, o.outcome))
			o.span.SetStatus(codes.Error, o.reason)
		}
		o.span.SetAttributes(attrs...)
	}
	o.span.End()

	if !o.rt.log.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	args := make([]any, 0, 48) // room for every pair below: no regrowth
	args = append(args, "request", o.req.requestID, "trace_id", o.traceID, "endpoint", o.req.ep.name, "model", o.model,
		"path", o.path, "path_reason", o.pathReason, "samples", o.req.samples, "attempts", o.attempts,
		"outcome", o.outcome, "status", o.status, "prompt_tokens", o.in, "output_tokens", o.out,
		"e2e_ms", millis(e2e))
	if o.haveTTFT {
		args = append(args, "ttft_ms", millis(o.ttft), "route_ms", millis(o.route))
	}
	for _, p := range []struct {
		k string
		d *time.Duration
	}{{"queue_ms", o.timing.Queue}, {"prefill_ms", o.timing.Prefill}, {"transfer_ms", o.timing.Transfer}, {"first_decode_ms", o.timing.FirstDecode}} {
		if p.d != nil {
			args = append(args, p.k, millis(*p.d))
		}
	}
	if len(o.finishes) > 0 {
		args = append(args, "finish", strings.Join(o.finishes, ","))
	}
	if o.reason != "" {
		args = append(args, "reason", o.reason)
	}
	o.rt.log.Info("request done", args...)
}

// startLeg opens a leg's CLIENT span under its attempt's.
func (rt *Router) startLeg(ctx context.Context, kind, worker string, rec *record) (context.Context, trace.Span) {
	name := telemetry.SpanLegPrefill
	switch kind {
	case apileg.KindDecode:
		name = telemetry.SpanLegDecode
	case apileg.KindLocal:
		name = telemetry.SpanLegLocal
	}
	ctx, sp := rt.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient))
	if sp.IsRecording() { // endSpan adds more: passing these at Start would save nothing
		sp.SetAttributes(attribute.String(telemetry.AttrLeg, kind), attribute.String(telemetry.AttrWorker, worker),
			attribute.String(telemetry.AttrRoom, rec.room), attribute.String(telemetry.AttrRequestID, rec.requestID),
			attribute.String(telemetry.AttrPath, rec.dec.path))
	}
	return ctx, sp
}

// endSpan ends a PD span with its outcome and reason.
func endSpan(sp trace.Span, outcome, reason string) {
	if !sp.IsRecording() {
		sp.End()
		return
	}
	if outcome == telemetry.OutcomeOK {
		sp.SetAttributes(attribute.String(telemetry.AttrOutcome, outcome))
	} else {
		sp.SetAttributes(attribute.String(telemetry.AttrOutcome, outcome), attribute.String(telemetry.AttrReason, reason))
		if outcome == telemetry.OutcomeFailed {
			sp.SetStatus(codes.Error, reason)
		}
	}
	sp.End()
}

// mergeTiming is a disaggregated attempt's timing: prefill's phases with
// decode's first decode step, tokens and finish reason.
func mergeTiming(prefill, decode apileg.Timing) apileg.Timing {
	t := prefill
	t.FirstDecode, t.PromptTokens, t.OutputTokens, t.Finish = decode.FirstDecode, decode.PromptTokens, decode.OutputTokens, decode.Finish
	return t
}
