package server

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"tandem/internal/engine"
	"tandem/internal/invariant"
)

// TestHandlerPanics: a handler's panic is answered 500 and the server
// goes on, except a broken invariant, which passes on (the process stops:
// package invariant), as net/http's ErrAbortHandler does.
func TestHandlerPanics(t *testing.T) {
	s, _ := newTestServer(t, newFake(t, testVocab(t, "", true), script{done(engine.FinishStop)}), Options{})
	serve := func(v any) (code int, panicked any) {
		h := s.wrap(route{name: "test", methods: []string{"GET"}, h: func(http.ResponseWriter, *http.Request) { panic(v) }})
		rec := httptest.NewRecorder()
		defer func() { panicked = recover() }()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/test", nil))
		return rec.Code, nil
	}
	if code, p := serve("a bug in a handler"); code != 500 || p != nil {
		t.Errorf("a handler's panic: status %d, passed on %v; want 500 and the server going on", code, p)
	}
	broken := &invariant.Error{Msg: "test: broken invariant: x"}
	if _, p := serve(broken); p != broken {
		t.Errorf("a broken invariant in a handler: passed on %v, want it passed on", p)
	}
	if _, p := serve(http.ErrAbortHandler); p != http.ErrAbortHandler {
		t.Errorf("ErrAbortHandler: passed on %v, want it passed on", p)
	}
}
