package router

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"tandem/internal/api/drain"
	"tandem/internal/api/httpx"
	apileg "tandem/internal/api/leg"
	"tandem/internal/api/openai"
	"tandem/internal/router/answer"
	"tandem/internal/router/pool"
	"tandem/internal/telemetry"
)

// Headers the router sends on both legs (declared in package leg).
const (
	HeaderRoom      = apileg.HeaderRoom
	HeaderRequestID = apileg.HeaderRequestID
	HeaderLeg       = apileg.HeaderLeg
	HeaderPrefill   = apileg.HeaderPrefill // decode leg only
)

// Causes of cancelled leg and request contexts.
var (
	errLegSilent      = errors.New("the worker sent nothing for the leg timeout")
	errRequestTimeout = errors.New("the request passed the router's deadline")
	errLegClosed      = errors.New("leg closed")
	errSampleEnded    = errors.New("sample ended")
	errOtherFailed    = errors.New("another sample of the request failed")
	errAnswered       = errors.New("request answered")
	errClientGone     = errors.New("the client stopped reading")
	errDrained        = errors.New("drain after the end of the stream timed out")
	errStopping       = errors.New("the router stopped: its drain timed out")
)

// drainTimeout bounds reading what follows a stream's [DONE].
const drainTimeout = time.Second

// legError is a failed leg: which leg and worker, what kind of failure,
// and the worker's own error when it sent one.
type legError struct {
	leg       pool.Role // the worker's role
	name      string    // the leg's kind (apileg.KindLocal for a local leg); "" means leg's
	worker    string
	kind      string        // one of the kind* labels
	status    int           // the worker's HTTP status for kindStatus, else 0
	api       *openai.Error // the worker's error document, if any
	cause     error
	public    string // what the client is told instead of cause, when cause names the worker
	cancelled bool   // the router or the client ended the leg; not the worker's failure
}

// Error names the leg, the worker and the failure.
func (e *legError) Error() string {
	return fmt.Sprintf("%s leg to %s: %s", e.legName(), e.worker, e.detail())
}

// legName is the leg's kind: prefill, decode or local.
func (e *legError) legName() string {
	if e.name != "" {
		return e.name
	}
	return string(e.leg)
}

func (e *legError) detail() string {
	switch {
	case e.api != nil && e.status != 0:
		return fmt.Sprintf("%s (status %d)", e.api.Message, e.status)
	case e.api != nil:
		return e.api.Message
	case e.cause != nil:
		return e.cause.Error()
	}
	return e.kind
}

// publicDetail is detail without anything that names a worker: the
// worker's own error message, the router's own causes, or, for a failure
// of the connection (whose text carries addresses), a phrase for its kind.
func (e *legError) publicDetail() string {
	switch {
	case e.api != nil:
		return e.api.Message
	case e.public != "":
		return e.public
	case e.cause != nil && !namesAPeer(e.cause):
		return e.cause.Error()
	case e.kind == kindUnreachable:
		return "the worker could not be reached"
	case e.kind == kindStream:
		return "the connection to the worker broke"
	}
	return e.kind
}

// namesAPeer reports whether err's text may carry a worker's URL or
// address: errors of the HTTP client, of the network, and of the probes
// (which name the URL they fetched).
func namesAPeer(err error) bool {
	var ue *url.Error
	var oe *net.OpError
	var de *net.DNSError
	var ae *net.AddrError
	return errors.As(err, &ue) || errors.As(err, &oe) || errors.As(err, &de) || errors.As(err, &ae)
}

// draining reports whether the worker answered the leg with the draining
// answer (package drain): it takes no new work, nothing of the leg ran,
// and the sample belongs on another worker. Not a failure of the worker.
func (e *legError) draining() bool {
	return e.kind == kindStatus && e.api != nil && drain.IsRefusal(e.status, e.api.Code)
}

