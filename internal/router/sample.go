package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"tandem/internal/api/httpx"
	apileg "tandem/internal/api/leg"
	"tandem/internal/api/openai"
	"tandem/internal/router/answer"
	"tandem/internal/router/pool"
	"tandem/internal/telemetry"
)

// reply is what a sample hands the client writer.
type reply struct {
	sample      int
	data        []byte        // bytes for the client: SSE events, or a whole one-sample answer
	contentType string        // of a whole one-sample answer
	doc         answer.Object // several samples, not streamed: the sample's answer, choices re-indexed
	usage       *openai.Usage // several samples, streamed: the sample's usage chunk, if it sent one
	usageChunk  answer.Object // several samples, streamed: that chunk, as a template for the merged one
	token       bool          // data carries a token (for TTFT)
	warning     string        // the decode worker's Warning header, passed on to the client
	rec         *record       // the attempt the reply comes from
	done        bool          // the sample finished; nothing follows
	err         *openai.Error // the sample failed; nothing else is set
}

// sample is one of a request's samples (n for each prompt): one room, one prefill and decode
// pair (two when the first attempt failed before any worker saw it).
type sample struct {
	i       int
	req     *clientRequest
	out     chan<- reply
	decode  []byte   // body of the decode leg
	prefill []byte   // body of the prefill leg
	dec     decision // where its prompt's samples go
	obs     *reqObs  // the request's span and log line
	try     int      // the attempt under way, from 1
}

// send hands r to the writer unless ctx ends first.
func (s *sample) send(ctx context.Context, r reply) bool {
	r.sample = s.i
	select {
	case s.out <- r:
		return true
	case <-ctx.Done():
		return false
	}
}

// prefillResult is how a prefill leg ended.
type prefillResult struct {
	promptLogprobs json.RawMessage // choices[0].prompt_logprobs, when asked for and present
	cached         int             // the prompt tokens the prefill worker found in its prefix cache
	err            *legError
}

// decodeEvent is one step of a decode leg's answer: a streamed event, the
// whole non-streamed body, or the leg's failure.
type decodeEvent struct {
	ev          answer.Event
	body        []byte
	contentType string
	warning     string // the worker's Warning header, on its answer's first event (a template that drops tools)
	end         bool   // the answer is complete ([DONE], or the whole body)
	err         *legError
}

// attemptResult is how one attempt of a sample ended.
type attemptResult struct {
	err        *openai.Error  // nil: the sample was answered, or the request context ended
	retry      bool           // nothing reached the client: another pair may be tried
	pickFailed bool           // no pair could be picked
	failed     []*pool.Worker // workers not to pick on a retry: their leg failed
	partner    []*pool.Worker // workers to pick on a retry only if there is no other: their leg was cut short
	drained    bool           // a worker answered the draining answer: the retry does not count as an attempt
}

// runSample runs sample s to its end, trying another pair (up to
// attemptsMax in all) when an attempt failed before anything of it reached
// the client (see retryable). It
// sends exactly one error, or the sample's answer, to the writer (nothing
// once ctx is done).
func (rt *Router) runSample(ctx context.Context, s *sample) {
	var exclude, avoid []*pool.Worker
	var last *openai.Error
	drained := 0 // attempts a draining worker refused: they do not count against attemptsMax
	for try := 1; ; try++ {
		s.try = try
		res := rt.attempt(ctx, s, exclude, avoid)
		if res.err == nil || ctx.Err() != nil {
			return
		}
		if res.pickFailed && last != nil {
			res.err = last // the retry found no other pair: report the first failure
		}
		if res.drained {
			drained++
		}
		if !res.retry || try-drained >= attemptsMax || try >= attemptsMax+drainedRetriesMax {
			rt.met.cluster.success.WithLabelValues(rt.workers.Model(), "error").Inc()
			s.send(ctx, reply{err: res.err})
			return
		}
		last = res.err
		rt.met.retries.Inc()
		s.obs.retry(s, res.err.Message)
		rt.log.Warn("retrying a sample on another pair; nothing of it reached the client",
			"request", s.req.requestID, "sample", s.i, "attempt", try+1, "err", res.err.Message)
		exclude = append(exclude, res.failed...)
		avoid = append(avoid, res.partner...)
	}
}

