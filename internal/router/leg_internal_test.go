package router

import (
	"errors"
	"io"
	"net/http"
	"testing"

	"tandem/internal/api/openai"
	"tandem/internal/router/pool"
)

func TestLegOutcomes(t *testing.T) {
	api := func(msg string) *openai.Error { return &openai.Error{Message: msg} }
	for _, tc := range []struct {
		name string
		e    *legError
		want pool.Outcome
	}{
		{"ok", nil, pool.Success},
		{"refused", &legError{kind: kindUnreachable, cause: errors.New("connection refused")}, pool.Failure},
		{"cancelled", &legError{kind: kindStream, cancelled: true}, pool.Neutral},
		{"silent", &legError{kind: kindTimeout, cause: errLegSilent}, pool.Failure},
		{"request deadline", &legError{kind: kindTimeout, cause: errRequestTimeout}, pool.Neutral},
		{"client's 400", &legError{kind: kindStatus, status: 400, api: api("bad")}, pool.Success},
		{"429", &legError{kind: kindStatus, status: http.StatusTooManyRequests, api: api("busy")}, pool.Success},
		{"engine 500", &legError{kind: kindStatus, status: 500, api: api("engine failed")}, pool.Failure},
		{"peer lost", &legError{kind: kindStatus, status: 502, api: api("disaggregated transfer failed: peer_lost: x")}, pool.Neutral},
		{"alloc timeout", &legError{kind: kindStatus, status: 504, api: api("disaggregated transfer failed: alloc_timeout")}, pool.Neutral},
		{"shutdown", &legError{kind: kindStatus, status: 503, api: api("disaggregated transfer failed: shutdown")}, pool.Failure},
		{"error event", &legError{kind: kindErrorEvent, api: api("sequence failed")}, pool.Failure},
		{"broken stream", &legError{kind: kindStream, cause: io.ErrUnexpectedEOF}, pool.Failure},
	} {
		if got := legOutcome(tc.e); got != tc.want {
			t.Errorf("%s: outcome %d, want %d", tc.name, got, tc.want)
		}
	}
}