// clientError is what the client gets for this failure: for the worker's
// 4xx answers, the worker's own error as the worker wrote it (status,
// message, type, param, code, Retry-After), so that a client sees through
// the router what `tandem serve` would have told it (a 409, a room id
// already live, and a 499, the room's client gone, are the disaggregation
// protocol's, which serve never answers: their message names the leg);
// 504 for a timeout,
// 503 (code "draining") when the worker drains and no other could take
// the sample, else 502 naming the leg. No message names a worker (its URL
// goes to the log).
func (e *legError) clientError() *openai.Error {
	msg := fmt.Sprintf("The %s leg failed: %s", e.legName(), e.publicDetail())
	switch {
	case e.draining():
		return &openai.Error{Status: http.StatusServiceUnavailable, Type: openai.TypeUnavailable, Code: drain.Code,
			Message: fmt.Sprintf("The %s leg found no worker to take it: every one tried is draining (stopping or restarting); try again shortly.", e.legName())}
	case e.kind == kindTimeout || e.status == http.StatusGatewayTimeout:
		return &openai.Error{Status: http.StatusGatewayTimeout, Type: openai.TypeServer, Code: codeUpstreamTimeout, Message: msg}
	case e.clientFault():
		oe := &openai.Error{Status: e.status, Type: openai.TypeInvalidRequest, Message: msg}
		if e.status != http.StatusConflict && e.status != statusClientClosed {
			oe.Message = e.publicDetail() // the request's own fault, as serve words it
		}
		if e.api != nil {
			oe.Param, oe.Code, oe.RetryAfter = e.api.Param, e.api.Code, e.api.RetryAfter
			if e.api.Type != "" {
				oe.Type = e.api.Type
			}
		}
		return oe
	}
	code := codeUpstreamError
	if e.api != nil && e.api.Code != "" && !e.refusedCredential() {
		code = e.api.Code
	}
	return &openai.Error{Status: http.StatusBadGateway, Type: openai.TypeServer, Code: code, Message: msg}
}

// clientFault reports whether the worker answered with a 4xx status: the
// request (or the room it carried) was refused, which is not a sign that
// the worker is failing. A 401 or 403 is not the client's fault: the
// worker refused the router's own signature or credential (another
// cluster token, or clocks too far apart), so it counts as the worker's
// failure and the client gets a 502.
func (e *legError) clientFault() bool {
	return e.kind == kindStatus && e.status >= 400 && e.status < 500 && !e.refusedCredential()
}

// refusedCredential reports whether the worker answered 401 or 403: it
// refused the router's leg signature or cluster credential. That is a
// misconfiguration of the cluster (another token, clocks too far apart),
// never the client's doing: it counts against the worker's breaker and is
// logged at ERROR (leg.close).
func (e *legError) refusedCredential() bool {
	return e.kind == kindStatus && (e.status == http.StatusUnauthorized || e.status == http.StatusForbidden)
}

// statusClientClosed is the status a worker answers a leg whose client
// went away with (nginx's "client closed request").
const statusClientClosed = 499

// Error codes of the router's own errors.
const (
	codeUpstreamError   = "upstream_error"
	codeUpstreamTimeout = "upstream_timeout"
)

// leg is one HTTP request to a worker: its context (cancelled by the
// sample, by the leg timeout, or when it ends), its watchdog timer and
// whether its request may have reached the worker. The goroutine that
// runs the leg calls close exactly once.
type leg struct {
	rt       *Router
	w        *pool.Worker
	role     pool.Role // the worker's
	kind     string    // the leg's: apileg.KindPrefill, KindDecode or KindLocal
	rec      *record
	parent   context.Context // the sample's: ends when the sample no longer listens
	ctx      context.Context // the leg's: parent, its timeout, its end
	cancel   context.CancelCauseFunc
	timer    *time.Timer
	sent     atomic.Bool // request headers were written: the worker may have seen the room
	draining atomic.Bool
	start    time.Time
	once     sync.Once
	// timing is the worker's apileg.HeaderTiming, read from its answer's
	// header by the goroutine running the leg before it ends.
	timing apileg.Timing
	span   trace.Span // the leg's CLIENT span; its context goes to the worker
}

// readTiming records the worker's timing from h (its answer's headers);
// a malformed value is logged and ignored.
func (l *leg) readTiming(h http.Header) {
	v := h.Get(apileg.HeaderTiming)
	if v == "" {
		return
	}
	t, err := apileg.ParseTiming(v)
	if err != nil {
		l.rt.log.Debug("ignoring a worker's leg timing", "worker", l.w.URL(), "err", err)
		return
	}
	l.timing = t
}

func (rt *Router) newLeg(parent context.Context, w *pool.Worker, role pool.Role, rec *record) *leg {
	return rt.newLegKind(parent, w, role, string(role), rec)
}

// newLocalLeg is a local leg to decode worker w.
func (rt *Router) newLocalLeg(parent context.Context, w *pool.Worker, rec *record) *leg {
	return rt.newLegKind(parent, w, pool.Decode, apileg.KindLocal, rec)
}

func (rt *Router) newLegKind(parent context.Context, w *pool.Worker, role pool.Role, kind string, rec *record) *leg {
	sctx, span := rt.startLeg(parent, kind, w.URL(), rec)
	ctx, cancel := context.WithCancelCause(sctx)
	l := &leg{rt: rt, w: w, role: role, kind: kind, rec: rec, parent: parent, ctx: ctx, cancel: cancel, start: time.Now(), span: span}
	l.timer = time.AfterFunc(rt.o.LegTimeout, func() { cancel(errLegSilent) })
	return l
}