// attempt sends sample s to one pair (or, when the request's decision
// is local, or no prefill worker can be picked and selective
// disaggregation is on, as one local leg to a decode worker) and follows
// it to its end.
func (rt *Router) attempt(ctx context.Context, s *sample, exclude, avoid []*pool.Worker) attemptResult {
	dec := s.dec
	if dec.path == pathLocal {
		return rt.attemptLocal(ctx, s, dec, exclude, avoid)
	}
	dec, spilled := rt.spill(dec, exclude)
	if spilled {
		return rt.attemptLocal(ctx, s, dec, exclude, avoid)
	}
	p, err := rt.workers.Pick(pool.Prefill, exclude, avoid, dec.work())
	if err != nil {
		if errors.Is(err, pool.ErrNoWorker) && rt.o.PDThreshold > 0 {
			rt.log.Info("no prefill worker can be picked; the sample runs on a decode worker alone",
				"request", s.req.requestID, "sample", s.i, "err", err)
			return rt.attemptLocal(ctx, s, dec.withPath(pathLocal, reasonNoPrefill), exclude, avoid)
		}
		return rt.pickFailed(s, err)
	}
	d, err := rt.workers.Pick(pool.Decode, exclude, avoid, 0)
	if err != nil {
		rt.workers.Release(p)
		return rt.pickFailed(s, err)
	}
	addr, err := rt.workers.TransferAddr(ctx, p)
	var embOnly *pool.EmbeddingsOnlyError
	if errors.As(err, &embOnly) {
		// The cluster's model only embeds: the request's fault, as the
		// worker itself would say (a 400), not the worker's.
		rt.workers.Release(p)
		rt.workers.Release(d)
		return attemptResult{err: &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest, Message: embOnly.Error()}}
	}
	if err != nil {
		rt.workers.Done(p, pool.Failure, err.Error())
		rt.workers.Release(d)
		le := &legError{leg: pool.Prefill, worker: p.URL(), kind: kindUnreachable, cause: err,
			public: "the prefill worker's transfer address could not be learned"}
		rt.log.Warn("cannot learn a prefill worker's transfer address; trying another pair",
			"request", s.req.requestID, "sample", s.i, "worker", p.URL(), "err", err)
		rt.met.workerErrors.WithLabelValues(p.URL(), string(pool.Prefill), kindUnreachable).Inc()
		return attemptResult{err: le.clientError(), retry: true, failed: []*pool.Worker{p}, partner: []*pool.Worker{d}}
	}
	rt.met.pdDecisions.WithLabelValues(dec.path, dec.reason).Inc()
	room := newRoomID()
	deadline, _ := ctx.Deadline()
	rec := rt.recs.open(room, s.req.requestID, s.obs.traceID, s.req.ep.name, p.URL(), d.URL(), rt.o.LegTimeout, deadline, dec)
	actx, aspan := s.obs.startAttempt(ctx, s, dec, room, p.URL(), d.URL())
	sctx, scancel := context.WithCancelCause(actx)
	s.obs.sentFirstLeg(ctx, s)
	pl := rt.newLeg(sctx, p, pool.Prefill, rec)
	dl := rt.newLeg(sctx, d, pool.Decode, rec)
	pch := make(chan prefillResult, 1) // the prefill goroutine never blocks on it
	dch := make(chan decodeEvent)      // unbuffered: decode waits while the sample holds its answer
	common := map[string]string{HeaderRoom: room, HeaderRequestID: s.req.requestID}
	var wg sync.WaitGroup
	wg.Go(func() {
		pch <- rt.runPrefill(pl, s.req.ep.path, s.prefill, s.req.wantPromptLogprobs, withLeg(common, apileg.KindPrefill, ""))
	})
	wg.Go(func() {
		rt.runDecode(dl, s.req.ep.path, s.decode, s.req.stream, withLeg(common, apileg.KindDecode, addr), dch)
	})
	f := &follower{rt: rt, s: s, rec: rec, decodeWorker: d, prefillWorker: p}
	le := f.follow(ctx, pch, dch)
	switch {
	case le != nil:
		scancel(le) // the other leg stops at once
	case ctx.Err() == nil:
		// Answered: decode is done or draining what follows its [DONE] (so
		// its connection can be reused); prefill had its grace period.
		pl.cancel(errSampleEnded)
	}
	wg.Wait()
	scancel(errSampleEnded)
	if le == nil && f.answered {
		dt := dl.timing // a whole answer's header
		if f.timing != nil {
			dt = *f.timing // a stream's comment
		}
		rt.phases(rec, pl.timing, dt)
		s.obs.answered(s, mergeTiming(pl.timing, dt))
	}
	res := attemptResult{failed: []*pool.Worker{p}, partner: []*pool.Worker{d}}
	if le != nil && le.leg == pool.Decode {
		res.failed, res.partner = res.partner, res.failed
	}
	return rt.ended(ctx, s, rec, f, le, res, aspan)
}

