package router

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"tandem/internal/api/openai"
)

// Front-door headers.
const (
	// HeaderClientRequestID is the request id a client may send and gets
	// back on every answer.
	HeaderClientRequestID = "X-Request-Id"
	// HeaderRouter names the router that answered (Options.Name), on every
	// answer: several routers may share one address.
	HeaderRouter = "X-Tandem-Router"
	// requestIDMax bounds an adopted client request id.
	requestIDMax = 128
	// corsMaxAge is how long a browser may cache a preflight answer, in
	// seconds.
	corsMaxAge = 600
)

// corsAllowHeaders are the request headers a browser may send.
var corsAllowHeaders = "Authorization, Content-Type, " + HeaderClientRequestID

type requestIDKey struct{}

// requestIDOf returns the request id wrap gave r ("" outside wrap).
func requestIDOf(ctx context.Context) string {
	s, _ := ctx.Value(requestIDKey{}).(string)
	return s
}

// requestID adopts the client's X-Request-Id when it is 1 to requestIDMax
// printable ASCII characters without spaces, else mints one
// ("req-" + 24 hex digits).
func requestID(r *http.Request) string {
	if s := r.Header.Get(HeaderClientRequestID); validRequestID(s) {
		return s
	}
	return "req-" + randomHex(12)
}

func validRequestID(s string) bool {
	if s == "" || len(s) > requestIDMax {
		return false
	}
	for i := range len(s) {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// front holds the checks every request passes before its handler: the
// request id, CORS and the API key. Its fields are set once, by New.
type front struct {
	keyHash [sha256.Size]byte // of Options.APIKey; zero when none is required
	needKey bool
	origins map[string]bool // allowed CORS origins; "*" allows any
}

func newFront(o Options) (front, error) {
	f := front{}
	if o.APIKey != "" {
		f.needKey, f.keyHash = true, sha256.Sum256([]byte(o.APIKey))
	}
	for _, raw := range o.AllowedOrigins {
		s := strings.TrimRight(strings.TrimSpace(raw), "/")
		if s == "" {
			continue
		}
		if s != "*" {
			u, err := url.Parse(s)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" {
				return f, fmt.Errorf("new router: allowed origin %q must be scheme://host[:port] (or *)", raw)
			}
		}
		if f.origins == nil {
			f.origins = map[string]bool{}
		}
		f.origins[s] = true
	}
	return f, nil
}

// allowedOrigin reports whether a browser page from origin may call the
// router.
func (f *front) allowedOrigin(origin string) bool {
	return origin != "" && (f.origins["*"] || f.origins[origin])
}

// cors adds the CORS headers for an allowed origin and answers a
// preflight (OPTIONS with Access-Control-Request-Method); it reports
// whether it answered. With no allowed origins it does nothing, and
// OPTIONS gets the route's 405.
func (f *front) cors(w http.ResponseWriter, r *http.Request, methods []string) bool {
	if f.origins == nil {
		return false
	}
	origin := r.Header.Get("Origin")
	h := w.Header()
	h.Add("Vary", "Origin")
	if !f.allowedOrigin(origin) {
		return false
	}
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Expose-Headers", HeaderClientRequestID)
	if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
		return false
	}
	allowed := append(append([]string(nil), methods...), http.MethodOptions)
	if methods == nil {
		allowed = []string{http.MethodGet, http.MethodPost, http.MethodOptions}
	}
	h.Set("Access-Control-Allow-Methods", strings.Join(allowed, ", "))
	h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
	h.Set("Access-Control-Max-Age", strconv.Itoa(corsMaxAge))
	w.WriteHeader(http.StatusNoContent)
	return true
}

// authorized reports whether r may use the path: everything under /v1/,
// /tokenize and /detokenize need "Authorization: Bearer KEY" when a key is
// set; /health, /metrics and /debug/* stay open.
func (f *front) authorized(r *http.Request) bool {
	if !f.needKey || !strings.HasPrefix(r.URL.Path, "/v1/") && !isTokenizerPath(r.URL.Path) {
		return true
	}
	auth := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return subtle.ConstantTimeCompare(got[:], f.keyHash[:]) == 1
}

// unauthorized is the 401 for a missing or wrong API key, worded as
// `tandem serve` words it.
func unauthorized() *openai.Error { return openai.InvalidAPIKey() }
