package router

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"tandem/internal/api/drain"
	"tandem/internal/api/httpx"
	"tandem/internal/api/openai"
	"tandem/internal/router/answer"
	"tandem/internal/telemetry"
)

// serveGeneration answers one /v1/completions or /v1/chat/completions
// request: it starts one sample per choice (n for each prompt of a
// completions list of prompts), writes their replies to
// the client, and ends with exactly one outcome: the whole answer, or one
// error (a JSON error before anything was sent, else one error event and
// no [DONE]).
func (rt *Router) serveGeneration(w http.ResponseWriter, r *http.Request, ep endpoint) {
	t0 := time.Now()
	rid := requestIDOf(r.Context())
	if !rt.gate.Admit(w) {
		rt.log.Info("request refused: the router is draining", "request", rid)
		return
	}
	defer rt.gate.Leave()
	// Admission before the body: a request over the limit is refused before
	// its body (up to MaxBodyBytes) is read, so a flood of large bodies
	// costs at most MaxRequests bodies of memory.
	if n := rt.active.Add(1); n > int64(rt.o.MaxRequests) {
		rt.active.Add(-1)
		rt.log.Info("request refused: too many in flight", "request", rid, "limit", rt.o.MaxRequests)
		httpx.WriteError(w, openai.RateLimited(fmt.Sprintf("the router has %d requests in flight, its limit", rt.o.MaxRequests)))
		return
	}
	defer rt.active.Add(-1)
	body, e := rt.readBody(w, r)
	if e != nil {
		rt.log.Debug("request rejected", "request", rid, "endpoint", ep.name, "status", e.Status, "err", e.Message)
		httpx.WriteError(w, e)
		return
	}
	e = decodeAsWorkers(ep, body)
	var req *clientRequest
	if e == nil {
		req, e = parseRequest(ep, body, rid)
	}
	if e != nil {
		rt.log.Debug("request rejected", "request", rid, "endpoint", ep.name, "status", e.Status, "err", e.Message)
		httpx.WriteError(w, e)
		return
	}
	tctx, obs := rt.startRequest(r, t0, req)
	defer obs.end()
	req.decisions = rt.decideAll(tctx, req)

	ctx, cancel := context.WithCancelCause(tctx)
	defer context.AfterFunc(rt.stop, func() { cancel(errStopping) })()
	ctx, cancelTimeout := context.WithTimeoutCause(ctx, rt.o.RequestTimeout, errRequestTimeout)
	out := make(chan reply, 4*req.samples) // samples block on it only when the client is slow
	var wg sync.WaitGroup
	defer func() {
		cancel(errAnswered)
		wg.Wait()
		cancelTimeout()
	}()
	for i := range req.samples {
		dec, pre := req.bodies(i)
		s := &sample{i: i, req: req, out: out, decode: dec, prefill: pre, dec: req.decisions[req.promptOf(i)], obs: obs}
		wg.Go(func() { rt.runSample(ctx, s) })
	}
	cw := &clientWriter{w: w, rc: http.NewResponseController(w), req: req, timeout: rt.o.WriteTimeout,
		docs: make([]answer.Object, req.samples), usages: make([]*openai.Usage, req.samples), usageChunks: make([]answer.Object, req.samples)}
	firstOut := make([]bool, req.samples)     // a sample's first token reached the client
	lastTok := make([]time.Time, req.samples) // when a streamed sample's last token event went out
	for remaining := req.samples; remaining > 0; {
		select {
		case rp := <-out:
			if rp.err != nil {
				cancel(errOtherFailed)
				obs.fail(telemetry.OutcomeFailed, rp.err.Message, rp.err.Status)
				cw.fail(rp.err)
				return
			}
			if err := cw.write(rp); err != nil {
				cancel(errClientGone)
				obs.fail(telemetry.OutcomeCancelled, "client_gone: "+err.Error(), 499)
				rt.log.Info("client stopped reading; request cancelled", "request", req.requestID, "err", err)
				return
			}
			// Time to first token: the request's arrival to its first token
			// written to the client (a whole answer's write, unstreamed).
			if (rp.token || (!req.stream && req.samples == 1 && rp.done)) && !firstOut[rp.sample] {
				firstOut[rp.sample] = true
				d := time.Since(t0)
				rt.recs.firstToken(rp.rec, d)
				obs.firstToken(d)
				rt.met.cluster.ttft.WithLabelValues(rt.workers.Model()).Observe(d.Seconds())
				if req.stream && !cw.ttftSeen {
					cw.ttftSeen = true
					rt.met.ttft.WithLabelValues(ep.name).Observe(d.Seconds())
				}
			}
			if rp.token && req.stream {
				now := time.Now()
				if !lastTok[rp.sample].IsZero() {
					rt.met.cluster.itl.WithLabelValues(rt.workers.Model()).Observe(now.Sub(lastTok[rp.sample]).Seconds())
				}
				lastTok[rp.sample] = now
			}
			if rp.done {
				remaining--
			}
		case <-ctx.Done():
			switch cause := context.Cause(ctx); {
			case errors.Is(cause, errRequestTimeout):
				obs.fail(telemetry.OutcomeFailed, "timeout: "+errRequestTimeout.Error(), http.StatusGatewayTimeout)
				cw.fail(&openai.Error{Status: http.StatusGatewayTimeout, Type: openai.TypeServer, Code: codeUpstreamTimeout,
					Message: fmt.Sprintf("The request did not finish within the router's deadline of %s.", rt.o.RequestTimeout)})
			case errors.Is(cause, errStopping):
				rt.log.Warn("request ended: the router's drain timed out", "request", req.requestID)
				obs.fail(telemetry.OutcomeFailed, "shutdown: "+errStopping.Error(), http.StatusServiceUnavailable)
				e := drain.Refusal()
				e.Message = "The router stopped before the request finished (its drain timeout passed); nothing more of it will come."
				if !cw.started {
					w.Header().Set("Retry-After", strconv.Itoa(drain.RetryAfter))
				}
				cw.fail(e)
			default:
				obs.fail(telemetry.OutcomeCancelled, reasonFor(cause), 499)
			}
			return
		}
	}
	if err := cw.finish(); err != nil {
		cancel(errClientGone)
		obs.fail(telemetry.OutcomeFailed, err.Error(), http.StatusBadGateway)
		rt.log.Info("request not finished", "request", req.requestID, "err", err)
		return
	}
	rt.met.e2e.WithLabelValues(ep.name).Observe(time.Since(t0).Seconds())
	rt.met.cluster.e2e.WithLabelValues(rt.workers.Model()).Observe(time.Since(t0).Seconds())
	wg.Wait() // let each sample's prefill leg answer (briefly) before cancelling what is left
}

