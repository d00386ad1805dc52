package leg

import (
	"bytes"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"tandem/internal/api/openai"
)

// Headers of a leg. The router sets them; a worker believes them only when
// the signature over them verifies.
const (
	HeaderRoom      = "X-Tandem-Room"       // the room id, 32 hex digits
	HeaderRequestID = "X-Tandem-Request-Id" // the router's request id
	HeaderLeg       = "X-Tandem-Leg"        // KindPrefill, KindDecode or KindLocal
	HeaderPrefill   = "X-Tandem-Prefill"    // decode leg only: the prefill worker's transfer address
	HeaderExpires   = "X-Tandem-Expires"    // unix milliseconds after which the signature is void
	HeaderSignature = "X-Tandem-Signature"  // hex HMAC-SHA256 of Canonical's string
	// The W3C trace context the router gives a leg: its leg span's
	// traceparent (and the client's tracestate). Signed with the rest.
	HeaderTraceParent = "Traceparent"
	HeaderTraceState  = "Tracestate"
)

// Values of HeaderLeg. A prefill and a decode leg are the two halves of a
// disaggregated request; a local leg asks a decode worker to run the whole
// request itself, prefill included (the router's selective disaggregation
// sends short prompts so). A local leg carries a room id and a request id
// like the others (the router aborts it and tracks it by them) and no
// prefill address.
const (
	KindPrefill = "prefill"
	KindDecode  = "decode"
	KindLocal   = "local"
)

// HKDF info labels of the keys derived from the cluster token. The
// transfer port derives its own keys under other labels.
const (
	LabelLeg   = "tandem leg v1"   // the HMAC key that signs legs
	LabelDebug = "tandem debug v1" // the bearer credential of /pd/* and /debug/*
)

// Lifetime is how long after signing a leg's signature is valid; MaxSkew
// is how far a verifier's clock may be behind the signer's (a worker
// refuses an expiry more than Lifetime+MaxSkew ahead of its own clock).
// A worker clock ahead of the router's by Lifetime or more refuses every
// leg as expired. Replaying a leg within its lifetime is refused by the
// worker's room table (room ids are single-use: 409).
const (
	Lifetime = 60 * time.Second
	MaxSkew  = 60 * time.Second
)

// TokenMin is the shortest cluster token accepted.
const TokenMin = 16

// Errors Verify wraps.
var (
	ErrMissing   = errors.New("leg: the request is not signed")
	ErrMalformed = errors.New("leg: malformed leg headers")
	ErrExpired   = errors.New("leg: the signature has expired")
	ErrSkew      = errors.New("leg: the expiry is too far in the future (are the router's and this worker's clocks apart?)")
	ErrBadMAC    = errors.New("leg: the signature does not match (a different cluster token, or a changed request)")
)

// Info is what a leg's headers say.
type Info struct {
	Room      string // the room id
	RequestID string // the router's request id
	Leg       string // KindPrefill, KindDecode or KindLocal
	Prefill   string // decode leg: the prefill worker's transfer address, which decode dials (empty otherwise)
	// TraceParent and TraceState are the leg's W3C trace context ("" when
	// it carries none).
	TraceParent string
	TraceState  string
}

// FromHeader reads the leg headers of h, without checking them.
func FromHeader(h http.Header) Info {
	return Info{Room: h.Get(HeaderRoom), RequestID: h.Get(HeaderRequestID), Leg: h.Get(HeaderLeg), Prefill: h.Get(HeaderPrefill),
		TraceParent: h.Get(HeaderTraceParent), TraceState: h.Get(HeaderTraceState)}
}

// Set writes li's headers into h (empty fields are left out).
func (li Info) Set(h http.Header) {
	for _, kv := range [...][2]string{{HeaderRoom, li.Room}, {HeaderRequestID, li.RequestID}, {HeaderLeg, li.Leg}, {HeaderPrefill, li.Prefill},
		{HeaderTraceParent, li.TraceParent}, {HeaderTraceState, li.TraceState}} {
		if kv[1] != "" {
			h.Set(kv[0], kv[1])
		}
	}
}

