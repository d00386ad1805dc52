package router

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"tandem/internal/api/httpx"
	"tandem/internal/api/openai"
	"tandem/internal/router/pool"
)

// vLLM's POST /tokenize and POST /detokenize: the router forwards the body
// as it came to one healthy decode worker (a prefill worker when no decode
// worker is up; both load the same model and tokenizer) and answers what
// the worker answered. It sends them with the cluster credential (the
// probe client's transport, as for /v1/models): workers answer these
// endpoints only with it, and they need no leg signature, since they start
// no generation. The router's API key, when set, is required on them as on
// /v1/*.

const (
	// DefaultTokenizeTimeout is Options.TokenizeTimeout's default.
	DefaultTokenizeTimeout = 30 * time.Second
	// tokenizeBodyBytesMax bounds a proxied /tokenize answer, read whole
	// before it is passed on. A worker counts at most twice its context
	// and answers at most that many ids and strings (internal/server), a
	// few MiB at a 128k context; it also admits only a few requests at
	// once, so this bounds what the router holds for them.
	tokenizeBodyBytesMax = 32 << 20
)

// tokenizerPaths are the endpoints served by serveTokenizer.
var tokenizerPaths = []string{"/tokenize", "/detokenize"}

// isTokenizerPath reports whether path is one of tokenizerPaths.
func isTokenizerPath(path string) bool {
	return slices.Contains(tokenizerPaths, path)
}

// serveTokenizer proxies /tokenize and /detokenize to a healthy worker.
func (rt *Router) serveTokenizer(w http.ResponseWriter, r *http.Request) {
	if !rt.admit(w, requestIDOf(r.Context())) {
		return
	}
	defer rt.active.Add(-1)
	body, e := rt.readBody(w, r)
	if e != nil {
		httpx.WriteError(w, e)
		return
	}
	role := pool.Decode
	wk, err := rt.workers.Pick(role, nil, nil, 0)
	if err != nil {
		role = pool.Prefill
		if wk, err = rt.workers.Pick(role, nil, nil, 0); err != nil {
			rt.log.Warn("no worker for "+r.URL.Path, "request", requestIDOf(r.Context()), "err", err)
			httpx.WriteError(w, openai.Unavailable(pool.PublicError(err)))
			return
		}
	}
	defer rt.workers.Release(wk)
	ctx, cancel := context.WithTimeout(r.Context(), rt.o.TokenizeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, wk.URL()+r.URL.Path, bytes.NewReader(body))
	if err != nil {
		httpx.WriteError(w, openai.Internal(err.Error()))
		return
	}
	req.Header.Set("Content-Type", "application/json")
	fail := func(kind string, err error) {
		le := &legError{leg: role, worker: wk.URL(), kind: kind, cause: err}
		rt.log.Warn("tokenizer request failed", "request", requestIDOf(r.Context()), "path", r.URL.Path, "worker", wk.URL(), "err", le)
		if r.Context().Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// The worker is slow, not gone: say so (a busy worker queues
			// /tokenize, internal/server), with a timeout's status.
			httpx.WriteError(w, &openai.Error{Status: http.StatusGatewayTimeout, Type: openai.TypeServer, Code: codeUpstreamTimeout,
				Message: fmt.Sprintf("The %s worker did not answer %s in time (within %v): it is busy; retry later, or send a shorter text.", role, r.URL.Path, rt.o.TokenizeTimeout)})
			return
		}
		httpx.WriteError(w, le.clientError())
	}
	resp, err := rt.tokenizerClient().Do(req)
	if err != nil {
		fail(kindUnreachable, err)
		return
	}
	defer resp.Body.Close()
	out, err := httpx.ReadAllMax(resp.Body, tokenizeBodyBytesMax)
	if err != nil {
		fail(kindStream, err)
		return
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(out)
}

// tokenizerClient is the probe client (it carries the cluster credential)
// without its short overall timeout: Options.TokenizeTimeout bounds the
// request.
func (rt *Router) tokenizerClient() *http.Client {
	c := *rt.probeClient
	c.Timeout = 0
	return &c
}