// clientWriter writes a request's answer. Only the handler goroutine uses
// it.
type clientWriter struct {
	w           http.ResponseWriter
	rc          *http.ResponseController
	req         *clientRequest
	timeout     time.Duration
	started     bool // the status line went out: errors must be events now
	ttftSeen    bool
	docs        []answer.Object // several samples, not streamed
	usages      []*openai.Usage // several samples, streamed
	usageChunks []answer.Object // several samples, streamed
	warning     string          // a decode worker's Warning header, sent with the status line
}

// start sends the status and headers of a stream.
func (cw *clientWriter) startStream() {
	if cw.started {
		return
	}
	h := cw.w.Header()
	if cw.warning != "" {
		h.Set("Warning", cw.warning)
	}
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	cw.w.WriteHeader(http.StatusOK)
	cw.started = true
}

// send writes b and flushes it, within the write timeout.
func (cw *clientWriter) send(b []byte) error {
	if err := cw.rc.SetWriteDeadline(time.Now().Add(cw.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return fmt.Errorf("write answer: %w", err)
	}
	if _, err := cw.w.Write(b); err != nil {
		return fmt.Errorf("write answer: %w", err)
	}
	if err := cw.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return fmt.Errorf("write answer: %w", err)
	}
	return nil
}

// whole writes a complete JSON answer with its length.
func (cw *clientWriter) whole(contentType string, b []byte) error {
	if contentType == "" {
		contentType = "application/json"
	}
	if cw.warning != "" {
		cw.w.Header().Set("Warning", cw.warning)
	}
	cw.w.Header().Set("Content-Type", contentType)
	cw.w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	cw.w.WriteHeader(http.StatusOK)
	cw.started = true
	return cw.send(b)
}

// write handles one reply.
func (cw *clientWriter) write(rp reply) error {
	if rp.warning != "" && !cw.started {
		cw.warning = rp.warning // a worker's Warning header (package server: a template that drops tools)
	}
	switch {
	case cw.req.stream:
		if rp.done && cw.req.samples > 1 {
			cw.usages[rp.sample], cw.usageChunks[rp.sample] = rp.usage, rp.usageChunk
		}
		if len(rp.data) == 0 {
			return nil
		}
		cw.startStream()
		return cw.send(rp.data)
	case cw.req.samples > 1:
		cw.docs[rp.sample] = rp.doc
		return nil
	default:
		return cw.whole(rp.contentType, rp.data)
	}
}

// finish writes what ends a merged answer: for a stream the merged usage
// chunk (when asked for) and [DONE]; otherwise the merged document (or,
// when the answers do not merge, the error). An error means the answer did
// not reach the client whole.
func (cw *clientWriter) finish() error {
	if cw.req.samples == 1 {
		return nil
	}
	if !cw.req.stream {
		b, err := answer.MergeDocs(cw.docs, cw.req.mergedID, cw.req.n)
		if err != nil {
			cw.fail(&openai.Error{Status: http.StatusBadGateway, Type: openai.TypeServer, Code: codeUpstreamError,
				Message: fmt.Sprintf("The decode workers' answers could not be merged: %v.", err)})
			return err
		}
		return cw.whole("application/json", b)
	}
	cw.startStream()
	if cw.req.includeUsage {
		if b := answer.UsageChunk(cw.usageChunks, cw.usages, cw.req.mergedID, cw.req.n); b != nil {
			if err := cw.send(b); err != nil {
				return err
			}
		}
	}
	return cw.send(answer.Frame([]byte(openai.StreamDone)))
}

// fail writes the request's one error: a JSON answer with e's status when
// nothing was sent yet, else one error event (and no [DONE]).
func (cw *clientWriter) fail(e *openai.Error) {
	if !cw.started {
		httpx.WriteError(cw.w, e)
		return
	}
	if cw.req.stream {
		cw.send(answer.Frame(e.MarshalBody()))
	}
}