// attemptLocal sends sample s as one local leg to a decode worker, which
// runs the whole request (its prefill included), and follows it to its
// end. It fails, is retried and is cancelled as a decode leg is; the
// client's prompt logprobs come in the worker's own answer.
func (rt *Router) attemptLocal(ctx context.Context, s *sample, dec decision, exclude, avoid []*pool.Worker) attemptResult {
	d, err := rt.workers.Pick(pool.Decode, exclude, avoid, dec.work())
	if err != nil {
		return rt.pickFailed(s, err)
	}
	rt.met.pdDecisions.WithLabelValues(dec.path, dec.reason).Inc()
	room := newRoomID()
	deadline, _ := ctx.Deadline()
	rec := rt.recs.open(room, s.req.requestID, s.obs.traceID, s.req.ep.name, "", d.URL(), rt.o.LegTimeout, deadline, dec)
	actx, aspan := s.obs.startAttempt(ctx, s, dec, room, "", d.URL())
	sctx, scancel := context.WithCancelCause(actx)
	s.obs.sentFirstLeg(ctx, s)
	dl := rt.newLocalLeg(sctx, d, rec)
	dch := make(chan decodeEvent)
	common := map[string]string{HeaderRoom: room, HeaderRequestID: s.req.requestID}
	var wg sync.WaitGroup
	wg.Go(func() {
		rt.runDecode(dl, s.req.ep.path, s.decode, s.req.stream, withLeg(common, apileg.KindLocal, ""), dch)
	})
	f := &follower{rt: rt, s: s, rec: rec, decodeWorker: d}
	le := f.follow(ctx, nil, dch)
	if le != nil {
		scancel(le)
	}
	wg.Wait()
	scancel(errSampleEnded)
	if le == nil && f.answered {
		dt := dl.timing
		if f.timing != nil {
			dt = *f.timing
		}
		s.obs.answered(s, dt)
	}
	return rt.ended(ctx, s, rec, f, le, attemptResult{failed: []*pool.Worker{d}}, aspan)
}