// Keys are the keys derived from one cluster token. They are safe for
// concurrent use. A nil *Keys signs nothing and checks nothing: the
// methods that take one say what they do then.
type Keys struct {
	mac   []byte // LabelLeg, 32 bytes
	debug string // LabelDebug, hex of 32 bytes
	now   func() time.Time
}

// NewKeys derives the leg and debug keys from the cluster token, which must
// be at least TokenMin bytes.
func NewKeys(token []byte) (*Keys, error) {
	if len(token) < TokenMin {
		return nil, fmt.Errorf("leg: the cluster token has %d bytes; at least %d are needed", len(token), TokenMin)
	}
	mac, err := hkdf.Key(sha256.New, token, nil, LabelLeg, 32)
	if err != nil {
		return nil, fmt.Errorf("leg: derive the leg key: %w", err)
	}
	dbg, err := hkdf.Key(sha256.New, token, nil, LabelDebug, 32)
	if err != nil {
		return nil, fmt.Errorf("leg: derive the debug credential: %w", err)
	}
	return &Keys{mac: mac, debug: hex.EncodeToString(dbg), now: time.Now}, nil
}

// Canonical returns the string a leg's signature covers: a version line,
// then each field as its decimal length, a colon, the field and a newline
// (so no two different requests give one string): method, path, room, leg
// kind, prefill address, request id, expiry (unix ms, decimal), and the
// hex SHA-256 of the body. A leg with a trace context (TraceParent or
// TraceState not empty) starts with the version line tandem-leg-v2 and
// adds both as two more fields, so that a v1 string (a leg without one,
// as routers before traces signed it) is never a v2 string: a trace
// context added to, or stripped from, a signed leg breaks its MAC.
func Canonical(method, path string, li Info, expires int64, body []byte) []byte {
	sum := sha256.Sum256(body)
	var b bytes.Buffer
	fields := []string{method, path, li.Room, li.Leg, li.Prefill, li.RequestID,
		strconv.FormatInt(expires, 10), hex.EncodeToString(sum[:])}
	if li.TraceParent != "" || li.TraceState != "" {
		b.WriteString("tandem-leg-v2\n")
		fields = append(fields, li.TraceParent, li.TraceState)
	} else {
		b.WriteString("tandem-leg-v1\n")
	}
	for _, f := range fields {
		b.WriteString(strconv.Itoa(len(f)))
		b.WriteByte(':')
		b.WriteString(f)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func (k *Keys) mac256(msg []byte) []byte {
	m := hmac.New(sha256.New, k.mac)
	m.Write(msg)
	return m.Sum(nil)
}

// Sign signs the leg whose headers h already holds (FromHeader's fields),
// for a request of method to path with body: it sets HeaderExpires to now
// plus Lifetime and HeaderSignature. A nil k does nothing.
func (k *Keys) Sign(h http.Header, method, path string, body []byte) {
	if k == nil {
		return
	}
	exp := k.now().Add(Lifetime).UnixMilli()
	h.Set(HeaderExpires, strconv.FormatInt(exp, 10))
	h.Set(HeaderSignature, hex.EncodeToString(k.mac256(Canonical(method, path, FromHeader(h), exp, body))))
}

// Verify checks that a request of method to path, with headers h and body,
// is a leg the holder of the cluster token signed and that has not
// expired, and returns its headers. A request with no signature at all
// gets an error wrapping ErrMissing; the other errors wrap ErrMalformed,
// ErrExpired, ErrSkew or ErrBadMAC.
func (k *Keys) Verify(method, path string, h http.Header, body []byte) (Info, error) {
	sig, exps := h.Get(HeaderSignature), h.Get(HeaderExpires)
	if sig == "" && exps == "" {
		return Info{}, ErrMissing
	}
	li := FromHeader(h)
	if li.Room == "" || li.RequestID == "" || (li.Leg != KindPrefill && li.Leg != KindDecode && li.Leg != KindLocal) {
		return Info{}, fmt.Errorf("%w: a signed leg needs %s, %s and %s (%q, %q or %q)", ErrMalformed,
			HeaderRoom, HeaderRequestID, HeaderLeg, KindPrefill, KindDecode, KindLocal)
	}
	if len(exps) == 0 || len(exps) > 16 || strings.Trim(exps, "0123456789") != "" {
		return Info{}, fmt.Errorf("%w: %s must be unix milliseconds", ErrMalformed, HeaderExpires)
	}
	exp, err := strconv.ParseInt(exps, 10, 64)
	if err != nil {
		return Info{}, fmt.Errorf("%w: %s: %w", ErrMalformed, HeaderExpires, err)
	}
	got, err := hex.DecodeString(sig)
	if err != nil || len(got) != sha256.Size {
		return Info{}, fmt.Errorf("%w: %s must be %d hex digits", ErrMalformed, HeaderSignature, 2*sha256.Size)
	}
	if !hmac.Equal(got, k.mac256(Canonical(method, path, li, exp, body))) {
		return Info{}, ErrBadMAC
	}
	now := k.now().UnixMilli()
	switch {
	case now >= exp:
		return Info{}, fmt.Errorf("%w (%d ms ago)", ErrExpired, now-exp)
	case exp-now > (Lifetime + MaxSkew).Milliseconds():
		return Info{}, fmt.Errorf("%w (%d ms ahead)", ErrSkew, exp-now)
	}
	return li, nil
}

// Credential returns the value of the Authorization header that the
// /pd/* and /debug/* endpoints require: "Bearer " and the hex of the
// LabelDebug key.
func (k *Keys) Credential() string { return "Bearer " + k.debug }

// CheckCredential reports whether h carries the debug credential (a
// constant-time comparison). A nil k accepts every request.
func (k *Keys) CheckCredential(h http.Header) bool {
	if k == nil {
		return true
	}
	return CheckBearer(h, k.debug)
}

// CheckBearer reports whether h's Authorization header is "Bearer want",
// comparing in constant time.
func CheckBearer(h http.Header, want string) bool {
	tok, ok := strings.CutPrefix(h.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(tok), []byte(want)) == 1
}

// Unauthorized returns a 401 in OpenAI's error shape (type
// invalid_request_error, code invalid_api_key, as OpenAI answers a bad key).
func Unauthorized(format string, args ...any) *openai.Error {
	return &openai.Error{Status: http.StatusUnauthorized, Type: openai.TypeInvalidRequest, Code: "invalid_api_key",
		Message: fmt.Sprintf(format, args...)}
}

// WriteUnauthorized answers 401 with e's body and a WWW-Authenticate
// challenge.
func WriteUnauthorized(w http.ResponseWriter, e *openai.Error) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="tandem"`)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	w.Write(append(e.MarshalBody(), '\n'))
}

// credentialMessage is the 401 message of a guarded endpoint.
const credentialMessage = "%s needs the cluster credential: Authorization: Bearer <hex of HKDF-SHA256(cluster token, %q)>; " +
	"`tandem inspect` and the router send it when they have the cluster token ($TANDEM_CLUSTER_TOKEN or --cluster-token-file)"

// RequireCredential returns next guarded by the debug credential: other
// requests get 401 before next sees them. A nil k returns next.
func (k *Keys) RequireCredential(next http.Handler) http.Handler {
	if k == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !k.CheckCredential(r.Header) {
			WriteUnauthorized(w, Unauthorized(credentialMessage, r.URL.Path, LabelDebug))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Guard is RequireCredential for a handler function (for route tables).
func Guard(k *Keys, h http.HandlerFunc) http.HandlerFunc {
	if k == nil {
		return h
	}
	return k.RequireCredential(h).ServeHTTP
}

// Transport returns a RoundTripper that adds the debug credential to every
// request it sends through base (http.DefaultTransport when nil), unless
// the request has an Authorization header already. A nil k returns base.
func (k *Keys) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if k == nil {
		return base
	}
	return credTransport{base: base, cred: k.Credential()}
}

type credTransport struct {
	base http.RoundTripper
	cred string
}

func (t credTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("Authorization") != "" {
		return t.base.RoundTrip(r)
	}
	r2 := r.Clone(r.Context())
	r2.Header.Set("Authorization", t.cred)
	return t.base.RoundTrip(r2)
}
