package router_test

import (
	"strings"
	"testing"
	"time"

	"tandem/internal/router"
)

// TestTokenizeTimeoutIs504: a worker that does not answer /tokenize within
// TokenizeTimeout is reported as a timeout (504, upstream_timeout, saying
// it did not answer in time), not as a worker that could not be reached
// (finding 5 of the 2026-12-03 red-team run: eight 8 MB prompts all got
// 502 "the worker could not be reached" after 30.9 s).
func TestTokenizeTimeoutIs504(t *testing.T) {
	p := newFake(t, "prefill", answer(200, prefillAnswer))
	d := newFake(t, "decode", answer(200, decodeAnswer))
	release := make(chan struct{})
	d.count = func([]byte) int { <-release; return 1 }
	c := newCluster(t, []*fake{p}, []*fake{d}, func(o *router.Options) { o.TokenizeTimeout = 300 * time.Millisecond })
	defer close(release)
	start := time.Now()
	status, got := c.post(t, "/tokenize", `{"prompt":"x"}`)
	took := time.Since(start)
	d.nextLeg(t)
	if status != 504 || !strings.Contains(got, "upstream_timeout") || !strings.Contains(got, "did not answer") || strings.Contains(got, "could not be reached") {
		t.Errorf("a worker silent past the timeout: %d %s, want 504 upstream_timeout saying it did not answer in time", status, got)
	}
	if took > 5*time.Second {
		t.Errorf("the timeout answer took %v", took)
	}
}