// ended closes an attempt's record and turns its failure le (nil: it was
// answered, or the request ended) into its result; res names the workers
// not to pick again (failed) and to avoid (partner) on a retry.
func (rt *Router) ended(ctx context.Context, s *sample, rec *record, f *follower, le *legError, res attemptResult, span trace.Span) attemptResult {
	switch {
	case le == nil && f.answered:
		// The whole answer went to the writer; the request ending since
		// (the client closing once it read [DONE]) does not undo that.
		rt.recs.finish(rec, true, "")
		endSpan(span, telemetry.OutcomeOK, "")
		rt.roomClosed(rec, "succeeded", "")
		rt.met.cluster.sampleAnswered(rt.workers.Model(), f.finish, f.seenUsage)
		return attemptResult{}
	case ctx.Err() != nil:
		cause := context.Cause(ctx)
		reason := reasonFor(cause)
		rt.recs.finish(rec, false, reason)
		endSpan(span, telemetry.OutcomeCancelled, reason)
		why := ctxReason(cause)
		rt.roomClosed(rec, "failed", why)
		if why == "client_abort" || why == "client_gone" {
			rt.met.cluster.success.WithLabelValues(rt.workers.Model(), "abort").Inc()
		}
		return attemptResult{}
	case le == nil:
		rt.recs.finish(rec, true, "")
		endSpan(span, telemetry.OutcomeOK, "")
		rt.roomClosed(rec, "succeeded", "")
		rt.met.cluster.sampleAnswered(rt.workers.Model(), f.finish, f.seenUsage)
		return attemptResult{}
	}
	rt.roomClosed(rec, "failed", legReason(le))
	res.err = le.clientError()
	res.retry = retryable(le, f.delivered)
	if le.draining() {
		// Only the draining worker is out: its partner did nothing wrong.
		res.drained, res.partner = true, nil
		res.failed = []*pool.Worker{f.decodeWorker}
		if le.leg == pool.Prefill {
			res.failed = []*pool.Worker{f.prefillWorker}
		}
	}
	reason := le.Error()
	if res.retry {
		reason += "; nothing reached the client, so the sample may be retried on another pair"
	}
	rt.recs.finish(rec, false, reason)
	outcome := telemetry.OutcomeFailed
	if le.cancelled {
		outcome = telemetry.OutcomeCancelled
	}
	endSpan(span, outcome, reason)
	level := slog.LevelWarn
	if le.clientFault() || le.draining() {
		level = slog.LevelInfo // the worker refused the request (the client's doing, or it drains): not a failure
	}
	rt.log.Log(ctx, level, "sample failed", "request", s.req.requestID, "trace_id", rec.traceID, "room", rec.room, "sample", s.i,
		"leg", le.legName(), "worker", le.worker, "err", le)
	return res
}

// pickFailed is an attempt that found no pair: the client is told the
// role and counts, the log names every worker's problem.
func (rt *Router) pickFailed(s *sample, err error) attemptResult {
	rt.log.Warn("no pair for a sample", "request", s.req.requestID, "sample", s.i, "err", err)
	return attemptResult{err: openai.Unavailable(pool.PublicError(err)), pickFailed: true}
}

// retryable reports whether a sample whose attempt failed with le may be
// sent to another pair: nothing of it reached the client (so nothing is
// replayed), and the failure is a worker's (the connection, a 5xx, a
// broken or failed answer), not the client's (a 4xx), a cancellation or a
// timeout (which already took the leg timeout). The attempt's room is
// dead: its other leg was cancelled, and the retry gets a new room id.
func retryable(le *legError, delivered bool) bool {
	return !delivered && !le.cancelled && !le.clientFault() && le.kind != kindTimeout && le.status != http.StatusGatewayTimeout
}

// reasonFor names why a request's context ended, for records.
func reasonFor(cause error) string {
	switch {
	case errors.Is(cause, errRequestTimeout), errors.Is(cause, errOtherFailed), errors.Is(cause, errClientGone):
		return cause.Error()
	case errors.Is(cause, context.Canceled):
		return "client_abort: the client went away"
	case cause == nil:
		return "cancelled"
	}
	return cause.Error()
}

// withLeg returns the headers of a leg of kind (apileg.KindPrefill,
// KindDecode or KindLocal): common's, the kind and, for a decode leg, the
// prefill worker's transfer address.
func withLeg(common map[string]string, kind string, prefillAddr string) map[string]string {
	h := map[string]string{HeaderLeg: kind}
	for k, v := range common {
		h[k] = v
	}
	if prefillAddr != "" {
		h[HeaderPrefill] = prefillAddr
	}
	return h
}

// runPrefill runs the prefill leg: the worker answers once the room's KV
// has reached decode. Its answer matters only for the prompt logprobs.
func (rt *Router) runPrefill(l *leg, path string, body []byte, want bool, hdr map[string]string) (res prefillResult) {
	defer func() { l.close(res.err) }()
	resp, le := l.do(path, body, false, hdr)
	if le != nil {
		return prefillResult{err: le}
	}
	defer resp.Body.Close()
	l.readTiming(resp.Header)
	b, err := httpx.ReadAllMax(resp.Body, legBodyBytesMax)
	if err != nil {
		return prefillResult{err: l.fail(kindStream, 0, nil, err)}
	}
	res = prefillResult{cached: answer.CachedTokens(b)}
	if want {
		res.promptLogprobs = answer.PromptLogprobs(b)
	}
	return res
}

