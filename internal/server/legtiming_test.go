package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"tandem/internal/api/leg"
	"tandem/internal/engine"
)

// timedBackend's streams report a leg timing.
type timedBackend struct{ *fakeBackend }

type timedStream struct{ Stream }

func (timedStream) LegTiming() string { return "first_decode_ms=1.250" }

func (b timedBackend) Submit(ctx context.Context, req engine.Request) (Stream, error) {
	st, err := b.fakeBackend.Submit(ctx, req)
	if err != nil {
		return nil, err
	}
	return timedStream{st}, nil
}

// TestLegTimingCommentAndHeader: a stream's leg timing goes out as a
// comment event just before [DONE] of a streamed answer and as a header of
// a whole one.
func TestLegTimingCommentAndHeader(t *testing.T) {
	tok := testVocab(t, "", true)
	script := append(tokens(t, tok, 0, "a", "b"), done(engine.FinishStop))
	b := timedBackend{newFake(t, tok, script, script)}
	s, _ := newTestServer(t, b, Options{})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"Hi","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasSuffix(string(body), "\n\n: x-tandem-timing first_decode_ms=1.250\n\ndata: [DONE]\n\n") || resp.Header.Get(leg.HeaderTiming) != "" {
		t.Errorf("streamed: body %q, header %q; want the stream's timing in a comment just before [DONE]", body, resp.Header.Get(leg.HeaderTiming))
	}
	rec := do(s.Handler(), "POST", "/v1/completions", `{"prompt":"Hi"}`)
	if got := rec.Header().Get(leg.HeaderTiming); rec.Code != 200 || got != "first_decode_ms=1.250" {
		t.Errorf("whole answer: %d, header %s = %q, want the stream's timing", rec.Code, leg.HeaderTiming, got)
	}
}
