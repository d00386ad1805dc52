package httpx

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"tandem/internal/api/openai"
)

// CodeBodyTimeout is the error code of a request whose body did not
// arrive in time (408).
const CodeBodyTimeout = "body_timeout"

// Server returns an http.Server for addr and h: headers must arrive within
// 10 s, idle keep-alive connections close after 2 min, headers are limited
// to 64 KiB, and the server's own errors go to log at WARN. It has no
// overall read or write timeout: either would cut long streams (a read
// deadline that passes cancels the request). Bodies are bounded instead by
// BodyDeadline and ReadBody.
func Server(addr string, h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// BodyDeadline gives every request that has a body timeout from its
// headers to send all of it, whether its handler reads it or net/http
// discards it after the answer. ReadBody lifts the deadline once the whole
// body is in; a handler that never reads the body leaves it, so a body
// cannot trickle in forever and hold the connection.
func BodyDeadline(w http.ResponseWriter, r *http.Request, timeout time.Duration) {
	if r.ContentLength != 0 {
		http.NewResponseController(w).SetReadDeadline(time.Now().Add(timeout))
	}
}

// ReadBody reads r's body, at most maxBytes of it (413 past that), within
// timeout from now (408 past that). The read deadline is lifted only when
// the whole body arrived: while a stream is answered the server's
// background read must not time out, but after a failed read the server
// must not wait without limit for the rest of the body.
func ReadBody(w http.ResponseWriter, r *http.Request, maxBytes int64, timeout time.Duration) ([]byte, *openai.Error) {
	if r.ContentLength > maxBytes {
		return nil, openai.TooLarge(maxBytes)
	}
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(timeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		var ne net.Error
		switch {
		case errors.As(err, &mbe):
			return nil, openai.TooLarge(maxBytes)
		case errors.As(err, &ne) && ne.Timeout():
			return nil, &openai.Error{Status: http.StatusRequestTimeout, Type: openai.TypeInvalidRequest, Code: CodeBodyTimeout,
				Message: fmt.Sprintf("The request body did not arrive within %s.", timeout)}
		}
		return nil, openai.Invalid("", openai.CodeInvalidJSON, "Could not read the request body: %v.", err)
	}
	rc.SetReadDeadline(time.Time{})
	return body, nil
}

// Recorder is a ResponseWriter that remembers the status written, for
// metrics and panic handlers. Unwrap lets http.ResponseController reach
// the connection; Flush forwards (promhttp and streams look for it).
type Recorder struct {
	http.ResponseWriter
	// Status is the status written; 0 while nothing was.
	Status int
}

// WriteHeader records code (the first one) and forwards it.
func (r *Recorder) WriteHeader(code int) {
	if r.Status == 0 {
		r.Status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

// Write records an implicit 200 and forwards b.
func (r *Recorder) Write(b []byte) (int, error) {
	if r.Status == 0 {
		r.Status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap returns the underlying writer.
func (r *Recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Flush forwards to the underlying writer.
func (r *Recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// StatusOr200 returns the status written, or 200 when nothing was (a
// handler that wrote nothing answers 200).
func (r *Recorder) StatusOr200() int {
	if r.Status == 0 {
		return http.StatusOK
	}
	return r.Status
}

// CheckMethod answers 405 with an Allow header, and returns false, when
// methods is not nil and does not hold r's method.
func CheckMethod(w http.ResponseWriter, r *http.Request, methods []string) bool {
	if methods == nil || slices.Contains(methods, r.Method) {
		return true
	}
	allowed := strings.Join(methods, ", ")
	w.Header().Set("Allow", allowed)
	WriteError(w, openai.MethodNotAllowed(r.Method, r.URL.Path, allowed))
	return false
}

// WriteJSON answers status with v as JSON (and a newline); a value that
// cannot be encoded becomes a 500.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		WriteError(w, openai.Internal("could not encode the answer"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// WriteError answers e in OpenAI's error shape with e's status and its
// Retry-After when it has one; every 429 carries one (a 429 without
// e.RetryAfter gets openai.DefaultRetryAfter).
func WriteError(w http.ResponseWriter, e *openai.Error) {
	w.Header().Set("Content-Type", "application/json")
	ra := e.RetryAfter
	if ra <= 0 && e.Status == http.StatusTooManyRequests {
		ra = openai.DefaultRetryAfter
	}
	if ra > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(int64((ra+time.Second-1)/time.Second), 10))
	}
	w.WriteHeader(e.Status)
	w.Write(append(e.MarshalBody(), '\n'))
}

// ReadAllMax reads an answer's body r to its end, failing past limit
// bytes (so a peer's oversized answer cannot grow memory without bound).
func ReadAllMax(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read answer: %w", err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("read answer: over %d bytes", limit)
	}
	return b, nil
}

// Clip trims s and shortens it to at most n bytes, on a rune boundary,
// marking a cut with "...": for quoting a peer's answer in a message.
func Clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "..."
}