// runDecode runs the decode leg and hands each step of its answer to out.
func (rt *Router) runDecode(l *leg, path string, body []byte, stream bool, hdr map[string]string, out chan<- decodeEvent) {
	var final *legError
	defer func() { l.close(final) }()
	send := func(ev decodeEvent) bool {
		select { // not on l.ctx: the leg's own timeout must still reach the sample
		case out <- ev:
			return true
		case <-l.parent.Done():
			if final == nil {
				final = l.fail(kindStream, 0, nil, context.Cause(l.ctx))
			}
			return false
		}
	}
	fail := func(le *legError) {
		final = le
		send(decodeEvent{err: le})
	}
	resp, le := l.do(path, body, stream, hdr)
	if le != nil {
		fail(le)
		return
	}
	defer resp.Body.Close()
	if !stream {
		b, err := httpx.ReadAllMax(resp.Body, legBodyBytesMax)
		if err != nil {
			fail(l.fail(kindStream, 0, nil, err))
			return
		}
		l.readTiming(resp.Header)
		send(decodeEvent{body: b, contentType: resp.Header.Get("Content-Type"), warning: resp.Header.Get("Warning"), end: true})
		return
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		fail(l.fail(kindStream, 0, nil, fmt.Errorf("the worker answered a streaming request with Content-Type %q", resp.Header.Get("Content-Type"))))
		return
	}
	rd := answer.NewReader(resp.Body, sseEventBytesMax)
	warning := resp.Header.Get("Warning")
	for {
		ev, err := rd.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("the stream ended before data: [DONE]")
			}
			fail(l.fail(kindStream, 0, nil, err))
			return
		}
		end := ev.HasData && string(ev.Data) == openai.StreamDone
		if !send(decodeEvent{ev: ev, end: end, warning: warning}) {
			return
		}
		warning = ""
		if end {
			l.drain(resp.Body)
			return
		}
	}
}

// follower follows one attempt's two legs and turns decode's answer into
// replies for the writer.
type follower struct {
	rt            *Router
	s             *sample
	rec           *record
	decodeWorker  *pool.Worker
	prefillWorker *pool.Worker    // nil for a local leg
	plp           json.RawMessage // prefill's prompt logprobs, once it answered
	pcached       int             // prefill's cached prompt tokens, once it answered
	seenData      bool            // a data event went out (the first gets the prompt logprobs)
	delivered     bool            // part of decode's answer went to the writer
	answered      bool            // the end of decode's answer went to the writer
	timing        *apileg.Timing  // the decode worker's, from its stream's timing comment
	usage         *openai.Usage
	usageTpl      answer.Object
	warning       string        // decode's Warning header, once its answer began
	seenUsage     *openai.Usage // the usage decode's answer carried, for the metrics (noteAnswer)
	finish        string        // the finish_reason decode's answer carried
}

// follow runs until the sample is answered (nil), a leg fails (that leg's
// error; the caller cancels the other), or ctx ends (nil). While the
// client wants prompt logprobs, decode's answer waits for prefill's. A
// prefill failure after decode's answer began does not fail the sample:
// decode could only answer once the KV had arrived.
//
// A local attempt has no prefill leg: pch is nil.
func (f *follower) follow(ctx context.Context, pch <-chan prefillResult, dch <-chan decodeEvent) *legError {
	prefillDone := pch == nil
	for {
		din := dch
		if f.s.req.wantPromptLogprobs && !prefillDone {
			din = nil
		}
		select {
		case <-ctx.Done():
			return nil
		case pr := <-pch:
			pch, prefillDone = nil, true
			if le := f.prefillAnswered(pr); le != nil {
				return le
			}
		case de := <-din:
			if de.err != nil {
				return de.err // when the request itself ended, the caller sees ctx first
			}
			if !prefillDone && de.mayCarryUsage() {
				// The usage takes prefill's cached tokens: wait a little for
				// its answer (which comes once decode acknowledged the KV).
				if pr, ok := f.waitPrefill(ctx, pch); ok {
					pch, prefillDone = nil, true
					if le := f.prefillAnswered(pr); le != nil {
						return le
					}
				}
			}
			f.rt.recs.received(f.rec, len(de.ev.Raw)+len(de.body))
			r, le := f.format(de)
			if le != nil {
				return le
			}
			if de.warning != "" {
				f.warning = de.warning
			}
			if r != nil {
				r.rec = f.rec
				r.warning = f.warning
				if !f.s.send(ctx, *r) {
					return nil
				}
				f.delivered = true
				f.rt.recs.delivered(f.rec)
			}
			if de.end {
				f.answered = true
				if !prefillDone {
					f.awaitPrefill(ctx, pch)
				}
				return nil
			}
		}
	}
}

