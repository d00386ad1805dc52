package router

import (
	"bytes"
	"context"
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
	// tokenizeTimeout bounds a proxied /tokenize or /detokenize request.
	tokenizeTimeout = 30 * time.Second
	// tokenizeBodyBytesMax bounds a proxied /tokenize answer (a large
	// prompt's token ids, and their strings when asked for).
	tokenizeBodyBytesMax = 128 << 20
)

// tokenizerPaths are the endpoints served by serveTokenizer.
var tokenizerPaths = []string{"/tokenize", "/detokenize"}

// isTokenizerPath reports whether path is one of tokenizerPaths.
func isTokenizerPath(path string) bool {
	return slices.Contains(tokenizerPaths, path)
}

// serveTokenizer proxies /tokenize and /detokenize to a healthy worker.
func (rt *Router) serveTokenizer(w http.ResponseWriter, r *http.Request) {
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
	ctx, cancel := context.WithTimeout(r.Context(), tokenizeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, wk.URL()+r.URL.Path, bytes.NewReader(body))
	if err != nil {
		httpx.WriteError(w, openai.Internal(err.Error()))
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := rt.tokenizerClient().Do(req)
	if err != nil {
		le := &legError{leg: role, worker: wk.URL(), kind: kindUnreachable, cause: err}
		rt.log.Warn("tokenizer request failed", "request", requestIDOf(r.Context()), "path", r.URL.Path, "worker", wk.URL(), "err", le)
		httpx.WriteError(w, le.clientError())
		return
	}
	defer resp.Body.Close()
	out, err := httpx.ReadAllMax(resp.Body, tokenizeBodyBytesMax)
	if err != nil {
		le := &legError{leg: role, worker: wk.URL(), kind: kindStream, cause: err}
		rt.log.Warn("tokenizer request failed", "request", requestIDOf(r.Context()), "path", r.URL.Path, "worker", wk.URL(), "err", le)
		httpx.WriteError(w, le.clientError())
		return
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(out)
}

// tokenizerClient is the probe client (it carries the cluster credential)
// without its short overall timeout: tokenizeTimeout bounds the request.
func (rt *Router) tokenizerClient() *http.Client {
	c := *rt.probeClient
	c.Timeout = 0
	return &c
}