// touch notes progress: the leg timeout starts again.
func (l *leg) touch() {
	if l.draining.Load() {
		return
	}
	l.timer.Reset(l.rt.o.LegTimeout)
	l.rt.recs.legActive(l.rec, l.role, time.Now().Add(l.rt.o.LegTimeout))
}

// close ends the leg: stops its timer, cancels its context, gives the
// worker's slot back, and records how it ended (err nil: it succeeded).
func (l *leg) close(err *legError) {
	l.once.Do(func() {
		l.timer.Stop()
		l.cancel(errLegClosed)
		why := ""
		if err != nil {
			why = err.Error()
		}
		if err != nil && err.refusedCredential() {
			l.rt.log.Error("a worker refused the router's leg signature or credential: the cluster is misconfigured "+
				"(the router and the worker hold different cluster tokens, or their clocks are too far apart); "+
				"the worker counts as failing until this is fixed",
				"worker", l.w.URL(), "role", string(l.role), "status", err.status, "err", err.detail())
		}
		l.rt.workers.Done(l.w, legOutcome(err), why)
		l.rt.met.legSeconds.WithLabelValues(l.w.URL(), string(l.role)).Observe(time.Since(l.start).Seconds())
		switch {
		case err == nil:
			l.rt.recs.legClosed(l.rec, l.role, l.kind+"_ok", "")
			endSpan(l.span, telemetry.OutcomeOK, "")
		case err.cancelled:
			l.rt.recs.legClosed(l.rec, l.role, l.kind+"_cancelled", err.detail())
			endSpan(l.span, telemetry.OutcomeCancelled, err.detail())
		default:
			l.rt.recs.legClosed(l.rec, l.role, l.kind+"_failed", err.detail())
			endSpan(l.span, telemetry.OutcomeFailed, err.kind+": "+err.detail())
		}
	})
}

// fail builds the leg's error. When the leg's context is done the context
// decides: the leg timeout or the request deadline make a timeout, any
// other cancellation is not the worker's failure. Worker failures are
// counted.
func (l *leg) fail(kind string, status int, api *openai.Error, cause error) *legError {
	e := &legError{leg: l.role, name: l.kind, worker: l.w.URL(), kind: kind, status: status, api: api, cause: cause}
	if l.ctx.Err() != nil {
		switch c := context.Cause(l.ctx); {
		case errors.Is(c, errLegSilent):
			e.kind, e.api, e.status = kindTimeout, nil, 0
			e.cause = fmt.Errorf("%w (%s)", errLegSilent, l.rt.o.LegTimeout)
		case errors.Is(c, errRequestTimeout):
			e.kind, e.api, e.status = kindTimeout, nil, 0
			e.cause = fmt.Errorf("%w (%s)", errRequestTimeout, l.rt.o.RequestTimeout)
		default:
			e.cancelled, e.cause = true, c
			return e
		}
	}
	if !e.draining() { // counted as a refusal instead
		l.rt.met.workerErrors.WithLabelValues(l.w.URL(), string(l.role), e.kind).Inc()
	}
	return e
}