// prefillAnswered takes prefill's answer: its prompt logprobs and cached
// tokens, or its failure, which fails the sample (returned) unless decode
// already began answering.
func (f *follower) prefillAnswered(pr prefillResult) *legError {
	if pr.err != nil {
		if !f.delivered {
			return pr.err // when the request itself ended, the caller sees ctx first
		}
		f.rt.log.Warn("prefill leg failed after decode began answering; the answer stands",
			"request", f.s.req.requestID, "err", pr.err)
	}
	f.plp, f.pcached = pr.promptLogprobs, pr.cached
	if f.s.req.wantPromptLogprobs && f.plp == nil && pr.err == nil {
		f.rt.log.Warn("prompt logprobs were asked for but the prefill worker sent none", "request", f.s.req.requestID)
	}
	return nil
}

// waitPrefill waits at most prefillGraceMax for prefill's answer; false
// when it did not come (the usage then counts decode's cached tokens
// alone).
func (f *follower) waitPrefill(ctx context.Context, pch <-chan prefillResult) (prefillResult, bool) {
	t := time.NewTimer(prefillGraceMax)
	defer t.Stop()
	select {
	case pr := <-pch:
		return pr, true
	case <-t.C:
		f.rt.recs.note(f.rec, "prefill_grace_expired", fmt.Sprintf("decode sent its usage and prefill did not answer within %s", prefillGraceMax))
	case <-ctx.Done():
	}
	return prefillResult{}, false
}

// mayCarryUsage reports whether the event or body may hold a usage member.
func (de decodeEvent) mayCarryUsage() bool {
	if de.body != nil {
		return answer.MayCarryUsage(de.body)
	}
	return de.ev.HasData && answer.MayCarryUsage(de.ev.Data)
}

// awaitPrefill gives a prefill leg whose decode already finished a little
// time to answer before the sample ends (and cancels it).
func (f *follower) awaitPrefill(ctx context.Context, pch <-chan prefillResult) {
	t := time.NewTimer(prefillGraceMax)
	defer t.Stop()
	select {
	case pr := <-pch:
		if pr.err != nil && !pr.err.cancelled {
			f.rt.log.Warn("prefill leg failed after decode answered; the answer stands", "request", f.s.req.requestID, "err", pr.err)
		}
	case <-t.C:
		f.rt.recs.note(f.rec, "prefill_grace_expired", fmt.Sprintf("decode finished and prefill did not answer within %s", prefillGraceMax))
	case <-ctx.Done():
	}
}

// decodeFail is a decode leg failure found in its answer's content.
func (f *follower) decodeFail(kind string, api *openai.Error, cause error) *legError {
	f.rt.met.workerErrors.WithLabelValues(f.rec.decode, string(pool.Decode), kind).Inc()
	le := &legError{leg: pool.Decode, worker: f.rec.decode, kind: kind, api: api, cause: cause}
	if f.rec.dec.path == pathLocal {
		le.name = apileg.KindLocal
	}
	if legOutcome(le) == pool.Failure {
		f.rt.workers.Failed(f.decodeWorker, le.Error())
	}
	return le
}

