package router

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"tandem/internal/api/httpx"
	"tandem/internal/api/openai"
	"tandem/internal/router/pool"
)

// POST /v1/embeddings needs no disaggregation: any worker of the model
// computes the whole request. The router forwards the body as it came to
// the least-loaded healthy worker of a role (the roles are tried in turn,
// request by request, so both kinds of worker share the work), with the
// cluster credential as for /tokenize (workers answer embeddings only with
// it), and answers what the worker answered. A worker that cannot be
// reached, or answers 5xx or 429 (busy, draining), is excluded and the
// request sent to another, attemptsMax attempts in all; its 4xx answers
// (a bad input, an unknown model) are the client's. When every attempt
// fails, the client gets the last worker's own answer if it was busy (429)
// or unavailable (503), else a 502 naming the failure.

// embeddingsBodyBytesMax bounds a proxied embeddings answer, read whole
// before it is passed on: 2048 inputs of 4096 dimensions as JSON floats
// are about 100 MiB, so larger answers are refused with a 502.
const embeddingsBodyBytesMax = 128 << 20

// embeddingsTurn alternates the role tried first.
var embeddingsTurn atomic.Uint32

func (rt *Router) serveEmbeddings(w http.ResponseWriter, r *http.Request) {
	if !rt.admit(w, requestIDOf(r.Context())) {
		return
	}
	defer rt.active.Add(-1)
	body, e := rt.readBody(w, r)
	if e != nil {
		httpx.WriteError(w, e)
		return
	}
	roles := []pool.Role{pool.Decode, pool.Prefill}
	if embeddingsTurn.Add(1)%2 == 0 {
		roles[0], roles[1] = roles[1], roles[0]
	}
	var exclude []*pool.Worker
	var last *openai.Error
	var keep *kept
	for try := 0; try < attemptsMax; try++ {
		var wk *pool.Worker
		var err error
		for _, role := range roles {
			if wk, err = rt.workers.Pick(role, exclude, nil, 0); err == nil {
				break
			}
		}
		if wk == nil {
			if last == nil {
				rt.log.Warn("no worker for /v1/embeddings", "request", requestIDOf(r.Context()), "err", err)
				last = openai.Unavailable(pool.PublicError(err))
			}
			break
		}
		if try > 0 {
			rt.met.retries.Inc()
		}
		done, status, out, ct, le := rt.embedOn(r, wk, body)
		if done {
			if ct != "" {
				w.Header().Set("Content-Type", ct)
			}
			w.WriteHeader(status)
			w.Write(out)
			return
		}
		rt.log.Warn("embeddings attempt failed", "request", requestIDOf(r.Context()), "worker", wk.URL(), "try", try+1, "err", le)
		last = le.clientError()
		if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
			keep = &kept{status, out, ct}
		} else {
			keep = nil
		}
		if r.Context().Err() != nil {
			break
		}
		exclude = append(exclude, wk)
	}
	if keep != nil { // the last worker was busy or unavailable: its answer says so
		if keep.ct != "" {
			w.Header().Set("Content-Type", keep.ct)
		}
		if keep.status == http.StatusTooManyRequests { // every 429 carries Retry-After
			w.Header().Set("Retry-After", strconv.Itoa(int(openai.DefaultRetryAfter/time.Second)))
		}
		w.WriteHeader(keep.status)
		w.Write(keep.body)
		return
	}
	httpx.WriteError(w, last)
}

// kept is a worker's answer held while other workers are tried.
type kept struct {
	status int
	body   []byte
	ct     string
}

// embedOn sends the request to wk. done reports an answer to pass on
// (status, body, content type); otherwise the attempt failed in a way
// another worker may not (le says how) and wk's leg counts as a failure.
func (rt *Router) embedOn(r *http.Request, wk *pool.Worker, body []byte) (done bool, status int, out []byte, ct string, le *legError) {
	ctx, cancel := context.WithTimeout(r.Context(), rt.o.TokenizeTimeout)
	defer cancel()
	fail := func(kind string, err error) (bool, int, []byte, string, *legError) {
		rt.workers.Done(wk, pool.Failure, kind)
		return false, 0, nil, "", &legError{leg: wk.Role(), worker: wk.URL(), kind: kind, cause: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, wk.URL()+"/v1/embeddings", bytes.NewReader(body))
	if err != nil {
		rt.workers.Release(wk)
		return true, http.StatusInternalServerError, openai.Internal(err.Error()).MarshalBody(), "application/json", nil
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := rt.tokenizerClient().Do(req)
	if err != nil {
		if r.Context().Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within %v: %w", rt.o.TokenizeTimeout, err)
		}
		return fail(kindUnreachable, err)
	}
	defer resp.Body.Close()
	out, err = httpx.ReadAllMax(resp.Body, embeddingsBodyBytesMax)
	if err != nil {
		return fail(kindStream, err)
	}
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
		// Busy (429) and unavailable or draining (503) workers are not
		// broken: their answer is kept to pass on should every attempt
		// fail, and their breaker is left alone.
		o := pool.Failure
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
			o = pool.Neutral
		}
		rt.workers.Done(wk, o, "embeddings answered "+strconv.Itoa(resp.StatusCode))
		return false, resp.StatusCode, out, resp.Header.Get("Content-Type"),
			&legError{leg: wk.Role(), worker: wk.URL(), kind: kindStream, cause: fmt.Errorf("worker answered %d", resp.StatusCode)}
	}
	rt.workers.Done(wk, pool.Success, "")
	return true, resp.StatusCode, out, resp.Header.Get("Content-Type"), nil
}
