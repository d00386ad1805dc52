package server

import (
	"context"
	"errors"
	"net/http"

	"tandem/internal/api/leg"
	"tandem/internal/api/openai"
	"tandem/internal/engine"
)

// authorize runs before anything else a generation request costs: with an
// API key it requires the bearer token (before the body is read); with leg
// keys it requires the router's signature over the raw body, and returns
// the verified leg, which goes to Options.Legs. Without leg keys,
// X-Tandem-* headers are ignored (a client cannot claim to be a leg) and
// the leg is nil.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, body []byte) (*leg.Info, bool) {
	if s.o.LegKeys == nil {
		return nil, true
	}
	li, err := s.o.LegKeys.Verify(r.Method, r.URL.Path, r.Header, body)
	if err != nil {
		leg.WriteUnauthorized(w, leg.Unauthorized("This is a prefill or decode worker: it serves only legs its router signed "+
			"with the cluster token; send requests to the router (%v).", err))
		return nil, false
	}
	return &li, true
}

// submit starts one sequence: a router's verified leg (li not nil) on
// Options.Legs, any other request on the Backend.
func (s *Server) submit(ctx context.Context, li *leg.Info, req engine.Request) (Stream, error) {
	switch {
	case li == nil:
		return s.b.Submit(ctx, req)
	case s.o.Legs == nil:
		return nil, errNoLegs
	}
	return s.o.Legs.SubmitLeg(ctx, *li, req)
}

// errNoLegs answers a verified leg on a server built with LegKeys and no
// Legs (500: the server's configuration is wrong, not the request).
var errNoLegs = errors.New("this worker verifies router legs (LegKeys) but has no Legs to serve them: a configuration error of the worker")

// checkAPIKey answers 401 and returns false when the server has an API key
// and r does not carry it as a bearer token.
func (s *Server) checkAPIKey(w http.ResponseWriter, r *http.Request) bool {
	if s.o.APIKey == "" || leg.CheckBearer(r.Header, s.o.APIKey) {
		return true
	}
	leg.WriteUnauthorized(w, openai.InvalidAPIKey())
	return false
}

// statusErrorBody maps a StatusError to an OpenAI-shaped error.
func statusErrorBody(e StatusError) *openai.Error {
	st := e.HTTPStatus()
	typ := "server_error"
	if st >= 400 && st < 500 {
		typ = "invalid_request_error"
	}
	return &openai.Error{Status: st, Message: e.Error(), Type: typ}
}