// format turns one step of decode's answer into a reply (nil: nothing for
// the client), splicing prefill's prompt logprobs into the first data
// event or the answer's choices, and for several samples re-indexing
// choices (index = the sample's, prompt*n + j) under the merged id.
func (f *follower) format(de decodeEvent) (*reply, *legError) {
	req := f.s.req
	if !req.stream {
		return f.formatBody(de)
	}
	ev := de.ev
	merged := req.samples > 1
	if v, ok := apileg.TimingFromComment(ev.Raw); ok && !ev.HasData {
		if t, err := apileg.ParseTiming(v); err == nil {
			f.timing = &t
		}
		return nil, nil // the router's, not the client's
	}
	if !ev.HasData {
		if merged {
			return nil, nil // comments of n streams would only interleave
		}
		return &reply{data: ev.Raw}, nil
	}
	if de.end {
		if merged {
			return &reply{done: true, usage: f.usage, usageChunk: f.usageTpl}, nil
		}
		return &reply{data: ev.Raw, done: true}, nil
	}
	obj, err := answer.ParseObject(ev.Data)
	if err == nil {
		if raw, ok := obj.Get("error"); ok {
			return nil, f.decodeFail(kindErrorEvent, apiErrorFromEvent(raw), nil)
		}
	}
	if err != nil {
		if merged {
			return nil, f.decodeFail(kindStream, nil, fmt.Errorf("the worker sent an event that is not a JSON object: %w", err))
		}
		return &reply{data: ev.Raw}, nil // one sample: pass through what we cannot read
	}
	f.noteAnswer(obj)
	first := !f.seenData
	f.seenData = true
	obj, raised := answer.RaiseCachedTokens(obj, f.pcached) // prefill's cache hit is the request's
	if merged && answer.IsUsageChunk(obj) {
		var u openai.Usage
		raw, _ := obj.Get("usage")
		if err := json.Unmarshal(raw, &u); err != nil {
			return nil, f.decodeFail(kindStream, nil, fmt.Errorf("the worker sent a usage chunk that does not decode: %w", err))
		}
		f.usage, f.usageTpl = &u, obj
		return nil, nil
	}
	token := answer.CarriesToken(obj)
	if !merged && !(first && f.plp != nil) {
		if raised {
			return &reply{data: answer.Frame(obj.Marshal()), token: token}, nil
		}
		return &reply{data: ev.Raw, token: token}, nil
	}
	sp := answer.Splice{Reindex: merged, Index: f.s.i, Echo: req.echoLogprobs}
	if merged {
		sp.ID = req.mergedID
	}
	if first {
		sp.PromptLogprobs = f.plp
	}
	obj, err = sp.Apply(obj)
	if err != nil {
		return nil, f.decodeFail(kindStream, nil, err)
	}
	return &reply{data: answer.Frame(obj.Marshal()), token: token}, nil
}

// formatBody handles a whole non-streamed answer.
func (f *follower) formatBody(de decodeEvent) (*reply, *legError) {
	req := f.s.req
	obj, err := answer.ParseObject(de.body)
	if err == nil {
		f.noteAnswer(obj)
	}
	if req.samples == 1 && f.plp == nil && (f.pcached == 0 || !answer.MayCarryUsage(de.body)) {
		return &reply{data: de.body, contentType: de.contentType, done: true}, nil
	}
	if err != nil {
		return nil, f.decodeFail(kindStream, nil, fmt.Errorf("the worker's answer is not a JSON object: %w", err))
	}
	obj, _ = answer.RaiseCachedTokens(obj, f.pcached) // prefill's cache hit is the request's
	obj, err = answer.Splice{Reindex: req.samples > 1, Index: f.s.i, PromptLogprobs: f.plp, Echo: req.echoLogprobs}.Apply(obj)
	if err != nil {
		return nil, f.decodeFail(kindStream, nil, err)
	}
	if req.samples > 1 {
		return &reply{doc: obj, done: true}, nil
	}
	b := obj.Marshal()
	if n := len(de.body); n > 0 && de.body[n-1] == '\n' {
		b = append(b, '\n')
	}
	return &reply{data: b, contentType: de.contentType, done: true}, nil
}
