package server

import (
	"context"
	"net/http"

	"tandem/internal/api/openai"
)

// Headers the router sets on the legs of a disaggregated request.
const (
	HeaderRoom      = "X-Tandem-Room"       // the room id, 32 hex digits
	HeaderRequestID = "X-Tandem-Request-Id" // the router's request id
	HeaderLeg       = "X-Tandem-Leg"        // "prefill" or "decode"
	HeaderPrefill   = "X-Tandem-Prefill"    // decode leg: the prefill worker's transfer address
)

// legDecode is HeaderLeg's value on a decode leg.
const legDecode = "decode"

// LegInfo is what the router's headers say about a disaggregated leg.
type LegInfo struct {
	Room      string
	RequestID string
	Leg       string
	Prefill   string
}

type legKey struct{}

// LegFromContext returns the leg headers of the request a Backend.Submit
// serves, if the request came from a router.
func LegFromContext(ctx context.Context) (LegInfo, bool) {
	li, ok := ctx.Value(legKey{}).(LegInfo)
	return li, ok
}

// WithLeg returns ctx carrying li, as the HTTP handlers pass a router leg's
// headers to Backend.Submit (tests of backends use it directly).
func WithLeg(ctx context.Context, li LegInfo) context.Context {
	return context.WithValue(ctx, legKey{}, li)
}

// withLeg attaches the router's leg headers, when present, to ctx.
func withLeg(ctx context.Context, r *http.Request) context.Context {
	li := LegInfo{Room: r.Header.Get(HeaderRoom), RequestID: r.Header.Get(HeaderRequestID),
		Leg: r.Header.Get(HeaderLeg), Prefill: r.Header.Get(HeaderPrefill)}
	if li.Room == "" && li.Leg == "" {
		return ctx
	}
	return WithLeg(ctx, li)
}

// statusError is an error that knows the HTTP status it should be
// answered with (a disaggregation failure, for example).
type statusError interface {
	error
	HTTPStatus() int
}

// statusErrorBody maps a statusError to an OpenAI-shaped error.
func statusErrorBody(e statusError) *openai.Error {
	st := e.HTTPStatus()
	typ := "server_error"
	if st >= 400 && st < 500 {
		typ = "invalid_request_error"
	}
	return &openai.Error{Status: st, Message: e.Error(), Type: typ}
}
