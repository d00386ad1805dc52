package server

import (
	"context"
	"net/http"

	"tandem/internal/api/leg"
	"tandem/internal/api/openai"
)

// LegInfo is what a verified router leg's headers say (see package leg).
type LegInfo = leg.Info

// LegFromContext returns the leg headers of the request a Backend.Submit
// serves, if the request is a router leg whose signature verified.
func LegFromContext(ctx context.Context) (LegInfo, bool) { return leg.FromContext(ctx) }

// WithLeg returns ctx carrying li, as the HTTP handlers pass a verified
// router leg to Backend.Submit (tests of backends use it directly).
func WithLeg(ctx context.Context, li LegInfo) context.Context { return leg.NewContext(ctx, li) }

// authorize runs before anything else a generation request costs: with an
// API key it requires the bearer token (before the body is read); with leg
// keys it requires the router's signature over the raw body, and returns
// r carrying the verified leg. Without leg keys, X-Tandem-* headers are
// ignored: a client cannot claim to be a leg.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, body []byte) (*http.Request, bool) {
	if s.o.LegKeys == nil {
		return r, true
	}
	li, err := s.o.LegKeys.Verify(r.Method, r.URL.Path, r.Header, body)
	if err != nil {
		leg.WriteUnauthorized(w, leg.Unauthorized("This is a prefill or decode worker: it serves only legs its router signed "+
			"with the cluster token; send requests to the router (%v).", err))
		return nil, false
	}
	return r.WithContext(WithLeg(r.Context(), li)), true
}

// checkAPIKey answers 401 and returns false when the server has an API key
// and r does not carry it as a bearer token.
func (s *Server) checkAPIKey(w http.ResponseWriter, r *http.Request) bool {
	if s.o.APIKey == "" || leg.CheckBearer(r.Header, s.o.APIKey) {
		return true
	}
	leg.WriteUnauthorized(w, leg.Unauthorized("Incorrect or missing API key: send Authorization: Bearer <the key given to --api-key or $TANDEM_API_KEY>."))
	return false
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