// do sends the leg's request and returns the worker's 200 answer, whose
// body counts as progress while it is read. Any other status is read as
// the worker's error.
func (l *leg) do(path string, body []byte, stream bool, hdr map[string]string) (*http.Response, *legError) {
	// sent means the worker may have seen the room. The transport tries a
	// request again on a fresh connection only when the first one cannot
	// have been processed (a kept-alive connection the worker had closed),
	// so each try starts unsent.
	ctx := httptrace.WithClientTrace(l.ctx, &httptrace.ClientTrace{
		GetConn:      func(string) { l.sent.Store(false) },
		WroteHeaders: func() { l.sent.Store(true) },
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.w.URL()+path, bytes.NewReader(body))
	if err != nil {
		return nil, l.fail(kindUnreachable, 0, nil, fmt.Errorf("build request: %w", err))
	}
	req.Header.Set("Content-Type", "application/json")
	if stream {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	telemetry.Inject(l.ctx, req.Header) // the leg span's traceparent, signed with the rest
	l.rt.o.LegKeys.Sign(req.Header, req.Method, req.URL.Path, body)
	l.rt.met.workerRequests.WithLabelValues(l.w.URL(), string(l.role)).Inc()
	resp, err := l.rt.legClient.Do(req)
	if err != nil {
		return nil, l.fail(kindUnreachable, 0, nil, err)
	}
	l.touch()
	resp.Body = &activityBody{ReadCloser: resp.Body, l: l}
	if resp.StatusCode != http.StatusOK {
		api := readWorkerError(resp)
		resp.Body.Close()
		if drain.IsRefusal(resp.StatusCode, api.Code) {
			l.rt.workers.Draining(l.w) // no new legs for it until its /ready says otherwise
			l.rt.met.drainRefusals.WithLabelValues(l.w.URL(), string(l.role)).Inc()
		}
		return nil, l.fail(kindStatus, resp.StatusCode, api, nil)
	}
	return resp, nil
}

// drain reads what follows the end of a stream briefly, so that the
// connection can be reused, then gives up.
func (l *leg) drain(r io.Reader) {
	l.draining.Store(true)
	l.timer.Stop()
	t := time.AfterFunc(drainTimeout, func() { l.cancel(errDrained) })
	defer t.Stop()
	io.Copy(io.Discard, io.LimitReader(r, 64<<10))
}

// activityBody resets its leg's timeout on every read that returns bytes.
type activityBody struct {
	io.ReadCloser
	l *leg
}

func (b *activityBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.l.touch()
	}
	return n, err
}

// retryAfterMax bounds the Retry-After (seconds) the router passes on
// from a worker.
const retryAfterMax = 3600

// readWorkerError reads an error answer: OpenAI's error document when it
// is one, else the start of the body as the message.
func readWorkerError(resp *http.Response) *openai.Error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyBytesMax))
	var doc struct {
		Error *struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Param   json.RawMessage `json:"param"`
			Code    json.RawMessage `json:"code"`
		} `json:"error"`
	}
	var ra time.Duration
	if s, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After"))); err == nil && s > 0 && s <= retryAfterMax {
		ra = time.Duration(s) * time.Second
	}
	if json.Unmarshal(body, &doc) == nil && doc.Error != nil && doc.Error.Message != "" {
		return &openai.Error{Status: resp.StatusCode, Message: doc.Error.Message, Type: doc.Error.Type,
			Param: jsonString(doc.Error.Param), Code: jsonString(doc.Error.Code), RetryAfter: ra}
	}
	msg := httpx.Clip(string(body), 300)
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return &openai.Error{Status: resp.StatusCode, Message: msg, RetryAfter: ra}
}

// apiErrorFromEvent reads the "error" member of a streamed event.
func apiErrorFromEvent(raw json.RawMessage) *openai.Error {
	var e struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Param   json.RawMessage `json:"param"`
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal(raw, &e) != nil || e.Message == "" {
		return &openai.Error{Message: "the worker sent an error event: " + httpx.Clip(string(raw), 300)}
	}
	return &openai.Error{Message: e.Message, Type: e.Type, Param: jsonString(e.Param), Code: jsonString(e.Code)}
}

// jsonString returns a JSON string's value, or the raw text of another
// value ("" for null or nothing).
func jsonString(raw json.RawMessage) string {
	if len(raw) == 0 || answer.IsNull(raw) {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// legOutcome classifies a leg's end (nil: it succeeded) for its worker's
// circuit breaker.
func legOutcome(e *legError) pool.Outcome {
	switch {
	case e == nil:
		return pool.Success
	case e.cancelled, e.draining():
		return pool.Neutral
	}
	switch e.kind {
	case kindUnreachable, kindStream:
		return pool.Failure
	case kindTimeout:
		if errors.Is(e.cause, errRequestTimeout) {
			return pool.Neutral // the whole request ran out, not this leg
		}
		return pool.Failure
	case kindStatus, kindErrorEvent:
		if e.refusedCredential() {
			return pool.Failure // the cluster's misconfiguration, not the client's request
		}
		if e.status >= 400 && e.status < 500 {
			return pool.Success
		}
		if transferFailure(e) {
			return pool.Neutral
		}
		return pool.Failure
	}
	return pool.Failure
}

// transferPrefix starts the message of a worker's disaggregated transfer
// failure (internal/pd/worker's legError): "disaggregated transfer
// failed: REASON[: detail]".
const transferPrefix = "disaggregated transfer failed: "

// transferFailure reports whether the worker's error is a transfer
// failure that may be its peer's fault: every reason but its own
// shutdown or engine failure.
func transferFailure(e *legError) bool {
	if e.api == nil || !strings.HasPrefix(e.api.Message, transferPrefix) {
		return false
	}
	reason, _, _ := strings.Cut(strings.TrimPrefix(e.api.Message, transferPrefix), ":")
	return reason != "shutdown" && reason != "engine" && e.status != http.StatusServiceUnavailable
}
